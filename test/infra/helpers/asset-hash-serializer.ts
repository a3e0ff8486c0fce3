/**
 * Jest snapshot serializer: replaces asset hashes (64 hex characters, in S3 keys, asset paths and user data) with
 * a marker, so a change in esbuild output or in any bundled file does not rewrite every snapshot. Everything
 * else about the template is compared as is.
 */
const HASH = /[0-9a-f]{64}/g;

type SnapshotSerializer = Extract<Parameters<typeof expect.addSnapshotSerializer>[0], { serialize: unknown }>;

export const assetHashSerializer: SnapshotSerializer = {
  test: (value: unknown) => typeof value === 'string' && /[0-9a-f]{64}/.test(value),
  serialize: (value: string, config, indentation, depth, refs, printer) =>
    printer(value.replace(HASH, '[ASSET HASH]'), config, indentation, depth, refs),
};

import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../cdk/lib/packaging.js';

const sdk = join(REPO_ROOT, 'sdk');
const pkg = JSON.parse(readFileSync(join(sdk, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  files: string[];
  license: string;
};

describe('The SDK package as a fresh clone installs it', () => {
  // npm links a workspace's bin when it installs, before anything is built, and skips a bin whose target is
  // missing: a bin inside dist/ left `npx strata` failing on a fresh clone even after `npm run -w sdk build`.
  it('links the strata command to a committed file, not to build output', () => {
    const target = pkg.bin.strata!;
    expect(target.startsWith('dist/')).toBe(false);
    const tracked = execFileSync('git', ['ls-files', '--error-unmatch', join('sdk', target)], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    expect(tracked.trim()).toBe(`sdk/${target}`);
  });

  it('says how to build the SDK when the command runs before the build', () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-sdk-bin-'));
    try {
      cpSync(join(sdk, pkg.bin.strata!), join(dir, 'bin', 'strata.mjs'));
      const run = spawnSync(process.execPath, [join(dir, 'bin', 'strata.mjs'), '--help'], { encoding: 'utf8' });
      expect(run.status).toBe(1);
      expect(run.stderr).toContain('npm run -w sdk build');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ships the license package.json names', () => {
    expect(pkg.license).toBe('Apache-2.0');
    expect(pkg.files).toContain('LICENSE');
    expect(readFileSync(join(sdk, 'LICENSE'), 'utf8')).toBe(readFileSync(join(REPO_ROOT, 'LICENSE'), 'utf8'));
  });
});

/**
 * A consumer compiled with `strict` and `exactOptionalPropertyTypes`, passing what callers have in hand: values that
 * may be undefined (an unset environment variable, an optional setting) for the SDK's optional options. Without
 * `| undefined` on those properties such a project does not compile against the SDK's types.
 */
const CONSUMER = `
import { StrataClient, renderProgressBar, type CacheNodeState, type CostWorkload, type NodeList, type PutOptions, type ReplacementControls, type RetryInfo, type WorkflowExecutionDetail } from '@sdk';

declare const maybe: {
  ttl?: number; tags?: string[]; type?: string; timeout?: number; signal?: AbortSignal; region?: string; name?: string;
};
const onRetry: ((i: RetryInfo) => void) | undefined = process.env.DEBUG ? (i) => console.log(i.attempt) : undefined;

const strata = new StrataClient({
  endpoint: process.env.STRATA_ENDPOINT ?? 'http://localhost:8080',
  apiKey: process.env.STRATA_API_KEY,
  namespace: process.env.STRATA_NAMESPACE,
  timeoutMs: maybe.timeout,
  onRetry,
  fetch: undefined,
  userAgent: undefined,
});
const put: PutOptions = {
  ttl: maybe.ttl, tags: maybe.tags, contentType: maybe.type, ifMatch: undefined, ns: undefined, signal: maybe.signal,
};
export async function use(): Promise<void> {
  await strata.put('k', 'v', put);
  await strata.putMany([{ key: 'a', value: 1, ttl: maybe.ttl, tags: maybe.tags, contentType: maybe.type }], { ttl: maybe.ttl });
  await strata.get('k', { timeoutMs: maybe.timeout, signal: maybe.signal });
  await strata.delete('k', { ifMatch: undefined });
  await strata.workflows.start('scale-in', { nodeId: undefined, graceMs: maybe.timeout }, { name: maybe.name });
  await strata.workflows.list({ workflow: undefined, limit: undefined });
  const waitOptions = { timeoutMs: maybe.timeout, onProgress: undefined, signal: maybe.signal };
  const done: WorkflowExecutionDetail = await strata.workflows.wait('e', waitOptions);
  const workload: CostWorkload = { valueSize: '1MB', keys: 5, requestsPerMonth: 10, region: maybe.region, persistent: undefined };
  await strata.cost.placements(workload, { timeoutMs: maybe.timeout });
  console.log(renderProgressBar(done, { columns: process.stderr.columns, width: undefined }));
  await strata.workflows.start('replace-node', { nodeId: 'n3', fillNamespaces: maybe.tags, rateBytesPerSec: maybe.timeout });
  // @ts-expect-error replace-node's input names the node to replace
  await strata.workflows.start('replace-node', { fillNamespaces: maybe.tags });
  await strata.nodes.replace('n3', { fillNamespaces: maybe.tags, terminate: undefined, reason: undefined }, { name: maybe.name });
  // @ts-expect-error the node is replace's first argument, not an option
  await strata.nodes.replace('n3', { nodeId: 'n4' });
  const nodes: NodeList = await strata.nodes.list({ timeoutMs: maybe.timeout, signal: maybe.signal });
  const state: CacheNodeState | undefined = nodes.nodes[0]?.state;
  const downAt: string | undefined = nodes.nodes[0]?.down?.at;
  await strata.nodes.remove('n3', { signal: maybe.signal });
  const controls: ReplacementControls = await strata.nodes.replacement.pause(maybe.name);
  console.log(state, downAt, controls.paused, (await strata.nodes.replacement.resume()).by);
}
`;

function compileConsumer(sdkSrc: string): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'strata-sdk-consumer-'));
  try {
    writeFileSync(join(dir, 'consumer.ts'), CONSUMER);
    const tsconfig = {
      compilerOptions: {
        strict: true,
        exactOptionalPropertyTypes: true,
        noEmit: true,
        target: 'ES2023',
        lib: ['ES2023'],
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        types: ['node'],
        typeRoots: [join(REPO_ROOT, 'node_modules/@types')],
        skipLibCheck: true,
        paths: { '@sdk': [join(sdkSrc, 'index.ts')] },
      },
      files: ['consumer.ts'],
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig));
    const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
    const run = spawnSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("The SDK's types in a project with exactOptionalPropertyTypes", () => {
  // The SDK's own sources are type-checked too (the consumer imports them), under the consumer's stricter options.
  it('compile a consumer that passes possibly-undefined values as options', () => {
    const r = compileConsumer(join(sdk, 'src'));
    expect(r.output).toBe('');
    expect(r.status).toBe(0);
  });

  it("are checked with the option in the SDK's own build too", () => {
    const cfg = JSON.parse(readFileSync(join(sdk, 'tsconfig.json'), 'utf8')) as { compilerOptions: Record<string, unknown> };
    expect(cfg.compilerOptions).toMatchObject({ strict: true, exactOptionalPropertyTypes: true });
  });
});

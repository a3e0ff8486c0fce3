// Bundles every Lambda handler under lambdas/ with esbuild (ESM, Node 24, minified, source maps) into
// dist/lambdas/<group>-<name>/index.mjs and prints each bundle's size. The CDK stacks bundle the same entry
// points through NodejsFunction with the same settings; this script is for inspecting sizes.
import { build } from 'esbuild';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const entries = [];
for (const group of readdirSync(join(root, 'lambdas'))) {
  const dir = join(root, 'lambdas', group);
  if (!statSync(dir).isDirectory()) continue;
  for (const f of readdirSync(dir))
    if (f.endsWith('.ts') && !f.endsWith('.test.ts')) entries.push({ group, name: f.slice(0, -3), file: join(dir, f) });
}
for (const e of entries) {
  const outfile = join(root, 'dist', 'lambdas', `${e.group}-${e.name}`, 'index.mjs');
  await build({
    entryPoints: [e.file],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    minify: true,
    keepNames: true, // errors are named after their class (core/errors.ts)
    sourcemap: true,
    // As in the API stack: nodejs24.x ships AWS SDK v3, so it stays out of the bundle (see README, packaging).
    external: ['@aws-sdk/*'],
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
    logLevel: 'warning',
  });
  console.log(`${relative(root, outfile).padEnd(48)} ${(statSync(outfile).size / 1024).toFixed(1).padStart(8)} KiB`);
}

// Builds dist/: ESM (index + CLI, shared chunk) and a CJS bundle of the library. Declarations come from
// `tsc --emitDeclarationOnly` (see the "build" script). Zero runtime dependencies, so everything is bundled.
import { build } from 'esbuild';
import { chmodSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });

const common = { bundle: true, platform: 'node', target: 'node22', sourcemap: true, logLevel: 'warning', absWorkingDir: root };

await build({
  ...common,
  entryPoints: ['src/index.ts', 'src/cli.ts'],
  format: 'esm',
  splitting: true,
  outdir: 'dist/esm',
  chunkNames: 'chunks/[name]-[hash]',
});

await build({
  ...common,
  entryPoints: ['src/index.ts'],
  format: 'cjs',
  outfile: 'dist/cjs/index.cjs',
});

chmodSync(join(dist, 'esm', 'cli.js'), 0o755);
console.log('built dist/esm (index.js, cli.js) and dist/cjs/index.cjs');

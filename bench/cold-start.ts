/**
 * cold-start: how long a fresh Node process takes to load each API Lambda bundle, per packaging.
 *
 * - baseline  = all-bundled (the AWS SDK inside the bundle: the earlier packaging)
 * - candidate = the deployed packaging (cdk/lib/packaging.ts: `@aws-sdk/*` from the runtime)
 * - layer     = the shared core as a Lambda layer (a thin function importing `strata-core` from node_modules,
 *               the layer laid out as Lambda mounts it), measured to record why it was not chosen.
 *
 * Each sample is a new `node` process (with --enable-source-maps, as deployed) that imports the bundle: the
 * figure is the module load and evaluation time, i.e. the part of a Lambda cold start the packaging decides.
 * The service function is also invoked once (GET /v1/stats with an S3 cold tier configured, no network) to
 * include building the tiers and the SDK client. Samples of all variants are interleaved; medians reported.
 * Outside the module's directory the runtime-provided SDK is emulated by the repository's node_modules.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type BuildOptions } from 'esbuild';
import {
  ALL_BUNDLED,
  CHOSEN_PACKAGING,
  COMMON_ESBUILD,
  REPO_ROOT,
  apiLambdaEntry,
  type LambdaPackaging,
} from '../cdk/lib/packaging.js';
import type { ApiFunction } from '../core/api/route-types.js';
import { round, table } from './lib/measure.js';

const FUNCTIONS: readonly ApiFunction[] = ['keys', 'batch', 'transfer', 'service'];
const OUT = join(REPO_ROOT, 'dist', 'bench', 'cold-start');
const LAYER_PACKAGE = 'strata-core';

interface Built {
  variant: string;
  fn: ApiFunction;
  /** The function's own entry file. */
  file: string;
  /** Bytes of the function's entry file. */
  bytes: number;
  /** Bytes of code loaded from elsewhere in the deployment (the layer), 0 when none. */
  layerBytes: number;
}

function esbuildOptions(p: LambdaPackaging): BuildOptions {
  return {
    bundle: true,
    platform: COMMON_ESBUILD.platform,
    target: COMMON_ESBUILD.target,
    format: COMMON_ESBUILD.format,
    minify: COMMON_ESBUILD.minify,
    keepNames: COMMON_ESBUILD.keepNames,
    sourcemap: COMMON_ESBUILD.sourcemap,
    sourcesContent: COMMON_ESBUILD.sourcesContent,
    banner: { js: COMMON_ESBUILD.banner },
    external: [...p.externalModules],
    logLevel: 'error',
  };
}

async function buildVariant(p: LambdaPackaging): Promise<Built[]> {
  const out: Built[] = [];
  for (const fn of FUNCTIONS) {
    const file = join(OUT, p.name, fn, 'index.mjs');
    await build({ ...esbuildOptions(p), entryPoints: [apiLambdaEntry(fn)], outfile: file });
    out.push({ variant: p.name, fn, file, bytes: statSync(file).size, layerBytes: 0 });
  }
  return out;
}

/** The core as a layer: `node_modules/strata-core` (Lambda adds /opt/nodejs/node_modules) + thin functions. */
async function buildLayerVariant(): Promise<Built[]> {
  const dir = join(OUT, 'layer');
  const pkg = join(dir, 'node_modules', LAYER_PACKAGE);
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: LAYER_PACKAGE, type: 'module', main: 'index.mjs' }));
  const layerFile = join(pkg, 'index.mjs');
  await build({
    ...esbuildOptions(CHOSEN_PACKAGING),
    entryPoints: [join(REPO_ROOT, 'core', 'composition', 'api-handler.ts')],
    outfile: layerFile,
  });
  const layerBytes = statSync(layerFile).size;
  const out: Built[] = [];
  for (const fn of FUNCTIONS) {
    const file = join(dir, 'functions', fn, 'index.mjs');
    await build({
      ...esbuildOptions(CHOSEN_PACKAGING),
      stdin: {
        contents: `import { apiHandler } from '${LAYER_PACKAGE}';\nexport const handler = apiHandler('${fn}');\n`,
        resolveDir: dir,
        loader: 'js',
      },
      external: [...CHOSEN_PACKAGING.externalModules, LAYER_PACKAGE],
      outfile: file,
    });
    out.push({ variant: 'layer', fn, file, bytes: statSync(file).size, layerBytes });
  }
  return out;
}

/** Runs in the child process: import, then optionally invoke once. Prints one JSON line. */
const CHILD = `
const t0 = performance.now();
const m = await import(process.env.BENCH_ENTRY);
const t1 = performance.now();
let invokeMs = null;
if (process.env.BENCH_EVENT) {
  const context = { awsRequestId: 'bench', getRemainingTimeInMillis: () => 10000, callbackWaitsForEmptyEventLoop: false };
  const res = await m.handler(JSON.parse(process.env.BENCH_EVENT), context);
  if (res.statusCode !== 200) throw new Error('first invocation answered ' + res.statusCode + ': ' + res.body);
  invokeMs = performance.now() - t1;
}
process.stdout.write(JSON.stringify({ importMs: t1 - t0, invokeMs }));
`;

const STATS_EVENT = JSON.stringify({
  resource: '/v1/stats',
  path: '/v1/stats',
  httpMethod: 'GET',
  headers: {},
  multiValueHeaders: {},
  queryStringParameters: null,
  multiValueQueryStringParameters: null,
  pathParameters: null,
  stageVariables: null,
  body: null,
  isBase64Encoded: false,
  requestContext: { requestId: 'bench' },
});

interface Sample {
  importMs: number;
  invokeMs: number | null;
  wallMs: number;
}

function sample(b: Built): Sample {
  const started = process.hrtime.bigint();
  const r = spawnSync(process.execPath, ['--enable-source-maps', '--input-type=module', '-e', CHILD], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      AWS_REGION: 'us-east-1',
      STRATA_S3_BUCKET: 'bench-cold-start',
      BENCH_ENTRY: pathToFileURL(b.file).href,
      ...(b.fn === 'service' ? { BENCH_EVENT: STATS_EVENT } : {}),
    },
  });
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  if (r.status !== 0) throw new Error(`${b.variant}/${b.fn} failed to load: ${r.stderr || r.stdout}`);
  const { importMs, invokeMs } = JSON.parse(r.stdout) as { importMs: number; invokeMs: number | null };
  return { importMs, invokeMs, wallMs };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

interface VariantSummary {
  packaging: string;
  description: string;
  /** Largest function entry file. */
  maxBundleBytes: number;
  /** Layer bytes each function also loads. */
  layerBytes: number;
  /** Median over samples, then the mean of the four functions. */
  importMs: number;
  wallMs: number;
  /** Service function: first GET /v1/stats after the import (tiers, SDK client, coordinator). */
  firstInvokeMs: number;
  functions: Record<string, { bundleBytes: number; importMs: number; wallMs: number; firstInvokeMs?: number }>;
}

export async function coldStart(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const runs = opts.runs ?? 15;
  rmSync(OUT, { recursive: true, force: true });
  process.stdout.write('bundling variants ... ');
  const variants: { name: string; description: string; built: Built[] }[] = [
    { name: ALL_BUNDLED.name, description: ALL_BUNDLED.description, built: await buildVariant(ALL_BUNDLED) },
    { name: CHOSEN_PACKAGING.name, description: CHOSEN_PACKAGING.description, built: await buildVariant(CHOSEN_PACKAGING) },
    {
      name: 'layer',
      description: `core + ioredis/middy/zod in a layer (${LAYER_PACKAGE}), @aws-sdk/* from the runtime, thin functions`,
      built: await buildLayerVariant(),
    },
  ];
  console.log('done');
  const all = variants.flatMap((v) => v.built);
  const samples = new Map<Built, Sample[]>(all.map((b) => [b, []]));
  for (const b of all) sample(b); // warm the OS file cache once, unrecorded
  for (let i = 0; i < runs; i++) {
    process.stdout.write(`\rsample ${i + 1}/${runs}`);
    // Rotate the order so no variant always runs right after another's page-cache traffic.
    const order = [...all.slice((i * 3) % all.length), ...all.slice(0, (i * 3) % all.length)];
    for (const b of order) samples.get(b)!.push(sample(b));
  }
  console.log();

  const summaries: Record<string, VariantSummary> = {};
  for (const v of variants) {
    const functions: VariantSummary['functions'] = {};
    for (const b of v.built) {
      const s = samples.get(b)!;
      const invoke = s.map((x) => x.invokeMs).filter((x): x is number => x !== null);
      functions[b.fn] = {
        bundleBytes: b.bytes,
        importMs: round(median(s.map((x) => x.importMs)), 1),
        wallMs: round(median(s.map((x) => x.wallMs)), 1),
        ...(invoke.length ? { firstInvokeMs: round(median(invoke), 1) } : {}),
      };
    }
    const fs = Object.values(functions);
    summaries[v.name] = {
      packaging: v.name,
      description: v.description,
      maxBundleBytes: Math.max(...fs.map((f) => f.bundleBytes)),
      layerBytes: v.built[0]!.layerBytes,
      importMs: round(fs.reduce((a, f) => a + f.importMs, 0) / fs.length, 1),
      wallMs: round(fs.reduce((a, f) => a + f.wallMs, 0) / fs.length, 1),
      firstInvokeMs: functions.service?.firstInvokeMs ?? 0,
      functions,
    };
  }

  console.log(`\n${runs} fresh processes per function and variant (medians; import = load + evaluate the bundle)\n`);
  console.log(
    table(
      Object.values(summaries).flatMap((s) =>
        Object.entries(s.functions).map(([fn, f]) => ({
          variant: s.packaging,
          fn,
          'bundle KiB': (f.bundleBytes / 1024).toFixed(1),
          'layer KiB': (s.layerBytes / 1024).toFixed(1),
          'import ms': f.importMs.toFixed(1),
          'process ms': f.wallMs.toFixed(1),
          'first call ms': f.firstInvokeMs?.toFixed(1) ?? '',
        })),
      ),
    ),
  );

  const baseline = summaries[ALL_BUNDLED.name]!;
  const candidate = summaries[CHOSEN_PACKAGING.name]!;
  const ratio = (a: number, b: number) => round(a / b, 3);
  const ratios = {
    bundleBytes: ratio(candidate.maxBundleBytes, baseline.maxBundleBytes),
    importMs: ratio(candidate.importMs, baseline.importMs),
    wallMs: ratio(candidate.wallMs, baseline.wallMs),
    firstInvokeMs: ratio(candidate.firstInvokeMs, baseline.firstInvokeMs),
  };
  console.log(
    `\ncandidate (${candidate.packaging}) / baseline (${baseline.packaging}): bundle ${ratios.bundleBytes}x, import ${ratios.importMs}x, process ${ratios.wallMs}x, first call ${ratios.firstInvokeMs}x`,
  );
  return {
    scenario: 'cold-start',
    config: {
      runs,
      sourceMaps: '--enable-source-maps',
      statistic: 'median per function, mean over the 4 functions',
      sdk: 'runtime SDK emulated by the repository node_modules',
    },
    baseline,
    candidate,
    ratios,
    alternatives: { layer: summaries.layer },
  };
}

/**
 * stream: a large value through the SDK's streams (`putStream` in 8 MiB parts, 3 in flight; `getStream` through the
 * 303 download) against the same bytes over bare HTTP (one streamed PUT to an upload URL, one streamed GET of the
 * download URL), both against an `npm start`-style server (memory hot tier, local folder cold tier, its own blob
 * URLs) in this process. Each transfer's client runs in a process of its own (bench/stream-side.ts), so the client's
 * peak RSS is measured apart from the server's. Target: the streamed client's peak RSS < 128 MB for 1 GiB.
 *
 * `--size-mib N` (or STRATA_BENCH_STREAM_MIB; default 1024) sets the value's size; `--part-mib N` (8) and
 * `--concurrency N` (3) putStream's parts; `--client-old-space-mib N` runs the clients' Node with
 * `--max-old-space-size=N` (default: Node's own sizing), as a memory-limited deployment would; `--runs N` (1) the rounds,
 * each one raw and one stream transfer, alternating which goes first. Reported: MB/s each way (MB = 10^6 bytes),
 * stream against raw as a ratio, the client's RSS at start and at its peak (sampled every 20 ms, and the kernel's
 * maxRSS), the JS heap and ArrayBuffers when the RSS peaked, and the spread of the ratios over rounds. `--seconds` is
 * unused.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { startTestApi } from '../test/helpers/api-server.js';
import { round, table } from './lib/measure.js';
import { MemoryLimits } from './lib/memory-limit.js';
import { flag, median, spread, summary } from './lib/rounds.js';

const MiB = 1024 * 1024;
const MB = 1e6;
/** The "< 128 MB": 128 * 10^6 bytes, 122.1 MiB. */
const TARGET_RSS_BYTES = 128 * MB;

interface SideResult {
  mode: 'raw' | 'stream';
  bytes: number;
  putSeconds: number;
  getSeconds: number;
  intact: boolean;
  startRssBytes: number;
  peakRssBytes: number;
  /** The peak while uploading (the rest of `peakRssBytes` came while downloading). */
  putPeakRssBytes: number;
  /** The JS heap and the ArrayBuffers' bytes when the RSS peaked (while uploading, and overall). */
  putPeakAt: { heapTotalBytes: number; arrayBuffersBytes: number };
  peakAt: { heapTotalBytes: number; arrayBuffersBytes: number };
  maxRssBytes: number;
  /** The peak of the client's private memory (RssAnon: without the Node binary's file pages), on Linux. */
  peakAnonBytes: number | undefined;
  /**
   * The stream client's second download of the value through a default reader (a fresh chunk a read), after its
   * figures above were taken (they are the BYOB reader's): its own duration and peak.
   */
  defaultGet?: { seconds: number; peakRssBytes: number; maxRssBytes: number; intact: boolean } | undefined;
  /** What its memory group reported, when the client ran in one. */
  limit?: LimitReport | undefined;
}

/**
 * The client as an application ships it: stream-side.ts and the SDK bundled into one plain JS file (esbuild), run
 * by bare node. Under tsx the client would start 20+ MiB heavier, the TypeScript loader's, not the client's.
 */
async function bundleSide(dir: string): Promise<string> {
  const outfile = join(dir, 'stream-side.mjs');
  await build({
    entryPoints: [fileURLToPath(new URL('./stream-side.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    outfile,
    logLevel: 'warning',
  });
  return outfile;
}

interface Tuning {
  partSize: number;
  concurrency: number;
}

/** The streamed client's memory limit: the group it ran in, or why it ran without one. */
type ClientLimit = { limits: MemoryLimits; limitBytes: number } | { unlimited: string };

/** What the streamed client's memory group reported, when it had one. */
interface LimitReport {
  limitBytes: number;
  peakChargedBytes: number | undefined;
}

/**
 * One transfer's client in a process of its own. The streamed client runs inside `limit` when it has one (the raw
 * baseline holds the whole value and would only be killed): the shell joins the group before it runs node, so every
 * byte the client's process touches is charged to the limit.
 */
function side(
  script: string,
  mode: 'raw' | 'stream',
  url: string,
  bytes: number,
  t: Tuning,
  limit: ClientLimit,
): Promise<SideResult> {
  const group = mode === 'stream' && 'limits' in limit ? limit.limits.group('stream-client', limit.limitBytes) : undefined;
  const spawnWith = group
    ? { execPath: '/bin/sh', execArgv: ['-c', group.enterScript, 'sh', process.execPath] }
    : { execArgv: [] };
  return new Promise<SideResult>((resolve, reject) => {
    const child = fork(script, [mode, url, String(bytes), String(t.partSize), String(t.concurrency)], {
      ...spawnWith,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let result: SideResult | undefined;
    child.once('message', (m) => (result = m as SideResult));
    child.once('exit', (code, signal) => {
      const killed = group ? group.oomKills() : 0;
      const report =
        group && 'limits' in limit ? { limitBytes: limit.limitBytes, peakChargedBytes: group.peakBytes() } : undefined;
      group?.remove();
      if (result && code === 0) return resolve({ ...result, ...(report ? { limit: report } : {}) });
      if (killed > 0)
        return reject(new Error(`the ${mode} client was killed by its memory limit (${round(report!.limitBytes / MB)} MB)`));
      reject(new Error(`stream side exited (${code ?? signal})`));
    });
  });
}

/** `--client-memory-mb N` (default 128; 0: none): the streamed client's memory limit, when cgroups can be written. */
function clientLimit(): ClientLimit {
  const mb = flag('client-memory-mb', 128);
  if (mb <= 0) return { unlimited: 'no limit asked for (--client-memory-mb 0)' };
  const limits = MemoryLimits.open('strata-bench');
  if (!limits) return { unlimited: 'cgroups cannot be written here (run as root on Linux for the limit)' };
  return { limits, limitBytes: Math.round(mb * MB) };
}

export async function stream(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const sizeMiB = flag('size-mib', Number(process.env.STRATA_BENCH_STREAM_MIB ?? 1024));
  const bytes = Math.round(sizeMiB * MiB);
  const runs = opts.runs ?? 1;
  // putStream's defaults unless given: 8 MiB parts, 3 in flight.
  const tuning: Tuning = { partSize: Math.round(flag('part-mib', 8) * MiB), concurrency: flag('concurrency', 3) };
  const limit = clientLimit();
  const dir = mkdtempSync(join(tmpdir(), 'strata-bench-stream-'));
  const script = await bundleSide(dir);
  const api = await startTestApi('embedded');
  const rounds: { raw: SideResult; stream: SideResult }[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      const order: ('raw' | 'stream')[] = r % 2 === 0 ? ['raw', 'stream'] : ['stream', 'raw'];
      const got: Partial<Record<'raw' | 'stream', SideResult>> = {};
      for (const mode of order) got[mode] = await side(script, mode, api.url, bytes, tuning, limit);
      rounds.push({ raw: got.raw!, stream: got.stream! });
      for (const x of [got.raw!, got.stream!]) if (!x.intact) throw new Error(`${x.mode}: the bytes read back differ`);
      if (got.stream!.defaultGet?.intact === false) throw new Error('stream: the default reader read back other bytes');
    }
  } finally {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const rate = (s: SideResult, way: 'put' | 'get') => bytes / MB / (way === 'put' ? s.putSeconds : s.getSeconds);
  const over = (f: (r: { raw: SideResult; stream: SideResult }) => number) => summary(rounds.map(f), 1);
  const fig = (mode: 'raw' | 'stream') => ({
    putMBps: over((r) => rate(r[mode], 'put')),
    getMBps: over((r) => rate(r[mode], 'get')),
    startRssMB: over((r) => r[mode].startRssBytes / MiB),
    peakRssMB: over((r) => r[mode].peakRssBytes / MiB),
    putPeakRssMB: over((r) => r[mode].putPeakRssBytes / MiB),
    maxRssMB: over((r) => r[mode].maxRssBytes / MiB),
    peakAnonMB: over((r) => (r[mode].peakAnonBytes ?? NaN) / MiB),
    atPeak: {
      heapTotalMB: over((r) => r[mode].peakAt.heapTotalBytes / MiB),
      arrayBuffersMB: over((r) => r[mode].peakAt.arrayBuffersBytes / MiB),
    },
    atPutPeak: {
      heapTotalMB: over((r) => r[mode].putPeakAt.heapTotalBytes / MiB),
      arrayBuffersMB: over((r) => r[mode].putPeakAt.arrayBuffersBytes / MiB),
    },
  });
  const putRatios = rounds.map((r) => rate(r.stream, 'put') / rate(r.raw, 'put'));
  const getRatios = rounds.map((r) => rate(r.stream, 'get') / rate(r.raw, 'get'));
  const raw = fig('raw');
  const streamed = fig('stream');
  console.log(
    table(
      (['raw', 'stream'] as const).map((m) => {
        const f = m === 'raw' ? raw : streamed;
        return {
          client: m,
          'put MB/s': f.putMBps.median,
          'get MB/s': f.getMBps.median,
          'start RSS MiB': f.startRssMB.median,
          'peak RSS MiB': f.peakRssMB.median,
          'put peak MiB': f.putPeakRssMB.median,
          'maxRSS MiB': f.maxRssMB.median,
          'peak anon MiB': f.peakAnonMB.median,
          'at peak: heap MiB': f.atPeak.heapTotalMB.median,
          'ArrayBuffers MiB': f.atPeak.arrayBuffersMB.median,
        };
      }),
    ),
  );
  const defaultGet = {
    getMBps: over((r) => bytes / MB / (r.stream.defaultGet?.seconds ?? NaN)),
    peakRssMB: over((r) => (r.stream.defaultGet?.peakRssBytes ?? NaN) / MiB),
    maxRssMB: over((r) => (r.stream.defaultGet?.maxRssBytes ?? NaN) / MiB),
  };
  console.log(
    `getStream through a default reader (a second download, after the figures above): ` +
      `${defaultGet.getMBps.median} MB/s, peak RSS ${defaultGet.peakRssMB.median} MiB, maxRSS ${defaultGet.maxRssMB.median} MiB`,
  );
  const peakMax = Math.max(...rounds.map((r) => Math.max(r.stream.peakRssBytes, r.stream.maxRssBytes)));
  console.log(
    `stream / raw: put ${round(median(putRatios), 2)}x, get ${round(median(getRatios), 2)}x; ` +
      `streamed client's peak RSS ${round(peakMax / MiB, 1)} MiB (target < 128 MB = ${round(TARGET_RSS_BYTES / MiB, 1)} MiB)`,
  );
  const charged = Math.max(...rounds.map((r) => r.stream.limit?.peakChargedBytes ?? NaN));
  console.log(
    'limits' in limit
      ? `streamed client inside a ${round(limit.limitBytes / MB)} MB memory limit (cgroup): completed every round, ` +
          `charged at most ${round(charged / MB, 1)} MB`
      : `streamed client without a memory limit: ${limit.unlimited}`,
  );
  return {
    scenario: 'stream',
    sizeMiB,
    rounds: runs,
    processes: 'the client of each transfer in a process of its own; the server in the bench process',
    streamedClientMemoryLimit:
      'limits' in limit
        ? { limitMB: round(limit.limitBytes / MB), peakChargedMB: over((r) => (r.stream.limit?.peakChargedBytes ?? NaN) / MB) }
        : limit.unlimited,
    baseline: { name: 'bare HTTP: one streamed PUT to an upload URL, one streamed GET of the download URL', ...raw },
    candidate: {
      name: `SDK putStream (${tuning.partSize / MiB} MiB parts, ${tuning.concurrency} in flight) and getStream (303 download)`,
      reader: 'BYOB, one reused 64 KiB buffer',
      ...streamed,
    },
    defaultReader: { name: 'getStream again, read through a default reader (a new chunk a read)', ...defaultGet },
    ratios: { put: summary(putRatios), get: summary(getRatios) },
    noise: runs > 1 ? { put: spread(putRatios), get: spread(getRatios) } : 'one round: not measured',
    targets: { streamedClientPeakRssMiB: `< ${round(TARGET_RSS_BYTES / MiB, 1)} (128 MB)` },
    met: {
      streamedClientPeakRss: peakMax < TARGET_RSS_BYTES,
      streamedClientPrivatePeak: Math.max(...rounds.map((r) => r.stream.peakAnonBytes ?? Infinity)) < TARGET_RSS_BYTES,
      // Every round completed (a kill raises), so this only says whether the rounds ran inside the 128 MB limit.
      completedInside128MB: 'limits' in limit && limit.limitBytes <= TARGET_RSS_BYTES,
    },
  };
}

/**
 * stream: a large value through the SDK's streams (`putStream` in 8 MiB parts, 3 in flight; `getStream` through the
 * 303 download, read through a BYOB reader, and in another client through a default one) against the same bytes over
 * bare HTTP (one streamed PUT to an upload URL, one streamed GET of the download URL), all against an `npm start`-style
 * server (memory hot tier, local folder cold tier, its own blob URLs) in this process. Each transfer's client runs in
 * a process of its own (bench/stream-side.ts), so the client's peak RSS is measured apart from the server's. Target:
 * each SDK client's peak RSS < 128 MB for 1 GiB.
 *
 * `--size-mib N` (or STRATA_BENCH_STREAM_MIB; default 1024) sets the value's size; `--part-mib N` (8) and
 * `--concurrency N` (3) putStream's parts; `--client-memory-mb N` (128; 0: none) the memory limit the SDK clients run
 * in (a cgroup, as a container's), where Node sizes its heap from it; `--runs N` (1) the rounds, each one transfer by
 * every client, starting with another each round. Reported: MB/s each way (MB = 10^6 bytes), each SDK client against
 * raw as a ratio, the client's RSS at start and at its peak (sampled every 20 ms, and the kernel's maxRSS), the JS
 * heap and ArrayBuffers when the RSS peaked, and the spread of the ratios over rounds. `--seconds` is unused.
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

/** The clients: bare HTTP, and the SDK read through a BYOB reader or a default one. */
type Mode = 'raw' | 'stream' | 'stream-default';
const MODES: readonly Mode[] = ['raw', 'stream', 'stream-default'];
/** The SDK's clients: they run inside the memory limit and are held to the target. */
const STREAMED: readonly Exclude<Mode, 'raw'>[] = ['stream', 'stream-default'];

interface SideResult {
  mode: Mode;
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
function side(script: string, mode: Mode, url: string, bytes: number, t: Tuning, limit: ClientLimit): Promise<SideResult> {
  const group = mode !== 'raw' && 'limits' in limit ? limit.limits.group(`${mode}-client`, limit.limitBytes) : undefined;
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
  type Round = Record<Mode, SideResult>;
  const rounds: Round[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      // Each round starts with another client, so none always runs first on a machine just woken or just loaded.
      const order = MODES.map((_, i) => MODES[(i + r) % MODES.length]!);
      const got: Partial<Round> = {};
      for (const mode of order) got[mode] = await side(script, mode, api.url, bytes, tuning, limit);
      for (const mode of MODES) if (!got[mode]!.intact) throw new Error(`${mode}: the bytes read back differ`);
      rounds.push(got as Round);
    }
  } finally {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const rate = (s: SideResult, way: 'put' | 'get') => bytes / MB / (way === 'put' ? s.putSeconds : s.getSeconds);
  const over = (f: (r: Round) => number) => summary(rounds.map(f), 1);
  const fig = (mode: Mode) => ({
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
  const figs = Object.fromEntries(MODES.map((m) => [m, fig(m)])) as Record<Mode, ReturnType<typeof fig>>;
  const ratios = (mode: Exclude<Mode, 'raw'>, way: 'put' | 'get') => rounds.map((r) => rate(r[mode], way) / rate(r.raw, way));
  console.log(
    table(
      MODES.map((m) => {
        const f = figs[m];
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
  /** A client's highest peak over the rounds: the sampled RSS or the kernel's maxRSS, whichever is higher. */
  const peakOf = (mode: Mode) => Math.max(...rounds.map((r) => Math.max(r[mode].peakRssBytes, r[mode].maxRssBytes)));
  for (const mode of STREAMED)
    console.log(
      `${mode} / raw: put ${round(median(ratios(mode, 'put')), 2)}x, get ${round(median(ratios(mode, 'get')), 2)}x; ` +
        `highest peak RSS ${round(peakOf(mode) / MiB, 1)} MiB (target < 128 MB = ${round(TARGET_RSS_BYTES / MiB, 1)} MiB)`,
    );
  const charged = Math.max(...rounds.flatMap((r) => STREAMED.map((m) => r[m].limit?.peakChargedBytes ?? NaN)));
  console.log(
    'limits' in limit
      ? `streamed clients inside a ${round(limit.limitBytes / MB)} MB memory limit (cgroup): completed every round, ` +
          `charged at most ${round(charged / MB, 1)} MB`
      : `streamed clients without a memory limit: ${limit.unlimited}`,
  );
  const candidate = (mode: Exclude<Mode, 'raw'>, reader: string) => ({
    name: `SDK putStream (${tuning.partSize / MiB} MiB parts, ${tuning.concurrency} in flight) and getStream (303 download)`,
    reader,
    ...figs[mode],
    ratios: { put: summary(ratios(mode, 'put')), get: summary(ratios(mode, 'get')) },
    noise: runs > 1 ? { put: spread(ratios(mode, 'put')), get: spread(ratios(mode, 'get')) } : 'one round: not measured',
    charged: over((r) => (r[mode].limit?.peakChargedBytes ?? NaN) / MB),
  });
  return {
    scenario: 'stream',
    sizeMiB,
    rounds: runs,
    processes: 'the client of each transfer in a process of its own; the server in the bench process',
    streamedClientMemoryLimit: 'limits' in limit ? { limitMB: round(limit.limitBytes / MB) } : limit.unlimited,
    baseline: { name: 'bare HTTP: one streamed PUT to an upload URL, one streamed GET of the download URL', ...figs.raw },
    candidate: candidate('stream', 'BYOB, one reused 64 KiB buffer'),
    defaultReader: candidate('stream-default', 'default reader (a new chunk a read)'),
    targets: { streamedClientPeakRssMiB: `< ${round(TARGET_RSS_BYTES / MiB, 1)} (128 MB)` },
    met: {
      byobReaderPeakRss: peakOf('stream') < TARGET_RSS_BYTES,
      defaultReaderPeakRss: peakOf('stream-default') < TARGET_RSS_BYTES,
      privatePeak: Math.max(...rounds.flatMap((r) => STREAMED.map((m) => r[m].peakAnonBytes ?? Infinity))) < TARGET_RSS_BYTES,
      // Every round completed (a kill raises), so this only says whether the rounds ran inside the 128 MB limit.
      completedInside128MB: 'limits' in limit && limit.limitBytes <= TARGET_RSS_BYTES,
    },
  };
}

/**
 * transforms: what the codec's foreground transforms cost (paper 003, Tiera, Table 1's compress and encrypt
 * responses and the compression/dedup cost figures of its §4), in Strata's terms: `ValueCodec.encode` and `decode`
 * (core/transforms/codec.ts) on text-like and random values of 1 KiB, 64 KiB and 1 MiB, in one process.
 *
 * - compression (zstd, levels 1, 3 = the policy default, and 9): the ratio bytes in / bytes stored (the codec keeps
 *   a value as it is when zstd does not shrink it, so random values stay at 1.00 and their decode has nothing to
 *   undo), and CPU time per MiB of value for encode and decode;
 * - encryption (AES-256-GCM under a data key of a LocalKeyring in a temp folder): CPU per MiB for encode and decode.
 *   The data key is generated on the first write and kept (and its unwrapped form with it), so what is timed is the
 *   AES-GCM work and the codec's own copying, not the keyring;
 * - compress (level 3) then encrypt, together;
 * - the baseline, in the same run: a plain copy of the value (`Buffer.from(value)`), and every figure as a ratio to
 *   it.
 *
 * CPU time is `process.cpuUsage()` (user + system, every thread of the process: values above 128 KiB are
 * compressed on zlib's thread pool, and that time counts). Each measurement runs whole passes over the value set
 * for at least `--measure-ms` of wall time, after a full garbage collection; every round takes each value set's
 * measurements in a rotated order (interleaved), and the figures are the median over rounds with min..max beside
 * it. Ratios to the copy are taken within each round (same set, same round), then summarised the same way.
 *
 * Flags: `--runs N` rounds (default 7), `--measure-ms N` per measurement (default 60). `--seconds` is not used.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { EntryEncoding } from '../core/model/entry.js';
import { ValueCodec, ZSTD_AVAILABLE, type ValueTransform } from '../core/transforms/codec.js';
import { LocalKeyring } from '../core/transforms/keyring.js';
import { round, table } from './lib/measure.js';
import { prng } from './lib/rounds.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const DEFAULT_ROUNDS = 7;
const DEFAULT_MEASURE_MS = 60;
const WARMUP_MEASURE_MS = 10;
const NS = 'bench';
const MASTER_KEY = 'bench-transforms';
/** Values per set: about 4 MiB of 1 MiB values, 2 MiB of 64 KiB ones, 256 KiB of 1 KiB ones. */
const SETS: ReadonlyArray<{ size: number; count: number }> = [
  { size: KiB, count: 256 },
  { size: 64 * KiB, count: 32 },
  { size: MiB, count: 4 },
];
const KINDS = ['text', 'random'] as const;
type Kind = (typeof KINDS)[number];

/** The transforms measured, in table order; the policy's default size floor (1 KiB: every value here qualifies). */
const CASES: ReadonlyArray<{ name: string; t: ValueTransform }> = [
  { name: 'zstd 1', t: { compress: { minBytes: 1024, level: 1 } } },
  { name: 'zstd 3', t: { compress: { minBytes: 1024, level: 3 } } },
  { name: 'zstd 9', t: { compress: { minBytes: 1024, level: 9 } } },
  { name: 'aes', t: { encrypt: { key: MASTER_KEY } } },
  { name: 'zstd 3 + aes', t: { compress: { minBytes: 1024, level: 3 }, encrypt: { key: MASTER_KEY } } },
];

// ---- values ----------------------------------------------------------------------------------------------------

const FIRST = [
  'Ada',
  'Alan',
  'Grace',
  'Linus',
  'Barbara',
  'Ken',
  'Dennis',
  'Margaret',
  'Edsger',
  'Donald',
  'Frances',
  'John',
  'Radia',
  'Tim',
  'Sophie',
  'Niklaus',
  'Leslie',
  'Shafi',
  'Butler',
  'Adele',
];
const LAST = [
  'Lovelace',
  'Turing',
  'Hopper',
  'Torvalds',
  'Liskov',
  'Thompson',
  'Ritchie',
  'Hamilton',
  'Dijkstra',
  'Knuth',
  'Allen',
  'Backus',
  'Perlman',
  'Lee',
  'Wilson',
  'Wirth',
  'Lamport',
  'Goldwasser',
  'Lampson',
  'Goldberg',
];
const CITIES = [
  'Lisbon',
  'Oslo',
  'Minneapolis',
  'Heraklion',
  'Nairobi',
  'Osaka',
  'Valparaíso',
  'Tartu',
  'Cork',
  'Brno',
  'Kraków',
  'Porto',
  'Leeds',
  'Austin',
  'Pune',
  'Daejeon',
];
const STATUS = ['pending', 'paid', 'packed', 'shipped', 'delivered', 'returned', 'cancelled'];
const WORDS = (
  'the of and to in is was for on that with as by at from it this be are or an which not have has but ' +
  'order customer parcel delivery window address courier warehouse shelf stock item label return refund ' +
  'please leave at door ring bell twice fragile handle with care gift wrap note included before after ' +
  'morning evening weekend office reception neighbour side gate code call on arrival no signature needed ' +
  'replacement missing damaged box size colour blue red green black white large small medium pair set ' +
  'cable charger adapter lamp chair desk mug kettle book notebook pen pencil backpack jacket shoes socks'
).split(' ');

/** One JSON-ish order record: repeated field names, words from a skewed vocabulary, and ids, times and prices. */
function record(rand: () => number, n: number): string {
  const pick = <T>(xs: readonly T[], skew = 1): T => xs[Math.floor(rand() ** skew * xs.length)]!;
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const hex = (digits: number) => Array.from({ length: digits }, () => '0123456789abcdef'[int(0, 15)]).join('');
  const items = Array.from({ length: int(1, 4) }, () => ({
    sku: `SKU-${String(int(0, 1999)).padStart(5, '0')}`,
    qty: int(1, 5),
    price: int(99, 19999) / 100,
  }));
  const ts = new Date(Date.UTC(2026, 10, 1) + n * 37_000 + int(0, 36_999)).toISOString();
  return JSON.stringify({
    id: `ord-${hex(8)}`,
    ts,
    customer: { id: int(100000, 999999), name: `${pick(FIRST)} ${pick(LAST)}`, city: pick(CITIES, 2) },
    status: pick(STATUS, 1.5),
    items,
    total: Math.round(items.reduce((a, it) => a + it.qty * it.price, 0) * 100) / 100,
    note: Array.from({ length: int(3, 18) }, () => pick(WORDS, 2.5)).join(' '),
  });
}

/** `count` text values of `size` bytes each: JSON lines of order records, cut at `size` (ASCII-ish; cut by bytes). */
function textValues(size: number, count: number): Buffer[] {
  const rand = prng(0x5eed + size);
  let n = 0;
  return Array.from({ length: count }, () => {
    const lines: string[] = [];
    let bytes = 0;
    while (bytes < size) {
      const line = record(rand, n++) + '\n';
      lines.push(line);
      bytes += Buffer.byteLength(line);
    }
    return Buffer.from(lines.join('')).subarray(0, size);
  });
}

// ---- measuring -------------------------------------------------------------------------------------------------

interface Stored {
  value: Buffer;
  encoding?: EntryEncoding;
}

interface ValueSet {
  name: string;
  kind: Kind;
  size: number;
  values: Buffer[];
  /** Per case: the values as stored. */
  stored: Map<string, Stored[]>;
}

/** One measurement: what it runs over a whole pass of the set (`calls` values of `bytes` bytes in all). */
interface Op {
  name: string;
  pass: () => unknown;
}

let sink = 0;

/**
 * A full collection before each measurement, so that garbage left by the one before (1 MiB buffers, zlib handles)
 * is not collected, and counted, in the next one's time. `--expose-gc` set at run time reaches a new context only.
 */
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/** CPU ms (user + system) and wall ms per MiB of value: whole passes until `budgetMs` of wall time has gone by. */
async function measure(op: Op, bytesPerPass: number, budgetMs: number): Promise<{ cpuMsPerMiB: number; wallMsPerMiB: number }> {
  collectGarbage();
  let passes = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  do {
    await op.pass();
    passes++;
  } while (performance.now() - t0 < budgetMs);
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const mib = (passes * bytesPerPass) / MiB;
  return { cpuMsPerMiB: (cpu.user + cpu.system) / 1000 / mib, wallMsPerMiB: wall / mib };
}

/** The copy baseline, then encode and decode of every case (decode only where some value was transformed). */
function opsOf(codec: ValueCodec, set: ValueSet): Op[] {
  const key = (i: number) => `${set.name}/${i}`;
  const ops: Op[] = [
    {
      name: 'copy',
      pass: () => {
        for (const v of set.values) sink ^= Buffer.from(v).length;
      },
    },
  ];
  for (const c of CASES) {
    const stored = set.stored.get(c.name)!;
    ops.push({
      name: `${c.name} encode`,
      pass: async () => {
        for (let i = 0; i < set.values.length; i++) sink ^= (await codec.encode(NS, key(i), set.values[i]!, c.t)).value.length;
      },
    });
    if (stored.some((s) => s.encoding))
      ops.push({
        name: `${c.name} decode`,
        pass: async () => {
          for (let i = 0; i < stored.length; i++) {
            const s = stored[i]!;
            // A value stored as it was has no encoding, and a read has nothing to undo (the codec is not called).
            if (s.encoding) sink ^= (await codec.decode(NS, key(i), s.value, s.encoding)).length;
          }
        },
      });
  }
  return ops;
}

interface Summary {
  median: number;
  min: number;
  max: number;
}

function summary(xs: readonly number[], digits = 3): Summary {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median: round(median, digits), min: round(s[0]!, digits), max: round(s.at(-1)!, digits) };
}

const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3));
const cell = (s: Summary | undefined, unit = '') =>
  s ? `${fmt(s.median)}${unit} (${fmt(s.min)}-${fmt(s.max)})` : '- (stored as is)';
const sizeName = (n: number) => (n >= MiB ? `${n / MiB} MiB` : `${n / KiB} KiB`);

function flagNumber(name: string, dflt: number): number {
  const argv = process.argv.slice(2);
  const i = argv.indexOf(`--${name}`);
  const raw = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer (got '${raw}')`);
  return n;
}

export async function transforms(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  if (!ZSTD_AVAILABLE) throw new Error('transforms needs zstd in node:zlib (Node 22.15 or later)');
  const rounds = opts.runs ?? DEFAULT_ROUNDS;
  const measureMs = flagNumber('measure-ms', DEFAULT_MEASURE_MS);
  const keyDir = mkdtempSync(join(tmpdir(), 'strata-bench-keys-'));
  const codec = new ValueCodec({ keyring: new LocalKeyring({ dir: keyDir, create: true }) });
  try {
    // ---- the value sets, what each case stores, and a check that every stored value reads back ----
    const sets: ValueSet[] = [];
    for (const kind of KINDS)
      for (const { size, count } of SETS) {
        const values = kind === 'text' ? textValues(size, count) : Array.from({ length: count }, () => randomBytes(size));
        sets.push({ name: `${kind} ${sizeName(size)}`, kind, size, values, stored: new Map() });
      }
    const ratios: Record<string, Record<string, number>> = {};
    for (const set of sets) {
      ratios[set.name] = {};
      for (const c of CASES) {
        const stored: Stored[] = [];
        for (let i = 0; i < set.values.length; i++) {
          const v = set.values[i]!;
          const s = await codec.encode(NS, `${set.name}/${i}`, v, c.t);
          const back = s.encoding ? await codec.decode(NS, `${set.name}/${i}`, s.value, s.encoding) : s.value;
          if (!back.equals(v)) throw new Error(`${c.name} of ${set.name}/${i} does not read back`);
          stored.push(s);
        }
        set.stored.set(c.name, stored);
        const inBytes = set.values.reduce((a, v) => a + v.length, 0);
        ratios[set.name]![c.name] = round(inBytes / stored.reduce((a, s) => a + s.value.length, 0), 4);
      }
    }
    console.log(
      'compression ratio (bytes in / bytes stored):\n' +
        table(
          sets.map((s) => ({
            values: `${s.name} x ${s.values.length}`,
            ...Object.fromEntries(CASES.map((c) => [c.name, ratios[s.name]![c.name]!.toFixed(3)])),
          })),
        ),
    );

    // ---- rounds: every set's measurements, interleaved in a rotated order; one short warm-up round first ----
    const opsBySet = new Map(sets.map((s) => [s.name, opsOf(codec, s)]));
    const rows: Array<Record<string, { cpuMsPerMiB: number; wallMsPerMiB: number }>> = [];
    const started = performance.now();
    for (let r = -1; r < rounds; r++) {
      const row: Record<string, { cpuMsPerMiB: number; wallMsPerMiB: number }> = {};
      for (const set of sets) {
        const ops = opsBySet.get(set.name)!;
        const bytesPerPass = set.values.length * set.size;
        for (let j = 0; j < ops.length; j++) {
          const op = ops[(j + Math.max(r, 0)) % ops.length]!;
          row[`${set.name} | ${op.name}`] = await measure(op, bytesPerPass, r < 0 ? WARMUP_MEASURE_MS : measureMs);
        }
      }
      if (r < 0) continue;
      rows.push(row);
      const copies = sets.map((s) => `${fmt(row[`${s.name} | copy`]!.cpuMsPerMiB)}`).join(' / ');
      console.log(
        `  round ${r + 1}/${rounds} (${((performance.now() - started) / 1000).toFixed(1)} s): copy CPU ms/MiB ${copies}`,
      );
    }

    // ---- figures: median and min..max over rounds, of ms per MiB and of the ratio to the same round's copy ----
    const figure = (set: ValueSet, op: string) => {
      const id = `${set.name} | ${op}`;
      if (!rows[0]![id]) return undefined;
      return {
        cpuMsPerMiB: summary(
          rows.map((x) => x[id]!.cpuMsPerMiB),
          4,
        ),
        toCopy: summary(
          rows.map((x) => x[id]!.cpuMsPerMiB / x[`${set.name} | copy`]!.cpuMsPerMiB),
          3,
        ),
        wallMsPerMiB: summary(
          rows.map((x) => x[id]!.wallMsPerMiB),
          4,
        ),
      };
    };
    const figures: Record<string, Record<string, unknown>> = {};
    const printed: Record<string, string>[] = [];
    for (const set of sets) {
      const copy = figure(set, 'copy')!;
      figures[set.name] = { copy: { cpuMsPerMiB: copy.cpuMsPerMiB, wallMsPerMiB: copy.wallMsPerMiB } };
      printed.push({
        values: set.name,
        transform: 'copy (baseline)',
        'in/stored': '1.000',
        'encode CPU ms/MiB': cell(copy.cpuMsPerMiB),
        'encode x copy': '1',
        'decode CPU ms/MiB': '',
        'decode x copy': '',
      });
      for (const c of CASES) {
        const enc = figure(set, `${c.name} encode`)!;
        const dec = figure(set, `${c.name} decode`);
        figures[set.name]![c.name] = { ratio: ratios[set.name]![c.name], encode: enc, decode: dec ?? 'stored as is' };
        printed.push({
          values: '',
          transform: c.name,
          'in/stored': ratios[set.name]![c.name]!.toFixed(3),
          'encode CPU ms/MiB': cell(enc.cpuMsPerMiB),
          'encode x copy': cell(enc.toCopy, 'x'),
          'decode CPU ms/MiB': cell(dec?.cpuMsPerMiB),
          'decode x copy': dec ? cell(dec.toCopy, 'x') : '',
        });
      }
    }
    console.log(`\nCPU per MiB of value, median (min-max) over ${rounds} rounds; x copy = against Buffer.from in the same round`);
    console.log(table(printed));
    const copyNoise = Object.fromEntries(
      sets.map((s) => {
        const c = summary(
          rows.map((x) => x[`${s.name} | copy`]!.cpuMsPerMiB),
          5,
        );
        return [s.name, round((c.max - c.min) / c.median, 3)];
      }),
    );
    console.log(
      `\nnoise: the copy baseline's (max - min)/median over rounds: ` +
        Object.entries(copyNoise)
          .map(([k, v]) => `${k} ${(v * 100).toFixed(0)}%`)
          .join(', '),
    );
    console.log(
      `data keys generated ${codec.stats.dataKeysGenerated}, unwrapped through the keyring ${codec.stats.dataKeysUnwrapped} ` +
        `(the codec kept both: the encrypt figures are AES-GCM and the codec's copies); sink ${sink & 1}`,
    );
    return {
      scenario: 'transforms',
      config: {
        sets: sets.map((s) => ({ name: s.name, values: s.values.length, bytes: s.size })),
        cases: CASES,
        rounds,
        measureMs,
        text: 'JSON lines of order records (seeded mulberry32): repeated field names, skewed vocabulary, ids, times, prices',
        statistic:
          'CPU time (process.cpuUsage user + system, all threads) per MiB of value (in for encode, out for decode); ' +
          'median and min..max over interleaved rounds; x copy = per-round ratio to Buffer.from(value) of the same set',
      },
      ratios,
      figures,
      copyNoise,
      dataKeys: { generated: codec.stats.dataKeysGenerated, unwrapped: codec.stats.dataKeysUnwrapped },
      rounds: rows,
    };
  } finally {
    rmSync(keyDir, { recursive: true, force: true });
  }
}

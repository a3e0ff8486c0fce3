import { appendFileSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FRAME_BYTES, Journal, JournalCorruptError, readJournal } from '../../cachenode/src/journal.js';
import { INLINE_VALUE_MAX_BYTES, NodeStore } from '../../cachenode/src/store.js';
import { storeKey } from '../../core/nodes/wire.js';
import { entry, tempDir } from './warm-fixtures.js';

const segments = (dir: string) =>
  readdirSync(dir)
    .filter((f) => /^journal-\d{16}\.log$/.test(f))
    .sort();
const spares = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith('journal-spare-'))
    .sort();
/** A record to append: its payload behind the space for its frame. */
const rec = (payload: string) => Buffer.concat([Buffer.alloc(FRAME_BYTES), Buffer.from(payload)]);
const payloads = (dir: string) => [...readJournal(dir).records].map((r) => [r.seq, r.payload.toString()]);

describe('write journal (segment files on a temp dir)', () => {
  const tmp = tempDir('strata-journal-');
  beforeEach(() => {
    tmp.remove();
    mkdirSync(tmp.dir, { recursive: true });
  });
  afterAll(() => tmp.remove());

  it('numbers records on from firstSeq, acknowledges them once written and reads them back in order', async () => {
    const durable: number[] = [];
    const j = new Journal({ dir: tmp.dir, fsync: true, firstSeq: 41, onDurable: (s) => durable.push(s) });
    const a = j.append([rec('a'), rec('bc')]);
    const b = j.append([rec('d')]);
    expect([a.seq, b.seq]).toEqual([42, 43]);
    await Promise.all([a.durable, b.durable]);
    expect(j.durableSeq).toBe(43);
    expect(durable[durable.length - 1]).toBe(43);
    expect(payloads(tmp.dir)).toEqual([
      [41, 'a'],
      [42, 'bc'],
      [43, 'd'],
    ]);
    // Nothing released: closing keeps the segment for a replay.
    await j.close();
    expect(segments(tmp.dir)).toEqual(['journal-0000000000000041.log']);
  });

  it('ends the journal at a torn record in its last segment (a write under way at a crash)', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: false, firstSeq: 1 });
    await j.append([rec('kept'), rec('torn')]).durable;
    await j.close();
    const file = join(tmp.dir, segments(tmp.dir)[0]!);
    writeFileSync(file, readFileSync(file).subarray(0, statSync(file).size - 2));
    const r = readJournal(tmp.dir);
    expect([...r.records].map((x) => x.payload.toString())).toEqual(['kept']);
    expect(r.lastSeq()).toBe(1);
  });

  it('refuses a damaged record before the last segment (a gap before the next one), and any other gap', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: false, firstSeq: 1, segmentBytes: 16 });
    await j.append([rec('first segment')]).durable;
    await j.append([rec('second segment')]).durable;
    await j.close();
    const [first, second] = segments(tmp.dir);
    expect([first, second]).toEqual(['journal-0000000000000001.log', 'journal-0000000000000002.log']);
    expect(payloads(tmp.dir)).toEqual([
      [1, 'first segment'],
      [2, 'second segment'],
    ]);
    // Bytes after a segment's last record end it (a recycled file's old records look the same).
    appendFileSync(join(tmp.dir, first!), 'garbage');
    expect(payloads(tmp.dir)).toHaveLength(2);
    // A damaged record does too, and the next segment then starts after a gap.
    const damaged = readFileSync(join(tmp.dir, first!));
    damaged[FRAME_BYTES + 2] = damaged[FRAME_BYTES + 2]! ^ 0xff;
    writeFileSync(join(tmp.dir, first!), damaged);
    expect(() => payloads(tmp.dir)).toThrow(JournalCorruptError);
    expect(() => payloads(tmp.dir)).toThrow(
      /starts at record 2, but the segment before it ends at 0 \(missing, or damaged after that record\)/,
    );
    rmSync(join(tmp.dir, first!));
    writeFileSync(join(tmp.dir, 'journal-0000000000000001.log'), ''); // records 1.. but none in it
    expect(() => payloads(tmp.dir)).toThrow(/starts at record 2, but the segment before it ends at 0/);
  });

  it('skips records the caller holds already, and a segment left behind before them is no gap', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: false, firstSeq: 1, segmentBytes: 16 });
    for (const p of ['one, long enough to fill a segment', 'two, long enough to fill a segment', 'three'])
      await j.append([rec(p)]).durable;
    await j.close();
    rmSync(join(tmp.dir, 'journal-0000000000000002.log')); // as if its deletion had succeeded and the first one's not
    expect([...readJournal(tmp.dir, 2).records].map((r) => [r.seq, r.payload.toString()])).toEqual([[3, 'three']]);
    expect(() => [...readJournal(tmp.dir, 1).records]).toThrow(JournalCorruptError);
  });

  it('disposes of a segment once all its records are released: kept as one of two spares, else deleted', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: false, firstSeq: 1, segmentBytes: 16 });
    for (const p of [
      'one, long enough to fill a segment',
      'two, long enough to fill a segment',
      'three, long enough to fill a segment',
    ])
      await j.append([rec(p)]).durable;
    await j.append([rec('four')]).durable;
    expect(segments(tmp.dir)).toHaveLength(4);
    await j.release(1);
    expect(segments(tmp.dir)).toEqual([
      'journal-0000000000000002.log',
      'journal-0000000000000003.log',
      'journal-0000000000000004.log',
    ]);
    expect(spares(tmp.dir)).toEqual(['journal-spare-1.log']);
    await j.release(3);
    expect(segments(tmp.dir)).toEqual(['journal-0000000000000004.log']);
    expect(spares(tmp.dir)).toHaveLength(2); // the third released segment was deleted
    await j.release(4);
    await j.close();
    expect(segments(tmp.dir)).toEqual([]);
    expect(spares(tmp.dir)).toHaveLength(2);
  });

  it('reuses a spare file for a new segment, and never reads its old records as new ones', async () => {
    const record = (i: number) => rec(`record ${String(i).padStart(4, '0')} `.padEnd(20, '.')); // 20-byte payloads, 28 on disk
    // 8 records per segment: it is full at 224 bytes.
    const j = new Journal({ dir: tmp.dir, fsync: true, firstSeq: 1, segmentBytes: 224 });
    for (let i = 1; i <= 16; i++) await j.append([record(i)]).durable;
    await j.release(16);
    expect(spares(tmp.dir)).toEqual(['journal-spare-1.log']); // records 1-8, still in the file
    for (let i = 17; i <= 19; i++) await j.append([record(i)]).durable;
    // Spare 1 became segment 17; segment 9, released and now closed, the next spare.
    expect(spares(tmp.dir)).toEqual(['journal-spare-2.log']);
    // The spare became the new segment: records 17-19 over 1-3, and 4-8 behind them, whole, at record boundaries.
    expect(statSync(join(tmp.dir, 'journal-0000000000000017.log')).size).toBe(224);
    const read = readJournal(tmp.dir, 16);
    expect([...read.records].map((r) => [r.seq, r.payload.toString()])).toEqual(
      [17, 18, 19].map((i) => [i, record(i).subarray(FRAME_BYTES).toString()]),
    );
    expect(read.lastSeq()).toBe(19);
    await j.close();
  });

  it('starts a new file when a spare has gone from under it', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: true, firstSeq: 1, segmentBytes: 16 });
    await j.append([rec('one, long enough to fill a segment')]).durable;
    await j.append([rec('two, long enough to fill a segment')]).durable;
    await j.release(1);
    expect(spares(tmp.dir)).toEqual(['journal-spare-1.log']);
    rmSync(join(tmp.dir, 'journal-spare-1.log'));
    await j.append([rec('three')]).durable;
    expect(payloads(tmp.dir)).toEqual([
      [2, 'two, long enough to fill a segment'],
      [3, 'three'],
    ]);
    await j.close();
  });

  it('at boot, takes over a last segment that holds no record, and the replay leaves it in place', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: false, firstSeq: 1 });
    await j.append([rec('one'), rec('two')]).durable;
    await j.close();
    // A segment begun at a crash whose first record never made it (a write of a previous life would look the same).
    writeFileSync(join(tmp.dir, 'journal-0000000000000003.log'), Buffer.from([0, 0, 0, 5, 1, 2, 3, 4, 0x61]));
    const replay = readJournal(tmp.dir);
    expect([...replay.records].map((r) => r.seq)).toEqual([1, 2]);
    const next = new Journal({ dir: tmp.dir, fsync: false, firstSeq: replay.lastSeq() + 1 });
    await next.append([rec('three')]).durable;
    replay.done(); // after the replayed records are safe elsewhere
    expect(segments(tmp.dir)).toEqual(['journal-0000000000000003.log']);
    expect(payloads(tmp.dir)).toEqual([[3, 'three']]);
    await next.close();
  });
});

describe('NodeStore with its write journal', () => {
  const tmp = tempDir('strata-store-journal-');
  let store: NodeStore;
  const copies: string[] = [];
  // Applies happen only when someone waits for them (settle, close) unless a test says otherwise.
  const open = (dir: string) => new NodeStore({ dir, capacityBytes: 16 * 1024 * 1024, applyIntervalMs: 3_600_000 });
  /**
   * The data directory as a crash would leave it: a copy taken now, while the store is open (LMDB's committed
   * state and the journal segments as written; LMDB's lock file is left behind, as after a reboot). The copy is
   * synchronous, so the store changes nothing meanwhile, except for a released segment being deleted or renamed
   * to a spare on the thread pool, which can pull a file from under it: then it is taken again.
   */
  function crashCopy(): string {
    const dir = `${tmp.dir}-crash${copies.length}`;
    copies.push(dir);
    for (let attempt = 1; ; attempt++) {
      try {
        cpSync(tmp.dir, dir, { recursive: true, filter: (src) => !src.endsWith('lock.mdb') });
        return dir;
      } catch (e) {
        rmSync(dir, { recursive: true, force: true });
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === 5) throw e;
      }
    }
  }

  beforeEach(() => {
    tmp.remove();
    store = open(tmp.dir);
  });
  afterEach(async () => {
    await store.close();
  });
  afterAll(() => {
    tmp.remove();
    for (const d of copies) rmSync(d, { recursive: true, force: true });
  });

  const small = (v: number) => entry(v, `small v${v}`);
  const large = (v: number) => entry(v, Buffer.alloc(INLINE_VALUE_MAX_BYTES + 100, v).toString('latin1'));

  it('serves acknowledged small writes before LMDB holds them, and a crash replays them from the journal', async () => {
    await store.putMany([
      { ns: 'n', key: 'a', entry: small(1) },
      { ns: 'n', key: 'b', entry: small(1) },
    ]);
    await store.put('n', 'a', small(2));
    await store.remove('n', 'b');
    expect(store.get('n', 'a')!.value.toString()).toBe('small v2');
    expect(store.head('n', 'b')).toBeUndefined();
    // LMDB has none of it yet: a sweep (which reads LMDB) sees nothing until the store settles.
    expect(store.scan('0000000000000000', null, undefined, 10)).toHaveLength(0);
    const dir = crashCopy();
    const crashed = open(dir);
    try {
      expect(crashed.get('n', 'a')!.value.toString()).toBe('small v2');
      expect(crashed.get('n', 'b')).toBeUndefined();
      expect(crashed.stats().keys).toBe(1);
      // The reopened store journals on from record 5.
      expect(segments(dir)).toContain('journal-0000000000000005.log');
    } finally {
      await crashed.close();
    }
    // The replayed segment went once LMDB was flushed, the new one at a clean close.
    expect(segments(dir)).toEqual([]);
    await store.settle();
    expect(store.scan('0000000000000000', null, undefined, 10).map((i) => i.key)).toEqual(['a']);
  });

  it('does not replay a journaled write over a newer large value written directly to LMDB after it was applied', async () => {
    await store.put('n', 'k', small(1));
    await store.settle(); // applied (the journal keeps the record until its segment goes)
    await expect(store.put('n', 'k', large(2))).resolves.toEqual({ applied: true, current: 2 });
    expect(segments(tmp.dir)).toHaveLength(1);
    const crashed = open(crashCopy());
    try {
      expect(crashed.get('n', 'k')).toMatchObject({ header: { version: 2 } });
      expect(crashed.get('n', 'k')!.value.equals(large(2).value)).toBe(true);
    } finally {
      await crashed.close();
    }
  });

  it('replays every acknowledged write from crash copies taken while segments are rotated, recycled and released', async () => {
    await store.close();
    // 16 KiB segments: about a dozen records each, so a few thousand writes rotate, release and recycle many times.
    store = new NodeStore({
      dir: tmp.dir,
      capacityBytes: 64 * 1024 * 1024,
      applyIntervalMs: 3_600_000,
      journalSegmentBytes: 16 * 1024,
    });
    const latest = new Map<string, number>();
    const checks: { dir: string; expected: Map<string, number> }[] = [];
    for (let round = 0; round < 12; round++) {
      // Records all of one size, so a recycled file's old records sit exactly where new ones would start.
      // Rounds of different sizes: a segment recycled from a larger round keeps that round's last records behind.
      const writes = Array.from({ length: [150, 60, 110, 40][round % 4]! }, (_, i) => ({
        ns: 'n',
        key: `k${String((round * 97 + i * 13) % 400).padStart(3, '0')}`,
        entry: small(100_000 + round * 1000 + i),
      }));
      await Promise.all(writes.map((w) => store.put(w.ns, w.key, w.entry)));
      for (const w of writes) latest.set(w.key, w.entry.header.version);
      if (round % 3 === 2) await store.settle(); // applied and released: segments become spares, spares segments
      if (round % 2 === 1) checks.push({ dir: crashCopy(), expected: new Map(latest) });
    }
    expect(readdirSync(tmp.dir).some((f) => f.startsWith('journal-spare-'))).toBe(true);
    for (const { dir, expected } of checks) {
      const crashed = new NodeStore({
        dir,
        capacityBytes: 64 * 1024 * 1024,
        applyIntervalMs: 3_600_000,
        journalSegmentBytes: 16 * 1024,
      });
      try {
        for (const [key, version] of expected) expect([key, crashed.head('n', key)?.version]).toEqual([key, version]);
        expect(crashed.stats().keys).toBe(expected.size);
      } finally {
        await crashed.close();
      }
    }
  });

  it('journals a large write behind a small one of the same key still waiting for LMDB, so it lands after it', async () => {
    await store.put('n', 'k', small(1));
    await store.put('n', 'k', large(2));
    expect(store.get('n', 'k')!.value.equals(large(2).value)).toBe(true);
    const crashed = open(crashCopy());
    try {
      expect(crashed.get('n', 'k')!.value.equals(large(2).value)).toBe(true);
    } finally {
      await crashed.close();
    }
    await store.settle();
    expect(store.get('n', 'k')!.value.equals(large(2).value)).toBe(true);
  });

  it('skips superseded writes of a key when applying, leaving no large value behind in the data database', async () => {
    const sk = storeKey('n', 'k');
    const data = () => (store as unknown as { data: { getBinary(k: Buffer): Buffer | undefined } }).data.getBinary(sk);
    await store.put('n', 'k', large(1));
    expect(data()).toBeDefined();
    // v2 removes the large value from `data`; v3 (small over small) would not, and is applied alone.
    await store.put('n', 'k', small(2));
    await store.put('n', 'k', small(3));
    await store.settle();
    expect(data()).toBeUndefined();
    expect(store.get('n', 'k')!.value.toString()).toBe('small v3');
  });

  it('queues bulk writes (migration imports) to LMDB directly, unless a journaled write of the key is waiting', async () => {
    const sk = (k: string) => storeKey('n', k);
    const meta = (k: string) =>
      (store as unknown as { meta: { getBinary(k: Buffer): Buffer | undefined } }).meta.getBinary(sk(k));
    await store.put('n', 'waiting', small(1));
    await store.putMany(
      [
        { ns: 'n', key: 'imported', entry: small(5) },
        { ns: 'n', key: 'waiting', entry: small(5) },
      ],
      { bulk: true },
    );
    expect(meta('imported')).toBeDefined();
    expect(meta('waiting')).toBeUndefined();
    expect(store.get('n', 'waiting')!.value.toString()).toBe('small v5');
    await store.settle();
    expect(meta('waiting')).toBeDefined();
    expect(store.get('n', 'waiting')!.value.toString()).toBe('small v5');
  });

  it('numbers journal records on across restarts, so a replay never skips new records', async () => {
    await store.put('n', 'a', small(1));
    await store.close();
    store = open(tmp.dir);
    await store.put('n', 'b', small(1));
    const crashed = open(crashCopy());
    try {
      expect(crashed.get('n', 'b')!.value.toString()).toBe('small v1');
    } finally {
      await crashed.close();
    }
  });

  it('applies on its own schedule without anyone waiting', async () => {
    await store.close();
    store = new NodeStore({ dir: tmp.dir, capacityBytes: 16 * 1024 * 1024, applyIntervalMs: 20 });
    await store.put('n', 'k', small(1));
    for (let i = 0; i < 200 && store.scan('0000000000000000', null, undefined, 10).length === 0; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(store.scan('0000000000000000', null, undefined, 10).map((i) => i.key)).toEqual(['k']);
  });
});

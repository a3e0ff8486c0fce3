import { appendFileSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FRAME_BYTES, Journal, JournalCorruptError, readJournal } from '../../cachenode/src/journal.js';
import { INLINE_VALUE_MAX_BYTES, NodeStore } from '../../cachenode/src/store.js';
import { storeKey } from '../../layers/core/warm/wire.js';
import { entry, tempDir } from './warm-fixtures.js';

const segments = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('journal-')).sort();
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

  it('refuses a damaged record before the last segment, and a gap between segments', async () => {
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
    appendFileSync(join(tmp.dir, first!), 'garbage');
    expect(() => payloads(tmp.dir)).toThrow(JournalCorruptError);
    rmSync(join(tmp.dir, first!));
    writeFileSync(join(tmp.dir, 'journal-0000000000000001.log'), ''); // records 1.. but none in it
    expect(() => payloads(tmp.dir)).toThrow(/starts at record 2, but the segment before it ends at 0/);
  });

  it('skips records the caller holds already, and a segment left behind before them is no gap', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: false, firstSeq: 1, segmentBytes: 16 });
    for (const p of ['one, long enough to fill a segment', 'two, long enough to fill a segment', 'three']) await j.append([rec(p)]).durable;
    await j.close();
    rmSync(join(tmp.dir, 'journal-0000000000000002.log')); // as if its deletion had succeeded and the first one's not
    expect([...readJournal(tmp.dir, 2).records].map((r) => [r.seq, r.payload.toString()])).toEqual([[3, 'three']]);
    expect(() => [...readJournal(tmp.dir, 1).records]).toThrow(JournalCorruptError);
  });

  it('deletes a segment once all its records are released', async () => {
    const j = new Journal({ dir: tmp.dir, fsync: false, firstSeq: 1, segmentBytes: 16 });
    await j.append([rec('one, long enough to fill a segment')]).durable;
    await j.append([rec('two')]).durable;
    expect(segments(tmp.dir)).toHaveLength(2);
    await j.release(1);
    expect(segments(tmp.dir)).toEqual(['journal-0000000000000002.log']);
    await j.release(2);
    await j.close();
    expect(segments(tmp.dir)).toEqual([]);
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
   * state and the journal segments as written; LMDB's lock file is left behind, as after a reboot).
   */
  function crashCopy(): string {
    const dir = `${tmp.dir}-crash${copies.length}`;
    copies.push(dir);
    cpSync(tmp.dir, dir, { recursive: true, filter: (src) => !src.endsWith('lock.mdb') });
    return dir;
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
    const meta = (k: string) => (store as unknown as { meta: { getBinary(k: Buffer): Buffer | undefined } }).meta.getBinary(sk(k));
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
    for (let i = 0; i < 200 && store.scan('0000000000000000', null, undefined, 10).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(store.scan('0000000000000000', null, undefined, 10).map((i) => i.key)).toEqual(['k']);
  });
});

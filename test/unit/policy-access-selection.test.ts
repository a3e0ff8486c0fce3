/**
 * Selection by access (idleSeconds, accessCount: paper 003's LRU cascade) without a cache node: what the in-process
 * MemoryTier records of reads, how the data mover judges an entry by it (and never takes one whose facts are
 * unknown), the cache node's SIEVE nodes that carry the facts and the wire record that carries them, and which
 * tiers the compiler lets a selection by access read from.
 */
import { Sieve } from '../../cachenode/src/sieve.js';
import { LOGICAL_BITS } from '../../core/model/hlc.js';
import {
  decodeRecord,
  encodeAccessRecord,
  encodeEntryRecord,
  RecordReader,
  RECORD_ACCESS,
  RECORD_ENTRY,
} from '../../core/nodes/wire.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { runTransfer, selects } from '../../core/policy/data-mover.js';
import type { Condition, PolicyDocumentError } from '../../core/policy/document.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { entry } from '../helpers/tiers.js';

const T0 = 1_700_000_000_000;
const versionAt = (ms: number, n = 0) => ms * LOGICAL_BITS + n;
const idle = (op: '>=' | '<', value: number): Condition => ({ object: 'idleSeconds', op, value });
const reads = (op: '>=' | '<', value: number): Condition => ({ object: 'accessCount', op, value });

describe('MemoryTier access facts', () => {
  let clock = T0;
  const tier = () => new MemoryTier({ name: 'warm', maxBytes: 1024 * 1024, now: () => clock });
  beforeEach(() => (clock = T0));

  it('records each read (get, getMany) with its time, and not heads, has or scans', async () => {
    const t = tier();
    await t.put('ns', 'read', entry(versionAt(T0)));
    await t.put('ns', 'unread', entry(versionAt(T0)));
    clock += 5000;
    await t.get('ns', 'read');
    clock += 5000;
    await t.getMany('ns', ['read']);
    await t.head('ns', 'unread');
    await t.has('ns', 'unread');
    await t.scan('ns', { limit: 10 });
    const { items } = await t.scan('ns', { limit: 10 });
    expect(items.map((i) => [i.key, i.access])).toEqual([
      ['read', { lastAccessMs: T0 + 10_000, count: 2 }],
      ['unread', { lastAccessMs: T0, count: 0 }],
    ]);
  });

  it('keeps the facts across a newer version, and starts afresh for a key that arrives again', async () => {
    const t = tier();
    await t.put('ns', 'k', entry(versionAt(T0)));
    clock += 1000;
    await t.get('ns', 'k');
    clock += 1000;
    await t.put('ns', 'k', entry(versionAt(clock)));
    expect((await t.scan('ns', { limit: 1 })).items[0]!.access).toEqual({ lastAccessMs: T0 + 1000, count: 1 });
    await t.delete('ns', 'k');
    clock += 1000;
    await t.put('ns', 'k', entry(versionAt(clock)));
    expect((await t.scan('ns', { limit: 1 })).items[0]!.access).toEqual({ lastAccessMs: T0 + 3000, count: 0 });
  });

  it('a move by idleSeconds takes exactly the entries not read for that long (an injected clock)', async () => {
    const warm = tier();
    const cold = new MemoryTier({ name: 'cold', maxBytes: 1024 * 1024, now: () => clock });
    for (const k of ['a', 'b', 'c', 'd']) await warm.put('ns', k, entry(versionAt(T0), `value ${k}`));
    clock += 3_000_000;
    await warm.get('ns', 'b');
    await warm.get('ns', 'd');
    clock += 1_000_000; // a, c: idle 4000 s; b, d: 1000 s
    const r = await runTransfer(
      { rule: 't', kind: 'move', ns: 'ns', from: warm, to: [cold], what: [idle('>=', 3600)], durable: [warm, cold] },
      { now: () => clock },
    );
    expect(r).toMatchObject({ scanned: 4, selected: 2, copied: 2, removed: 2 });
    expect((await warm.scan('ns', { limit: 10 })).items.map((i) => i.key)).toEqual(['b', 'd']);
    expect((await cold.get('ns', 'a'))!.value.toString()).toBe('value a');
    expect((await cold.get('ns', 'c'))!.value.toString()).toBe('value c');
  });
});

describe('selects() by access', () => {
  const h = entry(versionAt(T0)).header;
  const now = T0 + 7200_000;

  it('idle time runs from the later of the last access and the version time', () => {
    expect(selects(h, [idle('>=', 3600)], now, { lastAccessMs: T0, count: 0 })).toBe(true);
    expect(selects(h, [idle('>=', 3600)], now, { lastAccessMs: now - 60_000, count: 3 })).toBe(false);
    expect(selects(h, [idle('<', 3600)], now, { lastAccessMs: now - 60_000, count: 3 })).toBe(true);
    // Written (a newer version) after its last read: idle since the write.
    const rewritten = entry(versionAt(now - 60_000)).header;
    expect(selects(rewritten, [idle('>=', 3600)], now, { lastAccessMs: T0, count: 0 })).toBe(false);
  });

  it('accessCount compares the reads the tier counted', () => {
    const facts = { lastAccessMs: T0, count: 2 };
    expect(selects(h, [reads('>=', 2)], now, facts)).toBe(true);
    expect(selects(h, [reads('<', 2)], now, facts)).toBe(false);
    expect(selects(h, [reads('<', 1), idle('>=', 60)], now, { lastAccessMs: T0, count: 0 })).toBe(true);
  });

  it.each([
    ['idleSeconds >=', idle('>=', 0)],
    ['idleSeconds <', idle('<', 1e9)],
    ['accessCount >=', reads('>=', 0)],
    ['accessCount <', reads('<', 1e9)],
  ])('never takes an entry whose facts are unknown (%s)', (_name, c) => {
    expect(selects(h, [c], now, undefined)).toBe(false);
    expect(selects(h, [c], now, { lastAccessMs: T0, count: 0 })).toBe(true);
  });
});

describe('access facts on the cache node and the wire', () => {
  it('a SIEVE node keeps the last read and the reads; a key entering starts at its time with none', () => {
    const s = new Sieve<string>();
    s.insert('a', 5);
    s.insert('b', 7);
    s.touch('a', 9);
    s.touch('a', 8); // an older time never moves the last read back
    s.touch('b'); // a touch without a time (the victims walk) is not a read
    s.insert('a', 20); // an existing key keeps its facts
    expect(s.access('a')).toEqual({ at: 9, reads: 2 });
    expect(s.access('b')).toEqual({ at: 7, reads: 0 });
    s.remove('a');
    expect(s.access('a')).toBeUndefined();
    expect([...s.order()]).toEqual(['b']);
  });

  it('an access record describes the entry record after it, and decodes whatever the chunking', () => {
    const facts = { lastAccessMs: T0 + 123, count: 42 };
    const stream = Buffer.concat([encodeAccessRecord(facts), encodeEntryRecord('ns', 'k', entry(1, 'v'))]);
    expect(decodeRecord(encodeAccessRecord(facts))).toEqual({ type: RECORD_ACCESS, access: facts });
    const reader = new RecordReader();
    const out = [...stream].flatMap((b) => reader.push(Buffer.from([b])));
    expect(out.map((r) => r.type)).toEqual([RECORD_ACCESS, RECORD_ENTRY]);
  });
});

describe('compiling selections by access', () => {
  const bg = { background: true };
  const problems = (input: unknown, opts: Parameters<typeof compilePolicyInput>[1] = bg) => {
    try {
      compilePolicyInput(input, opts);
      return [];
    } catch (e) {
      return (e as PolicyDocumentError).problems.map((p) => `${p.rule ?? p.path}: ${p.message}`);
    }
  };
  const rule = (from: 'hot' | 'warm' | 'cold', kind: 'copy' | 'delete', what: Condition[]) => ({
    rules: [
      {
        id: 'r',
        scope: { namespace: 'a' },
        on: { timer: { everySeconds: 60 } },
        do: [kind === 'copy' ? { copy: { from, to: from === 'cold' ? ['warm'] : ['cold'], what } } : { delete: { from, what } }],
      },
    ],
  });

  it('the lru-cascade preset compiles: store in warm and cold, delete from warm what it has not read for idleSeconds', () => {
    const c = compilePolicyInput({ namespaces: { app: { preset: 'lru-cascade', with: { idleSeconds: 600 } } } }, bg);
    // Inclusive: cold holds every value (a warm range lives on one cache node), so the cascade only frees warm.
    expect(c.placements.app).toMatchObject({ writeMode: 'write-through', writeTiers: ['warm', 'cold'] });
    expect(c.rules.find((r) => r.id === 'app-cascade')).toMatchObject({
      on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '>=', value: 85, repeatSeconds: 300 } },
      do: [{ delete: { from: 'warm', what: [{ object: 'idleSeconds', op: '>=', value: 600 }] } }],
    });
  });

  it('accepts them from warm, whose cache nodes track reads', () => {
    expect(problems(rule('warm', 'copy', [idle('>=', 60)]))).toEqual([]);
    expect(problems(rule('warm', 'delete', [reads('<', 1)]))).toEqual([]);
  });

  it('refuses them from a Redis hot tier, saying why, unless the runtime says its hot tier tracks reads', () => {
    expect(problems(rule('hot', 'copy', [idle('>=', 60)]))).toEqual([
      expect.stringMatching(/^r: selection by idleSeconds from hot: .*OBJECT FREQ needs an LFU eviction policy.*from warm/),
    ]);
    expect(problems(rule('hot', 'copy', [reads('>=', 1)]), { ...bg, hotTracksAccess: true })).toEqual([]);
  });

  it('refuses them from cold, which keeps no record of reads', () => {
    expect(problems(rule('cold', 'copy', [reads('>=', 1)]))).toEqual([
      expect.stringMatching(/^r: selection by accessCount from cold: the cold tier \(S3, or the local folder\) keeps no record/),
    ]);
    expect(problems(rule('cold', 'delete', [idle('>=', 60)]))).toEqual([expect.stringMatching(/idleSeconds from cold/)]);
  });
});

/**
 * Prefix- and tag-scoped placement and read-through rules, and retrieve from named tiers (issue 22, paper 003):
 * which rule places a key (the most specific scope), the refusals that keep every acknowledged write readable, and
 * the coordinator following them over memory tiers (test/integration/policy-scoped-placement.test.ts does it over
 * real ones).
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { namespaceDurable, place, type TierSnapshot } from '../../core/coordinator/placement.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { PolicyDocumentError } from '../../core/policy/document.js';
import type { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { SwitchableTier } from '../helpers/tiers.js';

const TIERS: readonly TierSnapshot[] = [
  { name: 'hot', dirtyTracking: true },
  { name: 'warm', dirtyTracking: false },
  { name: 'cold', dirtyTracking: false },
];
const put = { action: 'put' } as const;
const get = { action: 'get' } as const;
const flush = (id: string, scope: object, everySeconds = 2) => ({
  id,
  scope,
  on: { timer: { everySeconds } },
  do: [{ copy: { from: 'hot', to: ['warm', 'cold'], what: [{ object: 'dirty', equals: true }] } }],
});
const store = (id: string, scope: object, tiers: string[]) => ({ id, scope, on: put, do: [{ store: { tiers } }] });
const retrieve = (id: string, scope: object, spec: object) => ({ id, scope, on: get, do: [{ retrieve: spec }] });

function problemsOf(doc: unknown): string[] {
  try {
    compilePolicyInput(doc);
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyDocumentError);
    return (e as PolicyDocumentError).problems.map((p) => `${p.rule ?? '-'}: ${p.message}`);
  }
  throw new Error('the document was accepted');
}

const registryOf = (doc: unknown): PolicyRegistry => compilePolicyInput(doc).registry;

describe('scoped placement: which rule places a key', () => {
  const doc = {
    rules: [
      store('ns-place', { namespace: 'app' }, ['hot', 'warm', 'cold']),
      store('logs', { namespace: 'app', prefix: 'logs/' }, ['cold']),
      store('logs-audit', { namespace: 'app', prefix: 'logs/audit/' }, ['warm', 'cold']),
      store('big', { namespace: 'app', tag: 'big' }, ['warm', 'cold']),
      store('logs-pinned', { namespace: 'app', prefix: 'logs/', tag: 'pinned' }, ['hot', 'cold']),
      store('media', { namespace: 'app', tag: 'media' }, ['cold']),
    ],
  };
  const reg = registryOf(doc);
  const tiersFor = (key: string, tags?: string[]) => reg.forKey('app', key, tags).writeTiers;

  it('takes the longest prefix, then a tag over none at that prefix, then the namespace', () => {
    expect(tiersFor('user/1')).toEqual(['hot', 'warm', 'cold']);
    expect(tiersFor('logs/1')).toEqual(['cold']);
    expect(tiersFor('logs/audit/1')).toEqual(['warm', 'cold']);
    expect(tiersFor('logs/1', ['pinned'])).toEqual(['hot', 'cold']);
    expect(tiersFor('user/1', ['big'])).toEqual(['warm', 'cold']);
    // A longer prefix beats a tag scoped to a shorter one (here: the namespace).
    expect(tiersFor('logs/1', ['big'])).toEqual(['cold']);
    expect(tiersFor('logs/audit/1', ['pinned'])).toEqual(['warm', 'cold']);
  });

  it('between two tags a put carries, takes the first rule in the document', () => {
    expect(tiersFor('user/1', ['media', 'big'])).toEqual(['warm', 'cold']);
    expect(tiersFor('user/1', ['media'])).toEqual(['cold']);
  });

  it('reads by prefix only, and keeps every tier a tag-scoped write may skip out of the certain set', () => {
    const read = reg.forRead('app', 'user/1');
    expect(read.writeTiers).toEqual(['hot', 'warm', 'cold']);
    // A 'media' write reaches cold only: a miss in warm is not certain while cold is down.
    expect(namespaceDurable(read, TIERS)).toEqual(['cold']);
    expect(reg.forRead('app', 'logs/audit/1').writeTiers).toEqual(['warm', 'cold']);
  });

  it('shadows, with location markers, the tiers another placement of the same keys writes', () => {
    const plain = place({ policy: reg.forKey('app', 'user/1', []), header: { size: 10 }, tiers: TIERS });
    expect(plain).toMatchObject({ durable: ['warm', 'cold'], hot: 'value' });
    expect(plain.shadow).toBeUndefined();
    const media = place({ policy: reg.forKey('app', 'user/1', ['media']), header: { size: 10 }, tiers: TIERS });
    expect(media).toMatchObject({ durable: ['cold'], hot: 'marker', shadow: ['warm'], promoteInto: ['cold'] });
    // A 'pinned' logs/ write goes to hot: the others leave a marker there.
    const logs = place({ policy: reg.forKey('app', 'logs/1', []), header: { size: 10 }, tiers: TIERS });
    expect(logs).toMatchObject({ durable: ['cold'], hot: 'marker' });
    // logs/audit/ keys have no tag rule at their prefix (theirs is longer than pinned's): no footprint, but hot,
    // which the rule does not write, is shadowed all the same (an earlier policy may have placed them there).
    const audit = place({ policy: reg.forKey('app', 'logs/audit/1', ['pinned']), header: { size: 10 }, tiers: TIERS });
    expect(audit).toMatchObject({ durable: ['warm', 'cold'], hot: 'marker' });
    expect(audit.shadow).toBeUndefined();
  });

  it('leaves a namespace without scoped rules on the path it always took', () => {
    const plain = registryOf({ rules: [store('place', { namespace: 'web' }, ['hot', 'cold'])] });
    expect(plain.hasKeyScopes('web')).toBe(false);
    expect(plain.hasKeyScopes('other')).toBe(false);
    expect(plain.forKey('web', 'any', ['t'])).toBe(plain.for('web'));
    expect(plain.forRead('web', 'any')).toBe(plain.for('web'));
    // Another namespace's scoped rules do not reach it either.
    expect(reg.hasKeyScopes('other')).toBe(false);
    expect(reg.forKey('other', 'logs/1', [])).toBe(reg.for('other'));
  });

  it("applies `*`'s scoped rules only to namespaces without placement rules of their own", () => {
    const r = registryOf({
      rules: [store('tmp', { prefix: 'tmp/' }, ['cold']), store('own', { namespace: 'own' }, ['hot', 'warm', 'cold'])],
    });
    expect(r.forKey('any', 'tmp/x', []).writeTiers).toEqual(['cold']);
    expect(r.forKey('any', 'x', []).writeTiers).toEqual(['hot', 'warm', 'cold']);
    expect(r.forKey('own', 'tmp/x', []).writeTiers).toEqual(['hot', 'warm', 'cold']);
  });

  it('compiles a scoped write-back with its own flush timer, which the flusher follows', () => {
    const r = registryOf({
      rules: [
        store('sess', { namespace: 'app', prefix: 'sess/' }, ['hot']),
        flush('sess-flush', { namespace: 'app', prefix: 'sess/' }, 0.25),
      ],
    });
    expect(r.forKey('app', 'sess/1', [])).toMatchObject({ writeMode: 'write-back', writeTiers: ['hot', 'warm', 'cold'] });
    expect(r.forKey('app', 'sess/1', []).flushIntervalMs).toBe(250);
    expect(r.forKey('app', 'user/1', []).writeMode).toBe('write-through');
    expect(r.minFlushIntervalMs()).toBe(250);
  });

  it('reads through an origin by prefix', () => {
    const r = registryOf({
      rules: [
        retrieve('o', { namespace: 'app', prefix: 'o/' }, { origin: { url: 'https://origin.example/{key}' } }),
        retrieve('scan', { namespace: 'app', prefix: 'o/scan/' }, { tiers: ['warm', 'cold'] }),
      ],
    });
    expect(r.forRead('app', 'o/1').origin?.url).toBe('https://origin.example/{key}');
    expect(r.forRead('app', 'x/1').origin).toBeUndefined();
    // The most specific rule decides alone: o/scan/ reads warm and cold, without the origin.
    expect(r.forRead('app', 'o/scan/1')).toMatchObject({ readTiers: ['warm', 'cold'] });
    expect(r.forRead('app', 'o/scan/1').origin).toBeUndefined();
  });

  it('shows the scoped rules in what validate answers', () => {
    const c = compilePolicyInput({
      rules: [
        store('logs', { namespace: 'app', prefix: 'logs/' }, ['cold']),
        retrieve('scan', { namespace: 'app', prefix: 'scan/' }, { tiers: ['warm', 'cold'] }),
      ],
    });
    expect(c.placements.app).toEqual({
      writeMode: 'write-through',
      writeTiers: ['hot', 'warm', 'cold'],
      scoped: [
        { prefix: 'logs/', rules: ['logs'], writeMode: 'write-through', writeTiers: ['cold'] },
        { prefix: 'scan/', rules: ['scan'], readTiers: ['warm', 'cold'] },
      ],
    });
  });
});

describe('scoped placement and retrieve: refusals', () => {
  it.each([
    [
      'a scoped placement whose only copy is in hot, without a flush',
      { rules: [store('sess', { namespace: 'app', prefix: 'sess/' }, ['hot'])] },
      /sess: the only copy of a value for keys under 'sess\/' would be in hot/,
    ],
    [
      'two placement rules of one scope, naming both and the precedence',
      {
        rules: [
          store('a', { namespace: 'app', prefix: 'p/' }, ['cold']),
          store('b', { namespace: 'app', prefix: 'p/' }, ['warm', 'cold']),
        ],
      },
      /condition for keys under 'p\/': a, b; a key is placed by the most specific scope \(the longest prefix, then a tag/,
    ],
    [
      'a tag-scoped retrieve (a get does not know tags)',
      { rules: [retrieve('t', { namespace: 'app', tag: 'x' }, { tiers: ['warm', 'cold'] })] },
      /t: a get does not know an entry's tags before it has found it/,
    ],
    [
      'a tag-scoped read-through',
      { rules: [retrieve('t', { namespace: 'app', tag: 'x' }, { origin: { url: 'https://o.example/{key}' } })] },
      /t: a get does not know an entry's tags/,
    ],
    [
      'retrieve tiers not top-down',
      { rules: [retrieve('r', { namespace: 'app' }, { tiers: ['cold', 'warm'] })] },
      /r: retrieve.tiers are read top-down.*write \[warm, cold\]/,
    ],
    [
      'a retrieve that skips hot where writes are write-back (naming both rules)',
      {
        namespaces: { app: { preset: 'low-latency' } },
        rules: [retrieve('scan', { namespace: 'app', prefix: 'scan/' }, { tiers: ['warm', 'cold'] })],
      },
      /scan: retrieve rule 'scan' skips hot for keys under 'scan\/', but placement rule 'app-place' acknowledges/,
    ],
    [
      'a retrieve that skips hot where a tag-scoped write is write-back',
      {
        rules: [
          store('fast', { namespace: 'app', tag: 'fast' }, ['hot']),
          flush('fast-flush', { namespace: 'app', tag: 'fast' }),
          retrieve('skip-hot', { namespace: 'app' }, { tiers: ['warm', 'cold'] }),
        ],
      },
      /skip-hot: retrieve rule 'skip-hot' skips hot for this namespace, but placement rule 'fast' acknowledges/,
    ],
    [
      'a retrieve that skips a durable tier the placement writes',
      { rules: [retrieve('cold-only', { namespace: 'app' }, { tiers: ['cold'] })] },
      /cold-only: retrieve rule 'cold-only' does not read warm for this namespace, where the default placement/,
    ],
    [
      'storeOnce scoped by prefix',
      {
        rules: [
          {
            id: 'once',
            scope: { namespace: 'app', prefix: 'p/' },
            on: put,
            do: [{ storeOnce: { tiers: ['hot', 'warm', 'cold'] } }],
          },
        ],
      },
      /once: storeOnce is scoped to a namespace/,
    ],
    [
      'a scoped placement in a storeOnce namespace',
      { namespaces: { app: { preset: 'dedup' } }, rules: [store('logs', { namespace: 'app', prefix: 'logs/' }, ['cold'])] },
      /storeOnce places every value of its namespace/,
    ],
    [
      'a scoped write-around without a placement of its scope',
      {
        rules: [
          {
            id: 'around',
            scope: { namespace: 'app', prefix: 'p/' },
            on: put,
            when: [{ object: 'size', op: '>=', value: 10 }],
            do: [{ store: { tiers: ['warm', 'cold'] } }],
          },
        ],
      },
      /around: a write-around rule for keys under 'p\/' needs a placement rule of the same scope/,
    ],
  ])('refuses %s', (_name, doc, message) => {
    expect(problemsOf(doc)).toEqual(expect.arrayContaining([expect.stringMatching(message)]));
  });

  it('accepts a retrieve that skips hot over write-through writes, and one that lists hot first over write-back', () => {
    expect(() =>
      compilePolicyInput({ rules: [retrieve('scan', { namespace: 'app', prefix: 'scan/' }, { tiers: ['warm', 'cold'] })] }),
    ).not.toThrow();
    expect(() =>
      compilePolicyInput({
        namespaces: { app: { preset: 'low-latency' } },
        rules: [retrieve('all', { namespace: 'app', prefix: 'p/' }, { tiers: ['hot', 'warm', 'cold'] })],
      }),
    ).not.toThrow();
  });

  it('reports a problem of a `*` rule once, however many namespaces take it', () => {
    const problems = problemsOf({
      namespaces: { a: {}, b: {}, c: {} },
      rules: [store('sess', { prefix: 'sess/' }, ['hot'])],
    });
    expect(problems.filter((p) => p.startsWith('sess:'))).toHaveLength(1);
  });
});

describe('the coordinator over scoped rules (memory tiers)', () => {
  function setup(doc: unknown) {
    const hot = new SwitchableTier('hot');
    const warm = new SwitchableTier('warm');
    const cold = new SwitchableTier('cold', 64 * 1024 * 1024);
    const c = new Coordinator({
      tiers: [hot, warm, cold],
      policies: registryOf(doc),
      flushTimer: false,
      onBackgroundError: () => {},
      hotFence: false,
    });
    return { c, hot, warm, cold };
  }
  const v = (s: string) => Buffer.from(s);

  it('writes a cold-only prefix to cold alone, and the rest as before', async () => {
    const { c, hot, warm, cold } = setup({ rules: [store('logs', { namespace: 'app', prefix: 'logs/' }, ['cold'])] });
    expect((await c.put('app', 'logs/1', v('x'))).tiers).toEqual(['cold']);
    // The value is in cold alone; hot and warm, which a read consults first, hold a location marker (no bytes).
    for (const t of [hot, warm])
      expect(await t.get('app', 'logs/1')).toMatchObject({ header: { flags: { elsewhere: true }, size: 0 } });
    expect((await cold.get('app', 'logs/1'))!.value.toString()).toBe('x');
    expect((await c.put('app', 'user/1', v('y'))).tiers).toEqual(['hot', 'warm', 'cold']);
    // Read back from cold, and never promoted above it.
    expect((await c.get('app', 'logs/1'))!.tier).toBe('cold');
    await c.drain();
    expect(await hot.get('app', 'logs/1')).toMatchObject({ header: { flags: { elsewhere: true }, size: 0 } });
  });

  it('never serves an older version when writes of one key switch between tag-scoped placements', async () => {
    const { c, hot, warm } = setup({ rules: [store('archive', { namespace: 'app', tag: 'archive' }, ['cold'])] });
    await c.put('app', 'k', v('v1')); // hot, warm, cold
    const w2 = await c.put('app', 'k', v('v2'), { tags: ['archive'] }); // cold; warm and hot get markers
    expect(w2.tiers).toEqual(['cold']);
    expect((await warm.get('app', 'k'))!.header).toMatchObject({ version: w2.version, flags: { elsewhere: true } });
    expect((await hot.get('app', 'k'))!.header.version).toBe(w2.version);
    expect((await c.get('app', 'k'))!.entry.value.toString()).toBe('v2');
    await c.drain();
    const w3 = await c.put('app', 'k', v('v3'));
    expect((await c.get('app', 'k'))!.entry).toMatchObject({ header: { version: w3.version }, value: v('v3') });
  });

  it('reads a retrieve rule’s tiers only, and promotes only into them', async () => {
    const { c, hot, warm, cold } = setup({
      rules: [retrieve('scan', { namespace: 'app', prefix: 'scan/' }, { tiers: ['warm', 'cold'] })],
    });
    await c.put('app', 'scan/1', v('s'));
    await warm.delete('app', 'scan/1'); // only cold has it now; hot still holds its copy
    hot.calls = 0;
    const r = await c.get('app', 'scan/1');
    expect(r).toMatchObject({ tier: 'cold' });
    await c.drain();
    expect(hot.calls).toBe(0);
    expect((await warm.get('app', 'scan/1'))!.value.toString()).toBe('s');
    // Other keys read through hot as before.
    await c.put('app', 'user/1', v('u'));
    expect((await c.get('app', 'user/1'))!.tier).toBe('hot');
    // getMany reads each key by its own class.
    const many = await c.getMany('app', ['scan/1', 'user/1', 'scan/none']);
    expect(many.map((m) => m?.tier)).toEqual(['warm', 'hot', undefined]);
    expect(await cold.head('app', 'scan/1')).toBeDefined();
  });

  it('flushes a prefix-scoped write-back to the durable tiers', async () => {
    const { c, warm, cold } = setup({
      rules: [
        store('sess', { namespace: 'app', prefix: 'sess/' }, ['hot']),
        flush('sess-flush', { namespace: 'app', prefix: 'sess/' }),
      ],
    });
    const w = await c.put('app', 'sess/1', v('s'));
    expect(w).toMatchObject({ tiers: ['hot'], durable: false });
    expect(await warm.head('app', 'sess/1')).toBeUndefined();
    expect(await c.flushDirty()).toBe(1);
    expect((await warm.head('app', 'sess/1'))!.version).toBe(w.version);
    expect((await cold.head('app', 'sess/1'))!.version).toBe(w.version);
    expect((await c.put('app', 'user/1', v('u'))).durable).toBe(true);
  });
});

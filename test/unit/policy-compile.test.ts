/**
 * The policy document: its validation (a bad document is refused whole, each problem naming the rule and field),
 * its compilation into the coordinator's namespace settings, the translation of STRATA_NAMESPACES into a
 * document (existing configurations keep working), and the presets.
 */
import * as z from 'zod';
import { compilePolicy, compilePolicyInput, documentFromNamespaceConfig, policyHash } from '../../core/policy/compile.js';
import {
  parsePolicyDocument,
  policyDocumentSchema,
  PolicyDocumentError,
  PRESET_NAMES,
  type PolicyDocumentInput,
} from '../../core/policy/document.js';
import { PRESETS, presetRules } from '../../core/policy/presets.js';
import { PolicyRegistry, type NamespaceConfigInput } from '../../core/policy/namespace-settings.js';
import { place, type TierSnapshot } from '../../core/coordinator/placement.js';

const TIERS: readonly TierSnapshot[] = [
  { name: 'hot', dirtyTracking: true },
  { name: 'warm', dirtyTracking: false },
  { name: 'cold', dirtyTracking: false },
];

function problemsOf(input: unknown): Array<{ path: string; rule?: string; message: string }> {
  try {
    compilePolicyInput(input);
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyDocumentError);
    expect((e as PolicyDocumentError).status).toBe(400);
    expect((e as PolicyDocumentError).code).toBe('VALIDATION_FAILED');
    return (e as PolicyDocumentError).problems.map((p) => ({ ...p }));
  }
  throw new Error('the document was accepted');
}

describe('a bad policy document is refused whole, naming the rule and field', () => {
  it('names the path and rule id of a schema error, with the form the user meant', () => {
    const problems = problemsOf({
      rules: [
        { id: 'flush', on: { timer: { everySeconds: 0 } }, do: [{ copy: { from: 'hot', to: ['warm'] } }] },
        { id: 'typo', on: { action: 'put' }, do: [{ stor: { tiers: ['hot'] } }] },
        { id: 'cond', on: { action: 'put' }, when: [{ tier: 'hot', metric: 'fill', op: '>', value: 1 }], do: [] },
      ],
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'rules[0].on.timer.everySeconds', rule: 'flush' }),
        expect.objectContaining({
          path: 'rules[1].do[0]',
          rule: 'typo',
          message: expect.stringMatching(/unknown 'stor'.*store, storeOnce/),
        }),
        expect.objectContaining({ path: 'rules[2].when[0].metric', rule: 'cond', message: expect.stringMatching(/fillPercent/) }),
        expect.objectContaining({ path: 'rules[2].do', rule: 'cond' }),
      ]),
    );
  });

  it.each<[string, PolicyDocumentInput, RegExp]>([
    [
      'duplicate ids',
      {
        rules: [1, 2].map(() => ({
          id: 'same',
          on: { action: 'put' as const },
          do: [{ store: { tiers: ['hot', 'warm', 'cold'] } }],
        })),
      },
      /another rule already has the id 'same'/,
    ],
    [
      'a timer in the foreground',
      { rules: [{ id: 't', mode: 'foreground', on: { timer: { everySeconds: 5 } }, do: [{ alert: { message: 'x' } }] }] },
      /only action events run in the foreground/,
    ],
    [
      'a bulk copy on the request path',
      { rules: [{ id: 'c', on: { action: 'put' }, do: [{ copy: { from: 'hot', to: ['cold'] } }] }] },
      /copy runs in the background/,
    ],
    [
      'a store in the background',
      { rules: [{ id: 's', on: { timer: { everySeconds: 5 } }, do: [{ store: { tiers: ['warm', 'cold'] } }] }] },
      /store acts on the request's object/,
    ],
    [
      'a copy into its own tier',
      { rules: [{ id: 'c', on: { timer: { everySeconds: 5 } }, do: [{ copy: { from: 'warm', to: ['warm'] } }] }] },
      /cannot go to 'warm' itself/,
    ],
    [
      'a grow with both nodes and percent',
      {
        rules: [
          {
            id: 'g',
            on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '>=', value: 75 } },
            do: [{ grow: { tier: 'warm', nodes: 1, percent: 50 } }],
          },
        ],
      },
      /exactly one of nodes or percent/,
    ],
    [
      'a cost rule naming no budget',
      {
        rules: [
          {
            id: 'cost',
            on: { threshold: { cost: 'projectedMonthlyUsd', op: '>', value: { budget: 'monthly' } } },
            do: [{ alert: { message: 'over budget' } }],
          },
        ],
      },
      /no budget has the id 'monthly'/,
    ],
    ['a fleet minimum above its maximum', { controls: { minFleetSize: 9, maxFleetSize: 4 } }, /minFleetSize cannot be above/],
    [
      'the only copy in hot (it evicts on its own)',
      { rules: [{ id: 'hot-only', on: { action: 'put' }, do: [{ store: { tiers: ['hot'] } }] }] },
      /only copy of a value would be in hot/,
    ],
    [
      'an unknown preset parameter',
      { namespaces: { web: { preset: 'low-latency', with: { flushSecs: 2 } } } },
      /takes no parameter 'flushSecs'/,
    ],
    ['a preset without its required parameter', { namespaces: { vault: { preset: 'encrypted' } } }, /needs the parameter 'key'/],
  ])('refuses %s', (_name, doc, message) => {
    expect(problemsOf(doc).map((p) => p.message)).toEqual(expect.arrayContaining([expect.stringMatching(message)]));
  });

  it('refuses, by name, responses this version does not run yet, rather than accepting rules that do nothing', () => {
    const problems = problemsOf({
      // Without a background evaluator (compilePolicyInput's default here), background rules do not run.
      rules: [{ id: 'fetch', on: { timer: { everySeconds: 60 } }, do: [{ alert: { message: 'tick' } }] }],
    });
    expect(problems).toEqual([
      expect.objectContaining({ rule: 'fetch', message: expect.stringMatching(/'alert' .* does not run it yet/) }),
    ]);
  });

  it('publishes its JSON Schema (the OpenAPI component and docs/POLICIES.md are generated from it)', () => {
    const schema = z.toJSONSchema(policyDocumentSchema, { io: 'input' }) as { properties: Record<string, unknown> };
    expect(Object.keys(schema.properties).sort()).toEqual(['budgets', 'controls', 'description', 'namespaces', 'rules']);
  });
});

describe('STRATA_NAMESPACES as a policy document', () => {
  /** What the coordinator does with a namespace: placement of a small and a large value, and every other setting. */
  function behaviour(reg: PolicyRegistry, ns: string, boundary: number) {
    const p = reg.for(ns);
    // Sizes on both sides of the legacy write-around boundary, and far from it.
    const sizes = [1, boundary - 1, boundary, boundary + 1, 64 * 1024 * 1024].filter((s) => s >= 0);
    const placed = sizes.map((size) => place({ policy: p, header: { size, tags: [], expiresAt: null, ageMs: 0 }, tiers: TIERS }));
    const { writeMode: _m, writeTiers: _t, writeAroundBytes: _w, flushIntervalMs: _f, ...rest } = p;
    const flush = placed.some((x) => x.writeBack) ? p.flushIntervalMs : null;
    return { placed, flush, rest };
  }

  // Random configurations (seeded, reproducible): every combination of the placement settings, with overrides.
  function* configs(): Generator<NamespaceConfigInput> {
    let seed = 7; // mulberry32: reproducible and well mixed in the low bits
    const rand = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    const tierSets = [
      ['hot', 'warm', 'cold'],
      ['hot', 'cold'],
      ['hot', 'warm'],
      ['warm', 'cold'],
      ['cold'],
      ['hot', 'warm', 'cold'],
    ];
    const one = (): Record<string, unknown> => ({
      ...(rand(2) ? { writeMode: rand(2) ? 'write-back' : 'write-through' } : {}),
      ...(rand(2) ? { writeTiers: tierSets[rand(tierSets.length)] } : {}),
      ...(rand(2) ? { writeAroundBytes: 1 + rand(4 * 1024 * 1024) } : {}),
      ...(rand(2) ? { flushIntervalMs: [50, 200, 1000, 2500, 60_000][rand(5)] } : {}),
      ...(rand(3) === 0 ? { defaultTtlSeconds: 60 + rand(1000) } : {}),
      ...(rand(3) === 0 ? { nearCache: { ttlMs: 1 + rand(5000) } } : {}),
      ...(rand(4) === 0 ? { origin: { url: `http://origin.example/${rand(9)}/{key}` } } : {}),
      ...(rand(4) === 0 ? { promoteOnRead: false } : {}),
    });
    for (let i = 0; i < 300; i++) {
      const namespaces: Record<string, Record<string, unknown>> = {};
      for (let n = rand(4); n > 0; n--) namespaces[`ns${rand(6)}`] = one();
      yield { defaults: one() as NamespaceConfigInput['defaults'], namespaces };
    }
  }

  it('compiles back to the same behaviour for every namespace, over 300 random configurations', () => {
    let checked = 0;
    let refused = 0;
    for (const cfg of configs()) {
      const legacy = new PolicyRegistry(cfg);
      // Warm as the only tier below hot (it takes a write-back's flush too): a cache node that fails would lose the
      // write, so such a configuration is refused (test/unit/policy-warm-durability.test.ts) and has no behaviour.
      const warmOnly = [legacy.for('unconfigured'), ...legacy.configured().map((ns) => legacy.for(ns))].some((p) => {
        const below = p.writeTiers.filter((t) => t !== 'hot');
        return below.length > 0 && below.every((t) => t === 'warm');
      });
      if (warmOnly) {
        expect(() => documentFromNamespaceConfig(cfg)).toThrow(/warm would hold the only durable copy of a write/);
        refused++;
        continue;
      }
      const compiled = compilePolicy(documentFromNamespaceConfig(cfg));
      for (const ns of ['unconfigured', ...legacy.configured()]) {
        const boundary = legacy.for(ns).writeAroundBytes;
        expect({ cfg, ns, b: behaviour(compiled.registry, ns, boundary) }).toEqual({
          cfg,
          ns,
          b: behaviour(legacy, ns, boundary),
        });
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(20);
  });

  it('turns placement settings into rules a user can read, and keeps the rest as settings', () => {
    const doc = documentFromNamespaceConfig({
      defaults: { writeAroundBytes: 65536 },
      namespaces: { sessions: { writeMode: 'write-back', flushIntervalMs: 2000 }, cfg: { defaultTtlSeconds: 60 } },
    });
    expect(doc.rules.map((r) => r.id)).toEqual([
      'deploy-place',
      'deploy-write-around',
      'deploy-sessions-place',
      'deploy-sessions-flush',
      'deploy-sessions-write-around',
    ]);
    expect(doc.rules[3]).toMatchObject({
      scope: { namespace: 'sessions' },
      on: { timer: { everySeconds: 2 } },
      do: [{ copy: { from: 'hot', to: ['warm', 'cold'], what: [{ object: 'dirty', equals: true }] } }],
    });
    expect(doc.namespaces.cfg?.settings?.defaultTtlSeconds).toBe(60);
  });

  it('gives equal documents equal hashes, whatever their key order', () => {
    const a = parsePolicyDocument({ controls: { maxFleetSize: 4, minFleetSize: 2 } });
    const b = parsePolicyDocument({ controls: { minFleetSize: 2, maxFleetSize: 4 } });
    expect(policyHash(a)).toBe(policyHash(b));
    expect(policyHash(a)).not.toBe(policyHash(parsePolicyDocument({ controls: { maxFleetSize: 5, minFleetSize: 2 } })));
  });
});

describe('presets', () => {
  const compileNs = (preset: string, params?: Record<string, number | string | boolean>) =>
    compilePolicyInput({ namespaces: { app: { preset, ...(params ? { with: params } : {}) } } });

  it('every preset expands into valid rules scoped to its namespace', () => {
    for (const name of PRESET_NAMES) {
      const rules = presetRules(name, 'app', name === 'encrypted' ? { key: 'alias/strata' } : {});
      expect(rules.length).toBeGreaterThan(0);
      for (const r of rules) expect(r).toMatchObject({ id: expect.stringMatching(/^app-/), scope: { namespace: 'app' } });
      expect(PRESETS[name].summary.length).toBeGreaterThan(10);
    }
  });

  it('low-latency acknowledges from hot and flushes on its timer (write-back)', () => {
    const c = compileNs('low-latency', { flushSeconds: 3 });
    expect(c.placements.app).toEqual({
      writeMode: 'write-back',
      writeTiers: ['hot', 'warm', 'cold'],
      writeAroundBytes: 1048576,
      flushIntervalMs: 3000,
    });
    const p = place({ policy: c.registry.for('app'), header: { size: 100, tags: [], expiresAt: null, ageMs: 0 }, tiers: TIERS });
    expect(p).toMatchObject({ writeBack: true, hot: 'value', durable: ['warm', 'cold'] });
    // Other namespaces keep the default.
    expect(c.placements['*']).toEqual({ writeMode: 'write-through', writeTiers: ['hot', 'warm', 'cold'] });
  });

  it('write-through acknowledges once every tier holds a value, and sends large values around hot', () => {
    const c = compileNs('write-through', { writeAroundBytes: 4096 });
    const reg = c.registry.for('app');
    expect(place({ policy: reg, header: { size: 100, tags: [], expiresAt: null, ageMs: 0 }, tiers: TIERS })).toMatchObject({
      writeBack: false,
      hot: 'value',
      durable: ['warm', 'cold'],
    });
    expect(place({ policy: reg, header: { size: 4096, tags: [], expiresAt: null, ageMs: 0 }, tiers: TIERS })).toMatchObject({
      hot: 'marker',
      durable: ['warm', 'cold'],
    });
  });

  it('high-durability sends every value, large ones included, through S3 before the acknowledgement', () => {
    const c = compileNs('high-durability');
    const big = place({
      policy: c.registry.for('app'),
      header: { size: 64 * 1024 * 1024, tags: [], expiresAt: null, ageMs: 0 },
      tiers: TIERS,
    });
    expect(big).toMatchObject({ writeBack: false, hot: 'value', durable: ['warm', 'cold'] });
  });

  // persistent and low-durability write cold with every write (a warm range lives on one cache node), so their
  // backup and push rules are gone and they run where no background evaluator does (policy-warm-durability.test.ts).
  it.each(['lru-cascade', 'growing'])(
    '%s is refused until the responses it needs run (not accepted as a policy that does nothing)',
    (name) => {
      expect(problemsOf({ namespaces: { app: { preset: name } } }).map((p) => p.message)).toEqual(
        expect.arrayContaining([expect.stringMatching(/does not run it yet/)]),
      );
    },
  );
});

describe('compress and encrypt rules', () => {
  const local = { encryption: { keyring: 'local key files' } };
  const compile = (input: unknown, opts: Parameters<typeof compilePolicyInput>[1] = local) => compilePolicyInput(input, opts);
  const problems = (input: unknown, opts: Parameters<typeof compilePolicyInput>[1] = local) => {
    try {
      compile(input, opts);
      return [];
    } catch (e) {
      return (e as PolicyDocumentError).problems.map((p) => `${p.rule ?? p.path}: ${p.message}`);
    }
  };

  it('compile to what the coordinator applies per write: scope by namespace, prefix and tag, compress and encrypt apart', () => {
    const c = compile({
      rules: [
        { id: 'squash-logs', scope: { namespace: 'app', prefix: 'logs/' }, on: { action: 'put' }, do: [{ compress: {} }] },
        { id: 'seal-pii', scope: { namespace: 'app', tag: 'pii' }, on: { action: 'put' }, do: [{ encrypt: { key: 'pii' } }] },
        { id: 'seal-all', on: { action: 'put' }, do: [{ encrypt: { key: 'everything' } }] },
        { id: 'read', on: { action: 'get' }, do: [{ decrypt: {} }, { uncompress: {} }] },
      ],
    });
    const reg = c.registry;
    expect(reg.transformFor('app', 'logs/1', [])).toEqual({ compress: { minBytes: 1024, level: 3 }, rules: ['squash-logs'] });
    expect(reg.transformFor('app', 'logs/1', ['pii'])).toEqual({
      compress: { minBytes: 1024, level: 3 },
      encrypt: { key: 'pii' },
      rules: ['squash-logs', 'seal-pii'],
    });
    expect(reg.transformFor('app', 'other', [])).toBeUndefined();
    // A namespace with no encrypt rule of its own takes those for every namespace.
    expect(reg.transformFor('billing', 'x', [])).toEqual({ encrypt: { key: 'everything' }, rules: ['seal-all'] });
  });

  it.each([
    [
      'a transform on one tier (every tier holds the same bytes)',
      { id: 'r', on: { action: 'put', tier: 'cold' }, do: [{ compress: {} }] },
      /r: compress applies before any tier holds the value.* remove on.tier/,
    ],
    ['compress on a get', { id: 'r', on: { action: 'get' }, do: [{ compress: {} }] }, /r: compress answers a put/],
    ['decrypt on a put', { id: 'r', on: { action: 'put' }, do: [{ decrypt: {} }] }, /r: decrypt answers a get/],
    [
      'a condition on a transform',
      { id: 'r', on: { action: 'put' }, when: [{ object: 'size', op: '>=', value: 10 }], do: [{ compress: {} }] },
      /r: compress takes no conditions: compress has its own size floor/,
    ],
  ])('refuses %s', (_name, rule, message) => {
    expect(problems({ rules: [rule] })).toEqual([expect.stringMatching(message)]);
  });

  it('refuses encryption where the runtime has no keyring, or a key it was not granted', () => {
    const rule = { id: 'seal', on: { action: 'put' }, do: [{ encrypt: { key: 'alias/other' } }] };
    expect(problems({ rules: [rule] }, {})).toEqual([
      expect.stringMatching(/seal: this runtime has no keyring .*STRATA_KEYRING/),
    ]);
    expect(problems({ rules: [rule] }, { encryption: { keyring: 'kms', keys: ['alias/strata'] } })).toEqual([
      expect.stringMatching(/seal: key 'alias\/other' is not one this deployment may use \(kms: alias\/strata\)/),
    ]);
    expect(problems({ rules: [rule] }, { encryption: { keyring: 'kms', keys: ['alias/other'] } })).toEqual([]);
  });

  it('the encrypted preset encrypts every value of its namespace under its key, write-through', () => {
    const c = compile({ namespaces: { vault: { preset: 'encrypted', with: { key: 'alias/vault' } } } });
    expect(c.registry.transformFor('vault', 'any', [])).toEqual({ encrypt: { key: 'alias/vault' }, rules: ['vault-encrypt'] });
    expect(c.registry.transformFor('other', 'any', [])).toBeUndefined();
    expect(c.placements.vault).toMatchObject({ writeMode: 'write-through', writeTiers: ['hot', 'warm', 'cold'] });
  });

  it('the compressed-cold preset compresses exactly the values it sends around hot into warm and cold', () => {
    const c = compile({ namespaces: { logs: { preset: 'compressed-cold', with: { minBytes: 4096, level: 5 } } } });
    expect(c.registry.transformFor('logs', 'k', [])).toEqual({
      compress: { minBytes: 4096, level: 5 },
      rules: ['logs-compress'],
    });
    const reg = c.registry.for('logs');
    const at = (size: number) => place({ policy: reg, header: { size, tags: [], expiresAt: null, ageMs: 0 }, tiers: TIERS });
    expect(at(4095)).toMatchObject({ hot: 'value', durable: ['warm', 'cold'] });
    expect(at(4096)).toMatchObject({ hot: 'marker', durable: ['warm', 'cold'] });
  });
});

describe('background copy, move and delete rules', () => {
  const bg = { background: true };
  const problems = (input: unknown) => {
    try {
      compilePolicyInput(input, bg);
      return [];
    } catch (e) {
      return (e as PolicyDocumentError).problems.map((p) => `${p.rule ?? p.path}: ${p.message}`);
    }
  };

  it.each(['persistent', 'low-durability', 'growing', 'lru-cascade'])(
    '%s compiles where a background evaluator runs',
    (preset) => {
      expect(problems({ namespaces: { app: { preset } } })).toEqual([]);
    },
  );

  const timer = { timer: { everySeconds: 60 } };
  it.each([
    [
      'a rule for every namespace',
      { on: timer, do: [{ copy: { from: 'warm', to: ['cold'] } }] },
      /scope the rule to a namespace/,
    ],
    [
      'a copy into its own tier',
      { scope: { namespace: 'a' }, on: timer, do: [{ copy: { from: 'warm', to: ['warm'] } }] },
      /cannot go to 'warm' itself/,
    ],
    [
      'a move out of hot',
      { scope: { namespace: 'a' }, on: timer, do: [{ move: { from: 'hot', to: ['cold'] } }] },
      /move from hot: hot evicts/,
    ],
    [
      'a move into hot alone',
      { scope: { namespace: 'a' }, on: timer, do: [{ move: { from: 'warm', to: ['hot'] } }] },
      /only copy in a tier that evicts/,
    ],
  ])('refuses %s', (_name, rule, message) => {
    expect(problems({ rules: [{ id: 'r', ...rule }] })).toEqual([expect.stringMatching(message)]);
  });

  it('accepts prefix- and tag-scoped copies (the scope is a selection), unlike scoped grow and shrink', () => {
    const copy = {
      id: 'c',
      scope: { namespace: 'a', prefix: 'img/', tag: 'x' },
      on: timer,
      do: [{ copy: { from: 'warm', to: ['cold'] } }],
    };
    expect(problems({ rules: [copy] })).toEqual([]);
    const grow = { id: 'g', scope: { namespace: 'a', prefix: 'img/' }, on: timer, do: [{ grow: { tier: 'warm', nodes: 1 } }] };
    expect(problems({ rules: [grow] })).toEqual([expect.stringMatching(/'grow' is part of the rule language/)]);
  });
});

describe('storeOnce rules', () => {
  const problems = (input: unknown) => {
    try {
      compilePolicyInput(input, { encryption: { keyring: 'local key files' } });
      return [];
    } catch (e) {
      return (e as PolicyDocumentError).problems.map((p) => `${p.rule ?? p.path}: ${p.message}`);
    }
  };

  it('the dedup preset places write-through into every tier and shares identical values', () => {
    const c = compilePolicyInput({ namespaces: { media: { preset: 'dedup' } } });
    expect(c.placements.media).toEqual({ writeMode: 'write-through', writeTiers: ['hot', 'warm', 'cold'] });
    expect(c.registry.transformFor('media', 'any', [])).toEqual({ storeOnce: true, rules: ['media-place'] });
    expect(c.registry.transformFor('other', 'any', [])).toBeUndefined();
  });

  it.each([
    [
      'for every namespace',
      { rules: [{ id: 'once', on: { action: 'put' }, do: [{ storeOnce: { tiers: ['hot', 'cold'] } }] }] },
      /once: storeOnce is scoped to a namespace/,
    ],
    [
      'with write-back',
      {
        rules: [
          { id: 'once', scope: { namespace: 'a' }, on: { action: 'put' }, do: [{ storeOnce: { tiers: ['hot'] } }] },
          {
            id: 'flush',
            scope: { namespace: 'a' },
            on: { timer: { everySeconds: 1 } },
            do: [{ copy: { from: 'hot', to: ['cold'], what: [{ object: 'dirty', equals: true }] } }],
          },
        ],
      },
      /once: storeOnce needs write-through/,
    ],
    [
      'with encryption',
      {
        rules: [
          { id: 'once', scope: { namespace: 'a' }, on: { action: 'put' }, do: [{ storeOnce: { tiers: ['hot', 'cold'] } }] },
          { id: 'seal', scope: { namespace: 'a' }, on: { action: 'put' }, do: [{ encrypt: { key: 'k' } }] },
        ],
      },
      /once: storeOnce and encrypt cannot share a namespace/,
    ],
  ])('refuses storeOnce %s', (_name, doc, message) => {
    expect(problems(doc)).toEqual([expect.stringMatching(message)]);
  });
});

describe('default rules', () => {
  it('are in force where a background evaluator runs, one per budget besides the fixed ones, and nowhere else', () => {
    const doc = { budgets: [{ id: 'monthly', monthlyUsd: 100 }] };
    const ids = compilePolicyInput(doc, { background: true }).rules.map((r) => r.id);
    expect(ids).toEqual(['default-evict-on-node-fill', 'default-idle-scale-in', 'default-budget-monthly']);
    expect(compilePolicyInput(doc).rules.map((r) => r.id)).toEqual([]);
  });

  it('give way to a rule of the document with the same id', () => {
    const mine = {
      id: 'default-evict-on-node-fill',
      on: { threshold: { tier: 'warm', metric: 'nodeFillPercent', op: '>=', value: 70 } },
      do: [{ move: { from: 'warm', to: ['cold'] } }],
    };
    const rules = compilePolicyInput({ rules: [mine] }, { background: true }).rules;
    expect(rules.filter((r) => r.id === 'default-evict-on-node-fill')).toEqual([
      expect.objectContaining({ on: { threshold: expect.objectContaining({ value: 70 }) } }),
    ]);
  });
});

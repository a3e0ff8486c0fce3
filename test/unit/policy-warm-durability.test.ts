/**
 * Issue 23, item 2: a warm key range lives on exactly one cache node, without a replica, so a namespace whose only
 * durable tier is warm loses acknowledged writes with that node. Strata refuses such a configuration wherever one
 * enters, with a message that says why and what to change: a policy document (put or validated through the admin
 * API), a preset, and the deployment's STRATA_NAMESPACES. Hot alone (write-back) is its own, older case; tiers
 * other than warm are not concerned. A document stored before the refusal existed keeps running (reported), so the
 * policy store stays usable, but cannot be put or rolled back to again.
 */
import { POLICY_CURRENT_KEY, PolicyAdministration } from '../../core/policy/admin.js';
import { compilePolicyInput, documentFromNamespaceConfig, type CompileOptions } from '../../core/policy/compile.js';
import { parsePolicyDocument, PolicyDocumentError, PRESET_NAMES } from '../../core/policy/document.js';
import { PolicyConfigError, type NamespaceConfigInput } from '../../core/policy/namespace-settings.js';
import { place, type TierSnapshot } from '../../core/coordinator/placement.js';
import { InMemoryCasStore } from '../../core/ring/store.js';

const TIERS: readonly TierSnapshot[] = [
  { name: 'hot', dirtyTracking: true },
  { name: 'warm', dirtyTracking: false },
  { name: 'cold', dirtyTracking: false },
];
const WHY = 'a cache node that fails would lose it (each warm key range lives on exactly one node, without a replica)';
const BG: CompileOptions = { background: true, encryption: { keyring: 'local key files' } };

function problemsOf(input: unknown, opts: CompileOptions = BG): Array<{ path: string; rule?: string; message: string }> {
  try {
    compilePolicyInput(input, opts);
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyDocumentError);
    expect((e as PolicyDocumentError).status).toBe(400);
    return (e as PolicyDocumentError).problems.map((p) => ({ ...p }));
  }
  return [];
}

const put = (id: string, tiers: Array<'hot' | 'warm' | 'cold'>, scope: Record<string, string> = { namespace: 'x' }) => ({
  id,
  scope,
  on: { action: 'put' as const },
  do: [{ store: { tiers } }],
});
const flush = (id: string, to: Array<'warm' | 'cold'>, scope: Record<string, string> = { namespace: 'x' }) => ({
  id,
  scope,
  on: { timer: { everySeconds: 1 } },
  do: [{ copy: { from: 'hot' as const, to, what: [{ object: 'dirty' as const, equals: true }] } }],
});

describe('a policy document whose only durable tier would be warm is refused, saying why', () => {
  it('refuses store into warm alone, naming the namespace and rule, with the fix', () => {
    expect(problemsOf({ rules: [put('place', ['warm'])] })).toEqual([
      {
        path: 'rules[0]',
        rule: 'place',
        message:
          `namespace 'x': warm would hold the only durable copy of a write (rule 'place'); ${WHY}. ` +
          "Add 'cold' to the write tiers (store.tiers)",
      },
    ]);
  });

  it('refuses store into hot and warm (hot evicts on its own: it is not durable)', () => {
    const problems = problemsOf({ rules: [put('place', ['hot', 'warm'])] });
    expect(problems).toEqual([expect.objectContaining({ rule: 'place', message: expect.stringContaining(WHY) })]);
    // The whole document is refused, with the message in the error a client sees.
    expect(() => compilePolicyInput({ rules: [put('place', ['hot', 'warm'])] }, BG)).toThrow(
      /rules\[0\] \(rule 'place'\): namespace 'x': warm would hold the only durable copy of a write/,
    );
  });

  it('refuses write-back whose flush writes warm alone: hot then warm would be the only copies', () => {
    expect(problemsOf({ rules: [put('place', ['hot']), flush('flush', ['warm'])] })).toEqual([
      {
        path: 'rules[0]',
        rule: 'place',
        message:
          "namespace 'x': warm would hold the only durable copy of a write (rule 'place' acknowledges it from hot and " +
          `rule 'flush' flushes it to warm alone); ${WHY}. Add 'cold' to the flush's tiers (copy.to of rule 'flush')`,
      },
    ]);
    // The same with cold in the flush is write-back as before.
    const c = compilePolicyInput({ rules: [put('place', ['hot']), flush('flush', ['warm', 'cold'])] }, BG);
    expect(c.placements.x).toMatchObject({ writeMode: 'write-back', writeTiers: ['hot', 'warm', 'cold'] });
  });

  it('refuses storeOnce into warm, a rule for every namespace, and a prefix- or tag-scoped placement', () => {
    const once = {
      id: 'once',
      scope: { namespace: 'x' },
      on: { action: 'put' as const },
      do: [{ storeOnce: { tiers: ['hot', 'warm'] as Array<'hot' | 'warm'> } }],
    };
    expect(problemsOf({ rules: [once] })).toEqual([
      expect.objectContaining({
        rule: 'once',
        message: expect.stringMatching(/^namespace 'x': warm would .*\(storeOnce\.tiers\)$/),
      }),
    ]);
    expect(problemsOf({ rules: [put('all', ['warm'], { namespace: '*' })] }).map((p) => p.message)).toEqual([
      expect.stringMatching(/^every namespace \('\*'\): warm would hold the only durable copy of a write \(rule 'all'\)/),
    ]);
    expect(
      problemsOf({ rules: [put('scratch', ['hot', 'warm'], { namespace: 'x', prefix: 'tmp/' })] }).map((p) => p.message),
    ).toEqual([expect.stringMatching(/^namespace 'x' for keys under 'tmp\/': warm would hold the only durable copy/)]);
    expect(problemsOf({ rules: [put('t', ['warm'], { namespace: 'x', tag: 'cache' })] }).map((p) => p.message)).toEqual([
      expect.stringMatching(/^namespace 'x' for values tagged 'cache': warm would hold/),
    ]);
  });

  it('refuses a background move or delete out of cold, which would leave warm holding the only copy', () => {
    const rule = (r: object) => ({
      rules: [{ id: 'trim', scope: { namespace: 'x' }, on: { timer: { everySeconds: 60 } }, do: [r] }],
    });
    expect(problemsOf(rule({ delete: { from: 'cold', what: [{ object: 'size', op: '>', value: 0 }] } }))).toEqual([
      expect.objectContaining({
        rule: 'trim',
        message:
          "namespace 'x': a delete from cold would leave warm holding the only durable copy of the values it takes; " +
          `${WHY}. Delete from warm instead (cold keeps its copy)`,
      }),
    ]);
    expect(problemsOf(rule({ move: { from: 'cold', to: ['hot', 'warm'] } })).map((p) => p.message)).toEqual([
      expect.stringMatching(/^namespace 'x': a move from cold would leave warm .* Copy from cold instead/),
    ]);
    // A delete from warm (cold keeps the value) and a copy out of cold are fine.
    expect(problemsOf(rule({ delete: { from: 'warm' } }))).toEqual([]);
    expect(problemsOf(rule({ copy: { from: 'cold', to: ['warm'] } }))).toEqual([]);
  });

  it('accepts every placement with cold in it, or without warm, and leaves hot alone its own refusal', () => {
    for (const tiers of [['warm', 'cold'], ['hot', 'warm', 'cold'], ['hot', 'cold'], ['cold']] as const)
      expect(problemsOf({ rules: [put('place', [...tiers])] })).toEqual([]);
    expect(problemsOf({ rules: [put('place', ['hot'])] }).map((p) => p.message)).toEqual([
      expect.stringMatching(/^the only copy of a value would be in hot/),
    ]);
  });

  it('is refused when validated or put through the admin API, and nothing is written', async () => {
    const cas = new InMemoryCasStore();
    const admin = new PolicyAdministration({ cas, deployment: documentFromNamespaceConfig({}), compile: BG });
    const doc = { rules: [put('place', ['hot', 'warm'])] };
    await expect(admin.validate(doc)).rejects.toBeInstanceOf(PolicyDocumentError);
    await expect(admin.put(doc, { ifVersion: 0, author: 'ops' })).rejects.toMatchObject({
      status: 400,
      details: {
        problems: [expect.objectContaining({ path: 'rules[0]', rule: 'place', message: expect.stringContaining(WHY) })],
      },
    });
    expect(cas.writes).toBe(0);
  });
});

describe('presets', () => {
  const withParams = (name: string): Record<string, string> => (name === 'encrypted' ? { key: 'k' } : {});

  it.each(PRESET_NAMES)('%s validates, and every acknowledged write of it reaches cold', (name) => {
    const doc = { namespaces: { app: { preset: name, with: withParams(name) } } };
    expect(problemsOf(doc)).toEqual([]);
    const policy = compilePolicyInput(doc, BG).registry.for('app');
    for (const size of [1, 64 * 1024 * 1024]) {
      const p = place({ policy, header: { size, tags: [], expiresAt: null, ageMs: 0 }, tiers: TIERS });
      expect(p.durable).toContain('cold');
    }
  });

  it('lru-cascade is inclusive: writes go to warm and cold, and the cascade deletes idle values from warm', () => {
    const c = compilePolicyInput({ namespaces: { app: { preset: 'lru-cascade', with: { idleSeconds: 600 } } } }, BG);
    expect(c.placements.app).toEqual({ writeMode: 'write-through', writeTiers: ['warm', 'cold'] });
    expect(c.rules.find((r) => r.id === 'app-cascade')?.do).toEqual([
      { delete: { from: 'warm', what: [{ object: 'idleSeconds', op: '>=', value: 600 }] } },
    ]);
  });

  it('persistent and low-durability write cold before the acknowledgement, and still take their parameters', () => {
    const c = compilePolicyInput(
      {
        namespaces: {
          p: { preset: 'persistent', with: { backupAtFillPercent: 60, backupBytesPerSecond: 4096 } },
          l: { preset: 'low-durability', with: { pushSeconds: 60 } },
        },
      },
      {},
    );
    for (const ns of ['p', 'l'])
      expect(c.placements[ns]).toEqual({
        writeMode: 'write-through',
        writeTiers: ['hot', 'warm', 'cold'],
        writeAroundBytes: 1048576,
      });
  });
});

describe('STRATA_NAMESPACES whose only durable tier would be warm is refused at start-up', () => {
  const refused = (cfg: NamespaceConfigInput) => {
    try {
      documentFromNamespaceConfig(cfg);
    } catch (e) {
      expect(e).toBeInstanceOf(PolicyConfigError);
      return (e as Error).message;
    }
    throw new Error('the configuration was accepted');
  };

  it.each<[string, NamespaceConfigInput, string]>([
    [
      "a namespace's writeTiers hot and warm",
      { namespaces: { x: { writeTiers: ['hot', 'warm'] } } },
      `invalid namespace 'x': warm would hold the only durable copy of a write (writeTiers ["hot","warm"]); ${WHY}. Add "cold" to writeTiers`,
    ],
    [
      "a namespace's writeTiers warm",
      { namespaces: { x: { writeTiers: ['warm'] } } },
      `invalid namespace 'x': warm would hold the only durable copy of a write (writeTiers ["warm"]); ${WHY}. Add "cold" to writeTiers`,
    ],
    [
      'write-back flushed to warm alone',
      { namespaces: { x: { writeMode: 'write-back', writeTiers: ['warm', 'hot'] } } },
      `invalid namespace 'x': warm would hold the only durable copy of a write (write-back, flushed to warm alone; ` +
        `writeTiers ["hot","warm"]); ${WHY}. Add "cold" to writeTiers`,
    ],
    [
      'the defaults',
      { defaults: { writeTiers: ['hot', 'warm'] }, namespaces: { x: { writeTiers: ['hot', 'warm', 'cold'] } } },
      `invalid namespace configuration: defaults: warm would hold the only durable copy of a write (writeTiers ["hot","warm"]); ` +
        `${WHY}. Add "cold" to writeTiers`,
    ],
  ])('refuses %s', (_name, cfg, message) => {
    expect(refused(cfg)).toBe(message);
  });

  it('accepts writeTiers with cold or without warm, as before', () => {
    for (const writeTiers of [['hot', 'warm', 'cold'], ['warm', 'cold'], ['hot', 'cold'], ['cold']] as const)
      expect(() => documentFromNamespaceConfig({ namespaces: { x: { writeTiers: [...writeTiers] } } })).not.toThrow();
  });
});

describe('a stored document accepted before the refusal existed', () => {
  it('keeps running (reported in warnings) so the store stays usable, but cannot be rolled back to', async () => {
    const cas = new InMemoryCasStore();
    const admin = new PolicyAdministration({ cas, deployment: documentFromNamespaceConfig({}), compile: BG });
    await admin.put({ rules: [put('place', ['warm', 'cold'])] }, { ifVersion: 0, author: 'ops' });
    // What an older Strata accepted: the same version, storing into warm alone.
    const warmOnly = parsePolicyDocument({ rules: [put('place', ['warm'])] });
    const cur = (await cas.get(POLICY_CURRENT_KEY))!;
    const stored = JSON.parse(cur.body) as { document: unknown; history: Array<{ file: string }> };
    await cas.put(POLICY_CURRENT_KEY, JSON.stringify({ ...stored, document: warmOnly }), cur.etag);
    const file = stored.history[0]!.file;
    const version = (await cas.get(file))!;
    await cas.put(file, JSON.stringify({ ...JSON.parse(version.body), document: warmOnly }), version.etag);

    const { view, compiled } = await admin.effective();
    expect(view.version).toBe(1);
    expect(compiled.placements.x).toMatchObject({ writeTiers: ['warm'] });
    expect(compiled.warnings).toEqual([
      expect.objectContaining({ rule: 'place', message: expect.stringMatching(/warm would hold the only durable copy/) }),
    ]);
    expect((await admin.version(1))?.document.rules[0]?.id).toBe('place');
    // An operator can put the fix...
    await admin.put({ rules: [put('place', ['warm', 'cold'])] }, { ifVersion: 1, author: 'ops' });
    expect((await admin.effective()).compiled.warnings).toBeUndefined();
    // ...and cannot go back to what is refused now.
    await expect(admin.rollback(1, { author: 'ops' })).rejects.toThrow(/warm would hold the only durable copy/);
  });
});

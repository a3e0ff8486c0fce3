import type { PolicyRuleInput, PresetName } from './document.js';

/**
 * The paper's instances (003 §2.3, §4) as presets: a namespace names one (`namespaces.<ns>.preset`) and gets its
 * rules, scoped to that namespace, with the parameters it passes in `with`. `strata policy validate` shows the
 * rules a preset expands to, so a preset is also a template to copy and edit. docs/POLICIES.md describes each.
 *
 * Every preset acknowledges a write only once a tier that survives the loss of one cache node holds it (cold, or
 * hot under write-back): a warm key range lives on exactly one node, so a placement whose only durable tier is warm
 * is refused (namespace-settings.ts warmOnlyDurable). The paper's instances that acknowledge from warm and copy to
 * cold later (Persistent, low durability, the exclusive LRU cascade) therefore write cold too (docs/POLICIES.md).
 */

export type PresetParams = Readonly<Record<string, number | string | boolean>>;

interface Preset {
  readonly summary: string;
  /** Parameters with their defaults (a parameter the preset does not take is refused). */
  readonly params: Readonly<Record<string, number | string | boolean | undefined>>;
  readonly rules: (p: Readonly<Record<string, number | string | boolean>>) => PolicyRuleInput[];
}

const MiB = 1024 * 1024;
const DURABLE = ['warm', 'cold'] as const;

/** Values of at least `writeAroundBytes` skip hot (a location marker is left there) and go to `tiers` only. */
function writeAround(bytes: number, tiers: ReadonlyArray<'warm' | 'cold'>): PolicyRuleInput {
  return {
    id: 'write-around',
    description: 'Large values skip the hot tier',
    on: { action: 'put' },
    when: [{ object: 'size', op: '>=', value: bytes }],
    do: [{ store: { tiers: [...tiers] } }],
  };
}

function writeThrough(bytes: number, tiers: ReadonlyArray<'hot' | 'warm' | 'cold'> = ['hot', ...DURABLE]): PolicyRuleInput[] {
  const durable = tiers.filter((t): t is 'warm' | 'cold' => t !== 'hot');
  return [
    {
      id: 'place',
      description: 'Write-through: acknowledged once every tier holds the value',
      on: { action: 'put' },
      do: [{ store: { tiers: [...tiers] } }],
    },
    ...(tiers.includes('hot') && durable.length ? [writeAround(bytes, durable)] : []),
  ];
}

function num(p: PresetParams, name: string): number {
  return p[name] as number;
}

export const PRESETS: Readonly<Record<PresetName, Preset>> = {
  'write-through': {
    summary: 'Every write is acknowledged once hot, warm and cold hold it (the default)',
    params: { writeAroundBytes: MiB },
    rules: (p) => writeThrough(num(p, 'writeAroundBytes')),
  },
  'low-latency': {
    summary: "Paper's LowLatency: writes are acknowledged from hot and flushed to warm and cold on a timer",
    params: { flushSeconds: 1, writeAroundBytes: MiB },
    rules: (p) => [
      {
        id: 'place',
        description: 'Write-back: acknowledged once hot holds the value',
        on: { action: 'put' },
        do: [{ store: { tiers: ['hot'] } }],
      },
      {
        id: 'flush',
        description: 'Write dirty values down on a timer',
        on: { timer: { everySeconds: num(p, 'flushSeconds') } },
        do: [{ copy: { from: 'hot', to: [...DURABLE], what: [{ object: 'dirty', equals: true }] } }],
      },
      writeAround(num(p, 'writeAroundBytes'), DURABLE),
    ],
  },
  // The paper's Persistent acknowledges from hot and warm and backs warm up to cold (at 50% fill, 40 KB/s). Warm alone
  // would then hold the only durable copy of every write until the backup, so cold takes each write before it is
  // acknowledged instead, which leaves nothing for the backup to do: its parameters are still accepted (documents
  // that set them stay valid) and change nothing.
  persistent: {
    summary:
      "Paper's Persistent, with cold in every write: write-through to hot, warm and cold (its backup of warm to cold " +
      'is the write itself, since a warm range lives on one cache node)',
    params: { backupAtFillPercent: 50, backupBytesPerSecond: 40 * 1024, writeAroundBytes: MiB },
    rules: (p) => writeThrough(num(p, 'writeAroundBytes')),
  },
  // The paper's cascade is exclusive: one copy, in warm until warm fills, then in cold. Warm would hold the only
  // copy of every value not yet moved, so this one is inclusive: cold holds every value, warm the recently read ones.
  'lru-cascade': {
    summary:
      'Inclusive LRU cascade: every write goes to warm and cold; when warm fills, the values warm has not read for ' +
      'idleSeconds leave warm (cold keeps them)',
    params: { atFillPercent: 85, idleSeconds: 3600, repeatSeconds: 300 },
    rules: (p) => [
      // Hot evicts on its own and is not written (a location marker there shadows older copies): warm is the cache
      // the cascade manages, and its reads are what "idle" counts.
      {
        id: 'place',
        description: 'Writes go to warm and cold; reads of values no longer in warm promote them back into it',
        on: { action: 'put' },
        do: [{ store: { tiers: ['warm', 'cold'] } }],
      },
      // Idle = not read in warm (each cache node counts the reads that reach it: those a near cache serves do not).
      // Cold holds every value, so the cascade only deletes warm's copies (a delete removes one only where cold holds
      // that version or a newer one). While warm stays full it runs again every repeatSeconds, as more values turn idle.
      {
        id: 'cascade',
        description: 'Delete from warm the values not read there for idleSeconds while warm is full (cold holds them)',
        on: {
          threshold: {
            tier: 'warm',
            metric: 'fillPercent',
            op: '>=',
            value: num(p, 'atFillPercent'),
            repeatSeconds: num(p, 'repeatSeconds'),
          },
        },
        do: [{ delete: { from: 'warm', what: [{ object: 'idleSeconds', op: '>=', value: num(p, 'idleSeconds') }] } }],
      },
    ],
  },
  growing: {
    summary: "Paper's Growing: write-through, and the warm fleet grows by 100% at 75% fill",
    params: { atFillPercent: 75, growPercent: 100, writeAroundBytes: MiB },
    rules: (p) => [
      ...writeThrough(num(p, 'writeAroundBytes')),
      {
        id: 'grow',
        description: 'Grow the warm tier before it fills',
        on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '>=', value: num(p, 'atFillPercent'), forSeconds: 60 } },
        do: [{ grow: { tier: 'warm', percent: num(p, 'growPercent') } }],
      },
    ],
  },
  'high-durability': {
    summary: 'Every value, large or small, is acknowledged only once S3 holds it',
    params: {},
    rules: () => [
      {
        id: 'place',
        description: 'Write-through to every tier, cold included',
        on: { action: 'put' },
        do: [{ store: { tiers: ['hot', 'warm', 'cold'] } }],
      },
    ],
  },
  // The paper's low durability acknowledges from hot and warm and pushes warm to S3 every 2 minutes: a cache node
  // that failed would lose what was acknowledged since the last push (whatever hot no longer holds), so cold takes
  // each write before it is acknowledged, as in write-through, and there is nothing left to push. `pushSeconds`
  // is still accepted and changes nothing. For an acknowledgement that does not wait for S3, use low-latency.
  'low-durability': {
    summary:
      "Paper's low durability, with cold in every write: write-through to hot, warm and cold (its push of warm to S3 " +
      'is the write itself, since a warm range lives on one cache node; low-latency acknowledges before S3)',
    params: { pushSeconds: 120, writeAroundBytes: MiB },
    rules: (p) => writeThrough(num(p, 'writeAroundBytes')),
  },
  dedup: {
    summary: 'storeOnce: identical values are stored once and shared',
    params: {},
    rules: () => [
      {
        id: 'place',
        description: 'Content-addressed writes',
        on: { action: 'put' },
        do: [{ storeOnce: { tiers: ['hot', 'warm', 'cold'] } }],
      },
    ],
  },
  'compressed-cold': {
    summary: 'Write-through; values of minBytes (64 KiB) and more skip hot and are stored zstd-compressed in warm and cold',
    params: { minBytes: 64 * 1024, level: 3 },
    rules: (p) => [
      // A value is compressed once, before any tier holds it: keeping compressed values out of hot is what makes
      // this "cold" (hot serves small values uncompressed; large ones are read from below and decompressed).
      ...writeThrough(num(p, 'minBytes')),
      {
        id: 'compress',
        description: 'Compress the values that go around hot',
        on: { action: 'put' },
        do: [{ compress: { minBytes: num(p, 'minBytes'), level: num(p, 'level') } }],
      },
    ],
  },
  encrypted: {
    summary: 'Write-through; every value is encrypted (AES-256-GCM envelope encryption under `key`) before any tier holds it',
    params: { key: undefined, writeAroundBytes: MiB },
    rules: (p) => [
      ...writeThrough(num(p, 'writeAroundBytes')),
      { id: 'encrypt', description: 'Envelope encryption', on: { action: 'put' }, do: [{ encrypt: { key: String(p.key) } }] },
    ],
  },
};

/** A preset's parameters checked against what it takes: the problems, in words (empty when fine). */
export function presetParamProblems(name: PresetName, given: PresetParams = {}): string[] {
  const preset = PRESETS[name];
  const problems: string[] = [];
  for (const [k, v] of Object.entries(given)) {
    if (!(k in preset.params)) {
      const known = Object.keys(preset.params);
      problems.push(`preset '${name}' takes no parameter '${k}'${known.length ? ` (it takes ${known.join(', ')})` : ''}`);
    } else if (preset.params[k] !== undefined && typeof v !== typeof preset.params[k]) {
      problems.push(`parameter '${k}' of preset '${name}' is a ${typeof preset.params[k]}`);
    }
  }
  for (const [k, dflt] of Object.entries(preset.params))
    if (dflt === undefined && given[k] === undefined) problems.push(`preset '${name}' needs the parameter '${k}'`);
  return problems;
}

/**
 * The rules a namespace's preset expands to, scoped to the namespace, ids prefixed with it (`sessions.flush`, or
 * `all.flush` for `*`) so that they never collide with the document's own rules.
 */
export function presetRules(name: PresetName, namespace: string, given: PresetParams = {}): PolicyRuleInput[] {
  const preset = PRESETS[name];
  const params = { ...preset.params, ...given } as Record<string, number | string | boolean>;
  const prefix = namespace === '*' ? 'all' : namespace.toLowerCase().replace(/[^a-z0-9-]/g, '-');
  return preset.rules(params).map((r) => ({ ...r, id: `${prefix}-${r.id}`.slice(0, 63), scope: { namespace } }));
}

import {
  namespaceDurable,
  place,
  type Placement,
  type PlacementHeader,
  type TierSnapshot,
} from '../../core/coordinator/placement.js';
import { namespacePolicySchema, type NamespacePolicyInput } from '../../core/policy/namespace-settings.js';

const MiB = 1024 * 1024;

/** The configured tiers as the coordinator describes them to placement; hot tracks dirty entries unless told. */
function tiers(names: ('hot' | 'warm' | 'cold')[], hot: Partial<TierSnapshot> = {}): TierSnapshot[] {
  return names.map((name) => (name === 'hot' ? { name, dirtyTracking: true, ...hot } : { name, dirtyTracking: false }));
}

const ALL = tiers(['hot', 'warm', 'cold']);
const small: PlacementHeader = { size: 100, tags: [], expiresAt: null, ageMs: 0 };
const large: PlacementHeader = { size: MiB, tags: [], expiresAt: null, ageMs: 0 };

interface Case {
  name: string;
  policy?: NamespacePolicyInput;
  header?: PlacementHeader;
  tiers?: TierSnapshot[];
  want: Placement;
}

const cases: Case[] = [
  {
    name: 'write-through: durable tiers take the value, then hot; hits promote into every write tier',
    want: { durable: ['warm', 'cold'], hot: 'value', writeBack: false, promoteInto: ['hot', 'warm', 'cold'] },
  },
  {
    name: 'write-around: a value of writeAroundBytes leaves only a location marker in hot and is never promoted there',
    header: large,
    want: { durable: ['warm', 'cold'], hot: 'marker', writeBack: false, promoteInto: ['warm', 'cold'] },
  },
  {
    name: 'write-around starts exactly at writeAroundBytes',
    policy: { writeAroundBytes: 100 },
    header: { size: 99 },
    want: { durable: ['warm', 'cold'], hot: 'value', writeBack: false, promoteInto: ['hot', 'warm', 'cold'] },
  },
  {
    name: 'write-around applies from writeAroundBytes on',
    policy: { writeAroundBytes: 100 },
    header: { size: 100 },
    want: { durable: ['warm', 'cold'], hot: 'marker', writeBack: false, promoteInto: ['warm', 'cold'] },
  },
  {
    name: 'write-back: acknowledged from a hot tier that tracks dirty entries, flushed to the durable tiers',
    policy: { writeMode: 'write-back' },
    want: { durable: ['warm', 'cold'], hot: 'value', writeBack: true, promoteInto: ['hot', 'warm', 'cold'] },
  },
  {
    name: 'write-back falls back to write-through on a hot tier that cannot track dirty entries',
    policy: { writeMode: 'write-back' },
    tiers: tiers(['hot', 'cold'], { dirtyTracking: false }),
    want: { durable: ['cold'], hot: 'value', writeBack: false, promoteInto: ['hot', 'cold'] },
  },
  {
    name: 'write-back does not apply to a value written around hot',
    policy: { writeMode: 'write-back' },
    header: large,
    want: { durable: ['warm', 'cold'], hot: 'marker', writeBack: false, promoteInto: ['warm', 'cold'] },
  },
  {
    name: 'write-back needs a durable tier to flush to: with none, hot holds the only copy',
    policy: { writeMode: 'write-back', writeTiers: ['hot'] },
    want: { durable: [], hot: 'value', writeBack: false, promoteInto: ['hot'] },
  },
  {
    name: 'a large value still lands in hot when hot is the only write tier, but no hit is promoted into hot for it',
    policy: { writeTiers: ['hot'] },
    header: large,
    want: { durable: [], hot: 'value', writeBack: false, promoteInto: [] },
  },
  {
    // An earlier policy may have placed the key in hot and warm: a read would find that copy before cold's.
    name: 'a namespace that does not write to hot or warm shadows both with markers, in write-back mode too',
    policy: { writeMode: 'write-back', writeTiers: ['cold'] },
    want: { durable: ['cold'], hot: 'marker', writeBack: false, promoteInto: ['cold'], shadow: ['warm'] },
  },
  {
    name: 'write tiers that are not configured are ignored',
    policy: { writeTiers: ['hot', 'warm'] },
    tiers: tiers(['hot', 'cold']),
    want: { durable: [], hot: 'value', writeBack: false, promoteInto: ['hot'] },
  },
  {
    name: 'without a hot tier every write tier is durable',
    tiers: tiers(['warm', 'cold']),
    want: { durable: ['warm', 'cold'], hot: null, writeBack: false, promoteInto: ['warm', 'cold'] },
  },
  {
    name: 'promoteOnRead off: hits are never copied upwards',
    policy: { promoteOnRead: false },
    want: { durable: ['warm', 'cold'], hot: 'value', writeBack: false, promoteInto: [] },
  },
  {
    name: 'tier fill and availability do not change placement yet',
    tiers: [
      { name: 'hot', dirtyTracking: true, fill: 1, available: false },
      { name: 'warm', dirtyTracking: false, fill: 0.99 },
      { name: 'cold', dirtyTracking: false, available: true },
    ],
    want: { durable: ['warm', 'cold'], hot: 'value', writeBack: false, promoteInto: ['hot', 'warm', 'cold'] },
  },
  {
    name: 'tags, expiry and age do not change placement yet',
    header: { size: 100, tags: ['a', 'b'], expiresAt: Date.now() + 1000, ageMs: 86_400_000 },
    want: { durable: ['warm', 'cold'], hot: 'value', writeBack: false, promoteInto: ['hot', 'warm', 'cold'] },
  },
];

describe('placement', () => {
  it.each(cases)('$name', ({ policy = {}, header = small, tiers: snapshot = ALL, want }) => {
    expect(place({ policy: namespacePolicySchema.parse(policy), header, tiers: snapshot })).toEqual(want);
  });

  it('is a pure function of its input: same answer every time, input left as it was', () => {
    const policy = Object.freeze(namespacePolicySchema.parse({ writeMode: 'write-back' }));
    const snapshot = Object.freeze(ALL.map((t) => Object.freeze({ ...t })));
    const header = Object.freeze({ ...small, tags: Object.freeze(['t']) });
    const first = place({ policy, header, tiers: snapshot });
    expect(place({ policy, header, tiers: snapshot })).toEqual(first);
    // Answers are shared between calls (worked out once per policy and tiers), so none can be changed by a caller.
    expect(Object.isFrozen(first)).toBe(true);
    expect(() => (first.durable as string[]).push('hot')).toThrow();
  });

  it('gives every entry of a namespace the durable tiers the tier walk relies on, whatever its size', () => {
    for (const input of [
      {},
      { writeMode: 'write-back' },
      { writeTiers: ['cold'] },
      { writeTiers: ['hot'] },
    ] as NamespacePolicyInput[]) {
      const policy = namespacePolicySchema.parse(input);
      for (const header of [small, large, { size: 0 }]) {
        expect(place({ policy, header, tiers: ALL }).durable).toEqual(namespaceDurable(policy, ALL));
      }
    }
  });
});

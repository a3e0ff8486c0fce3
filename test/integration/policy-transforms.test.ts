/**
 * Compress and encrypt rules (paper 003, Table 1) over real tiers: redis-server as hot, a cache-node process as
 * warm, LocalStack S3 or the local folder as cold. What every tier holds at rest is read raw, beside the tier's own
 * API: an encrypted namespace's bytes never appear in the clear anywhere, a plain namespace's do (the control that
 * shows the raw reads would see them). Reads restore the value from any tier, after promotions, write-back flushes
 * and policy changes; concurrent writers never see a version go backwards; a lost key makes values unreadable with a
 * typed error rather than an older version or garbage.
 */
import { readdirSync } from 'node:fs';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { ValueCodec } from '../../core/transforms/codec.js';
import { LocalKeyring } from '../../core/transforms/keyring.js';
import { startTierStack, type TierStack } from './tier-stack.js';
import { tempDir } from './warm-fixtures.js';

const MARKER = 'PLAINTEXT-MARKER-7f3a';
const VALUE = Buffer.from(`${MARKER} the quick brown fox; `.repeat(300));
const SEALED = 'sealed';
const PLAIN = 'plain';
const WB = 'sealedwb';

const POLICY = {
  namespaces: { [WB]: { preset: 'low-latency', with: { flushSeconds: 3600 } } },
  rules: [
    {
      id: 'seal',
      scope: { namespace: SEALED },
      on: { action: 'put' },
      do: [{ compress: { minBytes: 1 } }, { encrypt: { key: 'app' } }],
    },
    { id: 'seal-wb', scope: { namespace: WB }, on: { action: 'put' }, do: [{ encrypt: { key: 'app' } }] },
  ],
};
const compile = (doc: unknown) => compilePolicyInput(doc, { encryption: { keyring: 'local key files' } }).registry;

describe.each(['s3', 'folder'] as const)('compress and encrypt over redis, a cache node and %s', (coldKind) => {
  const keys = tempDir('strata-keys-');
  let stack: TierStack;
  let hot: TierStack['hot'];
  let warm: TierStack['warm'];
  let cold: TierStack['cold'];
  let coordinator: Coordinator;

  const build = (c: ValueCodec, doc: unknown = POLICY): Coordinator =>
    new Coordinator({ tiers: [hot, warm, cold], policies: compile(doc), codec: c, flushTimer: false });

  beforeAll(async () => {
    stack = await startTierStack(coldKind);
    ({ hot, warm, cold } = stack);
    coordinator = build(new ValueCodec({ keyring: new LocalKeyring({ dir: keys.dir, create: true }) }));
    await coordinator.ready();
  });

  afterAll(async () => {
    await coordinator?.close();
    await stack?.close();
    keys.remove();
  });

  const atRest = () => stack.atRest();

  it('keeps an encrypted namespace ciphertext in every tier at rest, while a plain one is readable there', async () => {
    await coordinator.put(SEALED, 'doc', VALUE);
    await coordinator.drain();
    const sealed = await atRest();
    for (const tier of ['hot', 'warm', 'cold'] as const) {
      expect({ tier, clear: sealed[tier].includes(MARKER) }).toEqual({ tier, clear: false });
      const stored = await { hot, warm, cold }[tier].get(SEALED, 'doc');
      expect(stored!.header.encoding).toEqual({
        size: VALUE.length,
        zstd: true,
        aes: { key: 'app', dataKey: expect.any(String) },
      });
      expect(stored!.value.length).toBeLessThan(VALUE.length / 10);
    }
    // The control: the same value in a plain namespace is visible to these raw reads in every tier.
    await coordinator.put(PLAIN, 'doc', VALUE);
    const plain = await atRest();
    for (const tier of ['hot', 'warm', 'cold'] as const) {
      expect({ tier, clear: plain[tier].includes(MARKER) }).toEqual({ tier, clear: true });
    }
    const read = await coordinator.get(SEALED, 'doc');
    expect(read!.entry.value).toEqual(VALUE);
    expect(read!.entry.header).toMatchObject({ size: VALUE.length });
    expect(read!.entry.header.encoding).toBeUndefined();
    expect(await coordinator.head(SEALED, 'doc')).toMatchObject({ header: { size: VALUE.length }, transformed: true });
  });

  it('restores values read from warm and cold, and promotes the stored bytes, not the plaintext, into hot', async () => {
    const w = await coordinator.put(SEALED, 'promoted', VALUE);
    expect(w.size).toBe(VALUE.length);
    await hot.delete(SEALED, 'promoted');
    const fromWarm = await coordinator.get(SEALED, 'promoted');
    expect(fromWarm).toMatchObject({ tier: 'warm', transformed: true });
    expect(fromWarm!.entry.value).toEqual(VALUE);
    await coordinator.drain();
    const promoted = await hot.get(SEALED, 'promoted');
    expect(promoted?.header.encoding?.aes?.key).toBe('app');
    expect(promoted!.value.includes(MARKER)).toBe(false);
    await hot.delete(SEALED, 'promoted');
    await warm.delete(SEALED, 'promoted');
    const fromCold = await coordinator.get(SEALED, 'promoted');
    expect(fromCold?.tier).toBe('cold');
    expect(fromCold!.entry.value).toEqual(VALUE);
  });

  it('flushes encrypted write-back values as ciphertext, and reads them back from below', async () => {
    const w = await coordinator.put(WB, 'dirty', VALUE);
    expect(w.durable).toBe(false);
    expect(await coordinator.flushDirty()).toBeGreaterThanOrEqual(1);
    const below = await cold.get(WB, 'dirty');
    expect(below?.header.encoding?.aes?.key).toBe('app');
    expect(below!.value.includes(MARKER)).toBe(false);
    await hot.delete(WB, 'dirty');
    expect((await coordinator.get(WB, 'dirty'))!.entry.value).toEqual(VALUE);
  });

  it('reads what was written under an earlier policy after the policy changes either way', async () => {
    await coordinator.put(SEALED, 'before', Buffer.from('sealed then'));
    coordinator.replacePolicies(compile({}));
    await coordinator.put(SEALED, 'after', Buffer.from('plain now'));
    expect((await warm.get(SEALED, 'after'))!.header.encoding).toBeUndefined();
    expect((await coordinator.get(SEALED, 'before'))!.entry.value.toString()).toBe('sealed then');
    coordinator.replacePolicies(compile(POLICY));
    expect((await coordinator.get(SEALED, 'after'))!.entry.value.toString()).toBe('plain now');
    expect((await coordinator.get(SEALED, 'before'))!.entry.value.toString()).toBe('sealed then');
  });

  it('never reads a version older than an acknowledged one while writers race on encrypted keys', async () => {
    const newest = new Map<string, { version: number; value: string }>();
    const problems: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let i = 0; i < 15; i++) {
          const key = `race${(w + i) % 4}`;
          const value = `w${w}-${i}-${MARKER}`;
          const ack = await coordinator.put(SEALED, key, Buffer.from(value));
          const seen = newest.get(key);
          if (!seen || ack.version > seen.version) newest.set(key, { version: ack.version, value });
          const floor = newest.get(key)!.version;
          const r = await coordinator.get(SEALED, key);
          if (!r || r.entry.header.version < floor) problems.push(`${key}: read ${r?.entry.header.version} after ${floor}`);
        }
      }),
    );
    expect(problems).toEqual([]);
    for (const [key, last] of newest) {
      const r = await coordinator.get(SEALED, key);
      expect({ key, version: r!.entry.header.version, value: r!.entry.value.toString() }).toEqual({ key, ...last });
    }
  });

  it('answers KEY_UNAVAILABLE, not an older version, when the key file is lost', async () => {
    await coordinator.put(SEALED, 'lost', VALUE);
    await coordinator.drain();
    // A process restarted after the key file was lost (the file is renamed away, then restored for the other tests).
    const file = readdirSync(keys.dir)[0]!;
    const lost = tempDir('strata-keys-lost-');
    try {
      const restarted = build(new ValueCodec({ keyring: new LocalKeyring({ dir: lost.dir }) }));
      await expect(restarted.get(SEALED, 'lost')).rejects.toMatchObject({
        code: 'KEY_UNAVAILABLE',
        status: 503,
        details: { key: 'app', permanent: true },
      });
      await expect(restarted.put(SEALED, 'lost', Buffer.from('new'))).rejects.toMatchObject({ code: 'KEY_UNAVAILABLE' });
      // Nothing was written by the refused put: the key file, restored, reads the last acknowledged value.
      expect((await coordinator.get(SEALED, 'lost'))!.entry.value).toEqual(VALUE);
    } finally {
      lost.remove();
    }
    expect(file).toBe('app.key');
  });
});

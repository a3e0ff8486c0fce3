/**
 * Coordinator.touch (issue 24, item 4): a new TTL without the value sent again, as a write of metadata with a new
 * version. What it must never do: undo a write that lands between its read and its write, in this process or another.
 */
import { TOUCH_ATTEMPTS } from '../../core/coordinator/coordinator.js';
import { NotFoundError, StrataError, VersionConflictError } from '../../core/errors.js';
import { skewedPair } from '../helpers/skewed-pair.js';

const buf = (s: string) => Buffer.from(s);
/** The inline limit a touch is given (values above it are refused). */
const MAX = 1024 * 1024;
const pair = skewedPair;

describe('Coordinator.touch', () => {
  it('sets the expiry from now and a new version, keeping the value, tags and content type', async () => {
    const { a, b, hot, cold } = pair();
    const w = await a.put('ns', 'k', buf('value'), { ttlSeconds: 60, tags: ['t1', 'x:y'], contentType: 'text/x-thing' });
    const before = Date.now();
    const t = await a.touch('ns', 'k', { ttlSeconds: 3600, maxBytes: MAX });
    expect(t.version).toBeGreaterThan(w.version);
    expect(t.expiresAt).toBeGreaterThanOrEqual(before + 3_600_000);
    for (const tier of [hot, cold]) {
      const e = (await tier.get('ns', 'k'))!;
      expect([e.value.toString(), e.header.version, e.header.expiresAt]).toEqual(['value', t.version, t.expiresAt]);
      expect([e.header.tags, e.header.contentType]).toEqual([['t1', 'x:y'], 'text/x-thing']);
    }
    // Another process reads the touched entry; null: no expiry from then on.
    expect((await b.get('ns', 'k'))!.entry.header.version).toBe(t.version);
    const forever = await b.touch('ns', 'k', { ttlSeconds: null, maxBytes: MAX });
    expect(forever.expiresAt).toBeNull();
    // (a's near cache may serve its older copy for its TTL; the tiers hold the touch.)
    expect((await hot.head('ns', 'k'))!).toMatchObject({ version: forever.version, expiresAt: null });
  });

  it('never undoes a write another process lands between its read and its write: the touch applies to the newer value', async () => {
    const { a, b, hot, cold } = pair();
    await a.put('ns', 'k', buf('v1'));
    // Right after the touch read v1, another coordinator writes v2 (a's clock runs ahead of b's: a write at a's
    // next clock version would land above v2 and undo it).
    // (Its read is the coordinator's own, private: the hook stands for the time between that read and the write.)
    const internals = a as unknown as { stored(ns: string, key: string): Promise<unknown> };
    const stored = internals.stored.bind(a);
    let raced = 0;
    internals.stored = async (ns: string, key: string) => {
      const r = await stored(ns, key);
      if (raced++ === 0) {
        await b.put(ns, key, buf('v2'));
        // A few ms pass, so a's next clock version is above v2 (b stamped v2 just above v1, which it read).
        await new Promise((done) => setTimeout(done, 5));
      }
      return r;
    };
    const t = await a.touch('ns', 'k', { ttlSeconds: 120, maxBytes: MAX });
    expect(raced).toBe(2); // read v1, lost to v2, read again
    for (const tier of [hot, cold]) {
      const e = (await tier.get('ns', 'k'))!;
      expect([e.value.toString(), e.header.version]).toEqual(['v2', t.version]);
    }
    expect(t.expiresAt).not.toBeNull();
  });

  it('under concurrent writes and touches from two processes, the stored value is the newest write, never an older one', async () => {
    const { a, b, cold } = pair();
    await a.put('ns', 'k', buf('w-first'));
    const writes: { version: number; value: string }[] = [];
    const ops = Array.from({ length: 40 }, async (_, i) => {
      const c = i % 2 ? a : b;
      if (i % 3 === 0) {
        try {
          await c.touch('ns', 'k', { ttlSeconds: 600 + i, maxBytes: MAX });
        } catch (e) {
          // Losing TOUCH_ATTEMPTS races in a row is a refusal, never a write.
          if (!(e instanceof VersionConflictError)) throw e;
        }
      } else {
        const value = `w${i}`;
        writes.push({ version: (await c.put('ns', 'k', buf(value))).version, value });
      }
    });
    await Promise.all(ops);
    const newest = writes.reduce((m, w) => (w.version > m.version ? w : m));
    const stored = (await cold.get('ns', 'k'))!;
    expect(stored.header.version).toBeGreaterThanOrEqual(newest.version);
    expect(stored.value.toString()).toBe(newest.value);
    expect(TOUCH_ATTEMPTS).toBe(3);
  });

  it('applies if-match as a write does: 409 on another version or a missing key; without it a missing key is 404', async () => {
    const { a } = pair();
    await expect(a.touch('ns', 'none', { ttlSeconds: 5, maxBytes: MAX })).rejects.toBeInstanceOf(NotFoundError);
    await expect(a.touch('ns', 'none', { ttlSeconds: 5, ifMatch: '*', maxBytes: MAX })).rejects.toBeInstanceOf(
      VersionConflictError,
    );
    const w = await a.put('ns', 'k', buf('v'));
    await expect(a.touch('ns', 'k', { ttlSeconds: 5, ifMatch: w.version + 1, maxBytes: MAX })).rejects.toMatchObject({
      status: 409,
      details: { expected: w.version + 1, current: w.version },
    });
    expect((await a.touch('ns', 'k', { ttlSeconds: 5, ifMatch: w.version, maxBytes: MAX })).version).toBeGreaterThan(w.version);
    // Deleted: missing again.
    await a.delete('ns', 'k');
    await expect(a.touch('ns', 'k', { ttlSeconds: 5, maxBytes: MAX })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('refuses a value above maxBytes with 413 before reading it, and changes nothing', async () => {
    const { a, cold } = pair();
    const w = await a.put('ns', 'big', Buffer.alloc(4096, 1));
    const err = await a.touch('ns', 'big', { ttlSeconds: 5, maxBytes: 1024 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StrataError);
    expect(err).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', status: 413, details: { limit: 1024, size: 4096 } });
    expect((await cold.head('ns', 'big'))!.version).toBe(w.version);
  });
});

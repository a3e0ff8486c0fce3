/**
 * If-Match on put and delete is a compare-and-set across processes: a write that lands in another process between
 * the precondition's read and the conditional write is never undone by it, whichever machine's clock runs ahead.
 */
import type { Coordinator } from '../../core/coordinator/coordinator.js';
import { VersionConflictError } from '../../core/errors.js';
import { skewedPair } from '../helpers/skewed-pair.js';

const buf = (s: string) => Buffer.from(s);

/** Runs `between` once, right after `c`'s next precondition read (head) returned: the race window. */
function raceAfterRead(c: Coordinator, between: () => Promise<unknown>): void {
  const internals = c as unknown as { head: Coordinator['head'] };
  const head = internals.head.bind(c);
  let raced = false;
  internals.head = async (ns, key) => {
    const r = await head(ns, key);
    if (!raced) {
      raced = true;
      await between();
      // A few ms pass, so a's next clock version is above b's write (b stamped it just above what it read).
      await new Promise((done) => setTimeout(done, 5));
    }
    return r;
  };
}

describe('If-Match across processes', () => {
  it('a conditional put loses, with 409, to a write another process lands after its check: never undoes it', async () => {
    const { a, b, hot, cold } = skewedPair();
    const v1 = await a.put('ns', 'k', buf('v1'));
    let v2 = 0;
    raceAfterRead(a, async () => (v2 = (await b.put('ns', 'k', buf('v2'))).version));
    const err = await a.put('ns', 'k', buf('cas'), { ifMatch: v1.version }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VersionConflictError);
    expect(err).toMatchObject({ status: 409, details: { current: v2 } });
    for (const tier of [hot, cold]) {
      const e = (await tier.get('ns', 'k'))!;
      expect([e.value.toString(), e.header.version]).toEqual(['v2', v2]);
    }
  });

  it('a conditional delete loses, with 409, to a write another process lands after its check', async () => {
    const { a, b, cold } = skewedPair();
    const v1 = await a.put('ns', 'k', buf('v1'));
    raceAfterRead(a, () => b.put('ns', 'k', buf('v2')));
    await expect(a.delete('ns', 'k', { ifMatch: v1.version })).rejects.toBeInstanceOf(VersionConflictError);
    await expect(a.delete('ns', 'k', { ifMatch: '*' })).resolves.toBeDefined();
    expect((await cold.get('ns', 'k'))!.header.flags.tombstone).toBe(true);
    // If-Match: * is a compare-and-set over the version read too.
    await b.put('ns', 'k', buf('v3'));
    raceAfterRead(b, () => a.put('ns', 'k', buf('v4')));
    await expect(b.put('ns', 'k', buf('v5'), { ifMatch: '*' })).rejects.toBeInstanceOf(VersionConflictError);
    expect((await cold.get('ns', 'k'))!.value.toString()).toBe('v4');
  });

  it("decides on the tiers, not on a near copy that is behind another process's write", async () => {
    const { a, b, cold } = skewedPair();
    const v1 = await a.put('ns', 'k', buf('v1'));
    expect((await a.get('ns', 'k'))!.entry.header.version).toBe(v1.version); // a's near cache holds v1
    const v2 = await b.put('ns', 'k', buf('v2'));
    await expect(a.put('ns', 'k', buf('cas'), { ifMatch: v1.version })).rejects.toBeInstanceOf(VersionConflictError);
    expect((await cold.get('ns', 'k'))!.header.version).toBe(v2.version);
    const w = await a.put('ns', 'k', buf('cas'), { ifMatch: v2.version });
    expect((await cold.get('ns', 'k'))!.header.version).toBe(w.version);
  });

  it('of concurrent compare-and-sets over one version from two processes, exactly one is acknowledged and kept', async () => {
    const { a, b, cold } = skewedPair();
    const v1 = await b.put('ns', 'k', buf('v1'));
    const tries = Array.from({ length: 10 }, (_, i) =>
      (i % 2 ? a : b).put('ns', 'k', buf(`w${i}`), { ifMatch: v1.version }).then(
        (w) => ({ i, version: w.version }),
        (e: unknown) => {
          if (!(e instanceof VersionConflictError)) throw e;
          return undefined;
        },
      ),
    );
    const won = (await Promise.all(tries)).filter((w) => w !== undefined);
    expect(won).toHaveLength(1);
    const stored = (await cold.get('ns', 'k'))!;
    expect([stored.value.toString(), stored.header.version]).toEqual([`w${won[0]!.i}`, won[0]!.version]);
  });
});

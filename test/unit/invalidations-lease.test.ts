/**
 * The invalidation lease's background refresh: past half the lease, reads go on without waiting while one refresh
 * runs, and they add nothing to it. Each read used to chain a handler onto the refresh in flight until it answered,
 * a promise and a closure per read (on an L1 hit, which never yields to the event loop, that could be every read
 * until the lease ran out: bench invalidate measured such hits a third dearer).
 */
import { Invalidations, type InvalidationRegister } from '../../core/coordinator/invalidations.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';

describe('the invalidation lease', () => {
  it('starts one background refresh past half the lease and chains nothing onto it per read', async () => {
    let now = 0;
    let answer!: (v: number | undefined) => void;
    let versionCalls = 0;
    const register: InvalidationRegister = {
      version: () => {
        versionCalls++;
        return versionCalls === 1 ? Promise.resolve(undefined) : new Promise((r) => (answer = r));
      },
      read: () => Promise.resolve(undefined),
      write: () => Promise.resolve(true),
    };
    const inv = new Invalidations({ register, clock: new HybridLogicalClock(), leaseMs: 1000, now: () => now });
    await inv.refreshNow();
    now = 600; // past half the lease, within it
    expect(inv.ready()).toBeUndefined(); // starts the refresh, does not wait for it
    const inFlight = (inv as unknown as { refreshing: Promise<void> }).refreshing;
    expect(inFlight).toBeInstanceOf(Promise);
    let chained = 0;
    for (const m of ['then', 'catch', 'finally'] as const) {
      const original = inFlight[m].bind(inFlight) as (...a: unknown[]) => Promise<unknown>;
      (inFlight as unknown as Record<string, unknown>)[m] = (...a: unknown[]) => {
        chained++;
        return original(...a);
      };
    }
    for (let i = 0; i < 1000; i++) expect(inv.ready()).toBeUndefined();
    expect({ chained, versionCalls }).toEqual({ chained: 0, versionCalls: 2 });
    answer(undefined);
    await inFlight;
    // Trusted anew from when the refresh started: a read at 1,500 ms is within the new lease without waiting.
    now = 1500;
    expect(inv.ready()).toBeUndefined();
  });
});

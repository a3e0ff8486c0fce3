/**
 * The invalidation lease (core/coordinator/invalidations.ts).
 * - Its background refresh: past half the lease, reads go on without waiting while one refresh runs, and they add
 *   nothing to it. Each read used to chain a handler onto the refresh in flight until it answered, a promise and a
 *   closure per read (on an L1 hit, which never yields to the event loop, that could be every read until the lease
 *   ran out: bench invalidate measured such hits a third dearer).
 * - Its clocks: the lease is measured on the monotonic clock, and a read takes one reading of it for the lease and
 *   (through wallAt) for its near cache's expiry checks.
 * - A read whose lease ran out never goes on with a refresh that started before it and answered late.
 */
import { jest } from '@jest/globals';
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

  /** A register whose version() calls answer only when the test says, counting them. */
  function gatedRegister() {
    const pending: ((v: number | undefined) => void)[] = [];
    const register: InvalidationRegister = {
      version: () => new Promise((r) => pending.push(r)),
      read: () => Promise.resolve(undefined),
      write: () => Promise.resolve(true),
    };
    const answer = async (): Promise<void> => {
      while (pending.length === 0) await new Promise((r) => setImmediate(r));
      pending.shift()!(undefined);
    };
    return { register, pending, answer };
  }

  it('does not let a read go on with a refresh that answered after its lease ran out', async () => {
    let now = 0;
    const g = gatedRegister();
    const inv = new Invalidations({ register: g.register, clock: new HybridLogicalClock(), leaseMs: 1000, now: () => now });
    const first = inv.refreshNow();
    await g.answer();
    await first;
    now = 600;
    expect(inv.ready()).toBeUndefined(); // the background refresh starts at 600, and hangs
    now = 2000; // it has not answered; the lease (600 + 950) has run out by now
    const waiting = inv.ready()!;
    let settled = false;
    void waiting.then(() => (settled = true));
    await g.answer(); // it answers now: what it read at 600 may miss an invalidation that returned since
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    expect(g.pending).toHaveLength(1); // so the read waits for a refresh that started after it began
    await g.answer();
    await waiting;
  });

  it('keeps the lease on the monotonic clock, and follows a wall-clock step in wallAt from the next refresh', async () => {
    let mono = 5_000;
    let wall = 1_800_000_000_000;
    const dateNow = jest.spyOn(Date, 'now').mockImplementation(() => wall);
    try {
      const register: InvalidationRegister = {
        version: () => Promise.resolve(undefined),
        read: () => Promise.resolve(undefined),
        write: () => Promise.resolve(true),
      };
      const inv = new Invalidations({ register, clock: new HybridLogicalClock(), leaseMs: 1000, now: () => mono });
      await inv.refreshNow();
      expect(inv.wallAt(mono)).toBe(wall); // the near cache's expiry checks: wall time from the read's one reading
      mono += 100;
      wall += 100 - 3_600_000; // 100 ms later, and the wall clock steps back an hour
      expect(inv.ready(mono)).toBeUndefined(); // the lease (monotonic) is not moved by it
      expect(inv.wallAt(mono)).toBe(wall + 3_600_000); // until the next refresh, the wall time from before the step
      await inv.refreshNow();
      expect(inv.wallAt(mono)).toBe(wall);
      mono += 1000; // a lease later, whatever the wall clock says
      expect(inv.ready(mono)).toBeInstanceOf(Promise);
    } finally {
      dateNow.mockRestore();
    }
  });
});

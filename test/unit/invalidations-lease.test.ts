/**
 * The invalidation lease (core/coordinator/invalidations.ts).
 * - Its background refresh: past half the lease, reads go on without waiting while one refresh runs, and they add
 *   nothing to it. Each read used to chain a handler onto the refresh in flight until it answered, a promise and a
 *   closure per read (on an L1 hit, which never yields to the event loop, that could be every read until the lease
 *   ran out: bench invalidate measured such hits a third dearer).
 * - Its clocks: the lease is measured on the wall clock (a read passes the reading it takes for its expiry checks),
 *   so it must fail closed when that clock goes back; an invalidation's wait is measured on the monotonic clock, so a
 *   forward jump cannot end it early.
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

  it('voids the lease when the wall clock goes back, and a refresh from before the step does not restore it', async () => {
    let now = 10_000;
    const g = gatedRegister();
    const inv = new Invalidations({ register: g.register, clock: new HybridLogicalClock(), leaseMs: 1000, now: () => now });
    const first = inv.refreshNow();
    await g.answer();
    await first;
    now = 10_600; // past half the lease: a background refresh starts, its answer held back
    expect(inv.ready()).toBeUndefined();
    expect(g.pending).toHaveLength(1);
    now = 10_100; // the clock steps back 500 ms, inside the old lease as the old clock counted it
    const waiting = inv.ready();
    expect(waiting).toBeInstanceOf(Promise); // not trusted: how long the lease has run is unknown
    let settled = false;
    void waiting!.then(() => (settled = true));
    await g.answer(); // the refresh from before the step answers: it must not extend the lease
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    expect(g.pending).toHaveLength(1); // a refresh started after the step
    await g.answer();
    await waiting;
    expect(inv.ready()).toBeUndefined(); // trusted again, from the refresh after the step
  });

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

  it("measures an invalidation's wait on the monotonic clock, so a wall-clock jump forward cannot end it early", async () => {
    let wall = 0;
    let mono = 0;
    const register: InvalidationRegister = {
      version: () => Promise.resolve(undefined),
      read: () => Promise.resolve(undefined),
      write: () => Promise.resolve(true),
    };
    const inv = new Invalidations({
      register,
      clock: new HybridLogicalClock(),
      leaseMs: 1000,
      now: () => wall,
      monotonic: () => mono,
      // A timer that wakes early (as a sleep may), while the wall clock jumps an hour ahead.
      sleep: async (ms) => {
        mono += Math.min(ms, 100);
        wall += 3_600_000;
      },
    });
    await inv.invalidate('ns', { tags: ['t'] }, 'test');
    expect(mono).toBeGreaterThanOrEqual(1000); // a whole lease passed before it returned
  });
});

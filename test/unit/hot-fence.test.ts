import { FENCE_SHARDS, HotFence, tierFenceRegister, type FenceRegister } from '../../core/coordinator/hot-fence.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';

/** A manual clock: time moves only when a test says so; sleeps resolve when it passes their deadline. */
function manualClock() {
  let t = 0;
  const sleepers: { at: number; wake: () => void }[] = [];
  return {
    now: () => t,
    sleep: (ms: number) => new Promise<void>((wake) => sleepers.push({ at: t + ms, wake })),
    async advance(ms: number) {
      t += ms;
      for (const s of sleepers.filter((x) => x.at <= t)) {
        sleepers.splice(sleepers.indexOf(s), 1);
        s.wake();
      }
      await new Promise((r) => setImmediate(r));
    },
  };
}

async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('HotFence', () => {
  it('acknowledges an invalidation only a lease after the raised epoch is durable, and raises it for other fences', async () => {
    const register = tierFenceRegister(new MemoryTier({ name: 'cold' }));
    const clock = manualClock();
    const writer = new HotFence({ register, leaseMs: 1000, now: clock.now, sleep: clock.sleep });
    const reader = new HotFence({ register, leaseMs: 1000, now: clock.now, sleep: clock.sleep });
    await reader.refreshNow();
    const before = reader.readerView() as readonly number[];
    expect(before[7]).toBe(0);
    const done = writer.invalidate([7]);
    await new Promise((r) => setImmediate(r));
    expect(await settled(done)).toBe(false); // durable, but a reader's lease may still hold the old epochs
    await clock.advance(999);
    expect(await settled(done)).toBe(false);
    // The reader's lease (taken at t=0) has run out by the time the write is acknowledged: it must re-read.
    await clock.advance(1);
    expect(await settled(done)).toBe(true);
    const view = reader.readerView();
    expect(view).toBeInstanceOf(Promise);
    await view;
    expect((reader.readerView() as readonly number[])[7]).toBe(1);
  });

  it('serves many writes with one raise (group commit), and never loses a concurrent raise (compare-and-set)', async () => {
    let writes = 0;
    const inner = tierFenceRegister(new MemoryTier({ name: 'cold' }));
    const register: FenceRegister = { read: () => inner.read(), write: (d) => (writes++, inner.write(d)) };
    const a = new HotFence({ register, leaseMs: 10 });
    const b = new HotFence({ register, leaseMs: 10 });
    await Promise.all([
      ...Array.from({ length: 50 }, (_, i) => a.invalidate([i])),
      ...Array.from({ length: 50 }, (_, i) => b.invalidate([i])),
    ]);
    expect(writes).toBeLessThanOrEqual(8); // a couple of rounds per fence, plus compare-and-set retries
    const doc = (await register.read())!;
    expect(doc.epochs.length).toBe(FENCE_SHARDS);
    // Every shard both fences raised is above 0: no raise was overwritten by the other's.
    for (let i = 0; i < 50; i++) expect(doc.epochs[i]).toBeGreaterThanOrEqual(1);
    expect(doc.epochs[50]).toBe(0);
  });

  it('does not let a reader judge hot copies once its lease has run out and the register cannot be read', async () => {
    const clock = manualClock();
    let down = false;
    const inner = tierFenceRegister(new MemoryTier({ name: 'cold' }));
    const register: FenceRegister = {
      read: () => (down ? Promise.reject(new Error('down')) : inner.read()),
      write: (d) => inner.write(d),
    };
    const fence = new HotFence({ register, leaseMs: 1000, now: clock.now, sleep: clock.sleep });
    await fence.refreshNow();
    expect(Array.isArray(fence.readerView())).toBe(true);
    down = true;
    await clock.advance(1000);
    const view = fence.readerView();
    if (view instanceof Promise) await view;
    expect(fence.readerView()).toBeNull();
  });

  it('refuses to acknowledge when the register cannot be written', async () => {
    const register: FenceRegister = { read: async () => undefined, write: async () => Promise.reject(new Error('cold is down')) };
    const fence = new HotFence({ register, leaseMs: 10 });
    await expect(fence.invalidate([1])).rejects.toThrow('cold is down');
  });

  it('distrusts the hot tier after a lost connection until its incarnation is checked, and fences a new one whole', async () => {
    const register = tierFenceRegister(new MemoryTier({ name: 'cold' }));
    let token = 'run-1';
    let recorded: string | null = 'run-1';
    let lost = () => {};
    const fence = new HotFence({
      register,
      leaseMs: 10,
      incarnations: {
        onConnectionLost: (l) => (lost = l),
        checkIncarnation: async () => (recorded === token ? { same: true } : { same: false, token, previous: recorded }),
        confirmIncarnation: async (t) => {
          recorded = t;
        },
      },
    });
    await fence.settle();
    expect(Array.isArray(fence.readerView())).toBe(true);
    expect(fence.bumpCount).toBe(0); // the same incarnation: nothing to fence
    token = 'run-2'; // restarted from a snapshot that still records run-1
    lost();
    const view = fence.readerView();
    expect(view).toBeInstanceOf(Promise);
    await view;
    expect(recorded).toBe('run-2');
    expect(fence.bumpCount).toBe(1);
    expect(fence.current().every((e) => e === 1)).toBe(true);
  });
});

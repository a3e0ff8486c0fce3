/**
 * A write that chose write-back just before a policy without write-back came into force can land its dirty copy in
 * hot after the flusher's drain found hot clean and stopped. That acknowledged write must still reach the durable
 * tiers: by the drain's timer, and by the final flush at shutdown. (Found by policy-live.test.ts on a slow machine:
 * an acknowledged write-back write stayed in hot alone after the policy flipped to write-through.)
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import type { Entry } from '../../core/model/entry.js';
import type { PutOptions } from '../../core/tiers/tier.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';

/** A hot tier whose dirty puts wait at a gate the test opens. */
class GatedHot extends MemoryTier {
  private open?: () => void;
  private readonly gate = new Promise<void>((r) => (this.open = r));
  reached!: Promise<void>;
  private reach!: () => void;
  constructor() {
    super({ name: 'hot' });
    this.reached = new Promise<void>((r) => (this.reach = r));
  }
  override async put(ns: string, key: string, e: Entry, opts?: PutOptions) {
    if (e.header.flags.dirty) {
      this.reach();
      await this.gate;
    }
    return super.put(ns, key, e, opts);
  }
  release(): void {
    this.open!();
  }
}

/** A durable tier that keeps what it holds when the coordinator closes it, so the test can look after shutdown. */
class KeptCold extends MemoryTier {
  override async close(): Promise<void> {}
}

const writeBack = () => new PolicyRegistry({ defaults: { writeMode: 'write-back', flushIntervalMs: 50 } });
const writeThrough = () => new PolicyRegistry({ defaults: { writeMode: 'write-through' } });

async function lateDirtyWrite(flushTimer: boolean) {
  const hot = new GatedHot();
  const cold = new KeptCold({ name: 'cold' });
  const c = new Coordinator({ tiers: [hot, cold], policies: writeBack(), flushTimer, onBackgroundError: () => {} });
  const put = c.put('ns', 'k', Buffer.from('acknowledged'));
  await hot.reached; // the write chose write-back; its dirty copy is on its way to hot
  c.replacePolicies(writeThrough());
  expect(await c.flushDirty()).toBe(0); // the drain's pass finds hot clean: without the fix, the drain ends here
  hot.release();
  const ack = await put;
  expect(ack.durable).toBe(false);
  return { c, hot, cold, ack };
}

describe('a write-back write that lands after the policy dropped write-back', () => {
  it('is flushed by the drain timer it restarts', async () => {
    const { c, cold, ack } = await lateDirtyWrite(true);
    const deadline = Date.now() + 10_000;
    while ((await cold.get('ns', 'k'))?.header.version !== ack.version && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await cold.get('ns', 'k'))?.header.version).toBe(ack.version);
    await c.close();
  });

  it('is flushed at shutdown when no timer runs', async () => {
    const { c, hot, cold, ack } = await lateDirtyWrite(false);
    expect(await hot.listDirty(10)).toHaveLength(1);
    await c.close();
    expect((await cold.get('ns', 'k'))?.header.version).toBe(ack.version);
  });

  it('is flushed by the next due flush without a timer (Lambda), not only at shutdown', async () => {
    const { c, cold, ack } = await lateDirtyWrite(false);
    const deadline = Date.now() + 10_000;
    while ((await cold.get('ns', 'k'))?.header.version !== ack.version && Date.now() < deadline) {
      await c.flushIfDue();
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await cold.get('ns', 'k'))?.header.version).toBe(ack.version);
    await c.close();
  });
});

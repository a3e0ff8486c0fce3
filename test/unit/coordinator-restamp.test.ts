import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { MAX_RESTAMPS, restamp, type Attempt } from '../../core/coordinator/restamp.js';
import { VersionConflictError } from '../../core/errors.js';
import type { Entry } from '../../core/model/entry.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { SwitchableTier, entry } from '../helpers/tiers.js';

/** An attempt that loses to `newer(version)` for the first `losses` tries, then succeeds; records every version tried. */
function losing(losses: number, newer: (version: number) => number = (v) => v + 1000) {
  const tried: number[] = [];
  const attempt = async (version: number): Promise<Attempt<string>> => {
    tried.push(version);
    return tried.length > losses ? { ok: true, value: `done@${version}` } : { ok: false, current: newer(version) };
  };
  return { tried, attempt };
}

describe('the re-stamp loop', () => {
  it('acknowledges the first attempt that is not refused, with the version it was stamped with', async () => {
    const clock = new HybridLogicalClock();
    const { tried, attempt } = losing(0);
    await expect(restamp(clock, attempt, { exhausted: () => 'gave up' })).resolves.toBe(`done@${tried[0]}`);
    expect(tried).toHaveLength(1);
  });

  it('re-stamps a change that lost above the version it lost to, instead of dropping it', async () => {
    const clock = new HybridLogicalClock();
    const newer: number[] = [];
    const { tried, attempt } = losing(3, (v) => {
      newer.push(v + 5000);
      return v + 5000;
    });
    const r = await restamp(clock, attempt, { exhausted: () => 'gave up' });
    expect(tried).toHaveLength(4);
    for (let i = 1; i < tried.length; i++) expect(tried[i]).toBeGreaterThan(newer[i - 1]!);
    expect(r).toBe(`done@${tried[3]}`);
  });

  it('never re-stamps a conditional change: the newer version is a conflict', async () => {
    const clock = new HybridLogicalClock();
    const { tried, attempt } = losing(1);
    const conflict = (current: number) => new VersionConflictError('changed', { current });
    await expect(restamp(clock, attempt, { conflict, exhausted: () => 'gave up' })).rejects.toBeInstanceOf(VersionConflictError);
    expect(tried).toHaveLength(1);
  });

  it(`gives up after ${MAX_RESTAMPS} re-stamps in a row and lets the caller decide`, async () => {
    const clock = new HybridLogicalClock();
    const { tried, attempt } = losing(Infinity);
    const r = await restamp(clock, attempt, { exhausted: (version, current) => ({ version, current }) });
    expect(tried).toHaveLength(MAX_RESTAMPS + 1);
    expect(r).toEqual({ version: tried[MAX_RESTAMPS], current: tried[MAX_RESTAMPS]! + 1000 });
  });

  it('with a limit of 0 makes exactly one attempt (a put tries once before taking the key lock)', async () => {
    const clock = new HybridLogicalClock();
    const { tried, attempt } = losing(Infinity);
    await expect(restamp(clock, attempt, { limit: 0, exhausted: () => undefined })).resolves.toBeUndefined();
    expect(tried).toHaveLength(1);
  });
});

describe('a delete is re-stamped like a write', () => {
  function setup() {
    const hot = new SwitchableTier('hot');
    const cold = new SwitchableTier('cold', 64 * 1024 * 1024);
    const policies = new PolicyRegistry();
    const c = new Coordinator({
      tiers: [hot, cold],
      policies,
      flushTimer: false,
      onBackgroundError: () => {},
      hotFence: { leaseMs: 20 },
    });
    return { c, hot, cold };
  }

  it('re-stamps a delete that lost to a newer version elsewhere instead of dropping it', async () => {
    const { c, cold } = setup();
    // Another writer with a clock far ahead already stored a version in cold.
    const future = new HybridLogicalClock(() => Date.now() + 60_000).next();
    await cold.put('ns', 'k', entry(future, 'theirs'));
    const d = await c.delete('ns', 'k');
    expect(d.version).toBeGreaterThan(future);
    expect(await c.get('ns', 'k')).toBeUndefined();
    expect((await cold.head('ns', 'k'))!.flags.tombstone).toBe(true);
  });

  it('reports a conditional delete that lost to a newer version as a conflict, leaving the newer version in place', async () => {
    const { c, cold } = setup();
    const w = await c.put('ns', 'k', Buffer.from('mine'));
    // A writer in another process, with a clock far ahead, writes cold after the precondition was read.
    const future = new HybridLogicalClock(() => Date.now() + 60_000).next();
    const put = cold.put.bind(cold);
    let raced = false;
    cold.put = async (ns: string, key: string, e: Entry) => {
      if (!raced && e.header.flags.tombstone) {
        raced = true;
        await put(ns, key, entry(future, 'theirs'));
      }
      return put(ns, key, e);
    };
    const conflict = { code: 'VERSION_CONFLICT', details: { current: future } };
    await expect(c.delete('ns', 'k', { ifMatch: w.version })).rejects.toMatchObject(conflict);
    expect((await cold.get('ns', 'k'))!.value.toString()).toBe('theirs');
  });
});

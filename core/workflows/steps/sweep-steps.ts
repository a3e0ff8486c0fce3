import * as z from 'zod';
import { Invalidations, tierInvalidationRegister } from '../../coordinator/invalidations.js';
import { HybridLogicalClock } from '../../model/hlc.js';
import { NAMESPACE_PATTERN } from '../../model/keys.js';
import { supportsScan, supportsSweepRequests, type SweepRequests, type Tier } from '../../tiers/tier.js';
import { execution, firstStateInput, tiersTopDown, type DataStepDeps } from './data-steps.js';

/**
 * InvalidationSweep: the physical removal of entries that invalidations cover (coordinator/invalidations.ts), after
 * a namespace flush or a prefix invalidation. Reads already treat covered entries as missing; this frees the space
 * they hold. Each batch scans one page of one tier's namespace (hot, then warm, then cold; under the prefix when
 * given) and removes each covered entry at exactly the version it found, so a write landing meanwhile is never
 * removed. Resumable from its cursor; running it twice removes nothing more. Without a prefix it reads the whole
 * namespace: a flush's sweep, and the one sweep per window that a namespace's tag invalidations share.
 */

/** Entries a batch reads (one page of one tier). */
export const SWEEP_PAGE = 500;

export const sweepRequest = z.strictObject({
  ns: z.string().regex(NAMESPACE_PATTERN, 'ns must be a namespace: 1-63 of a-z, 0-9, "_", "-", starting with a letter or digit'),
  /** Only keys under this prefix (a prefix invalidation's own). */
  prefix: z.string().min(1).optional(),
  /** Entries per batch. */
  limit: z.number().int().min(1).max(5000).default(SWEEP_PAGE),
  /**
   * Not before this time (the state machine's Wait state waits for it; the steps ignore it): tag invalidations of a
   * window share one sweep that starts once the window is over (api/namespace-operations.ts). Step Functions' format:
   * RFC 3339 with an uppercase T and Z; it reads whole seconds and drops a fraction
   * (https://docs.aws.amazon.com/step-functions/latest/dg/state-wait.html). Checked when the execution is started
   * (the admin API validates every input), not after the wait.
   */
  notBefore: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/, 'notBefore must be a UTC time like 2026-11-27T05:00:00Z')
    .optional(),
  /**
   * The sweep request this execution was started from (its S3 event: api/namespace-operations.ts), whose input the
   * `load` step read; removed once the sweep is done.
   */
  object: z.string().min(1).optional(),
});
export type SweepRequest = z.infer<typeof sweepRequest>;

export interface SweepTotals {
  scanned: number;
  removed: number;
  /** Covered entries a newer write replaced between the scan and the removal (left alone). */
  changed: number;
  batches: number;
  /** Per tier swept: entries scanned and removed. */
  tiers: Record<string, { scanned: number; removed: number }>;
}

const batchInput = z.looseObject({
  execution,
  batch: z.looseObject({
    request: z.looseObject({}),
    tier: z.number().int().min(0),
    cursor: z.string().nullish(),
    totals: z.looseObject({}),
  }),
});

export function sweepSteps(d: DataStepDeps) {
  const tiers = (): Tier[] => tiersTopDown(d);
  /** The generations in force, read fresh (the lowest tier holds them). */
  const generations = async (): Promise<Invalidations> => {
    const all = tiers();
    if (all.length === 0) throw new Error('the invalidation sweep needs the tiers (none are configured for the steps)');
    const inv = new Invalidations({ register: tierInvalidationRegister(all.at(-1)!), clock: new HybridLogicalClock() });
    await inv.refreshNow();
    return inv;
  };

  /** The cold tier's sweep requests (the S3 tier, deployed). */
  const requests = (): SweepRequests => {
    const cold = d.tiers.cold;
    if (!cold || !supportsSweepRequests(cold))
      throw new Error('a sweep request names an object, but the cold tier keeps no sweep requests (it is not S3)');
    return cold;
  };

  return {
    /**
     * The sweep a request object asks for (the execution was started by its S3 event, with its key as `object`): its
     * input, with the key, before the state machine waits for `notBefore`. `{}` when the request is gone (a repeated
     * event after the sweep removed it): the execution then ends.
     */
    async load(raw: Record<string, unknown>) {
      const { object } = z.looseObject({ object: z.string().min(1) }).parse(raw);
      const stored = await requests().readSweepRequest(object);
      if (!stored) return {};
      return { ...sweepRequest.omit({ object: true }).parse(stored), object };
    },

    /** Validates the request (first state): a bad one fails the execution before anything is removed. */
    async begin(raw: Record<string, unknown>) {
      const { exec, request: rest } = firstStateInput(raw, 'invalidation-sweep');
      const request = sweepRequest.parse(rest);
      await d.progress.update(exec, 'invalidation-sweep', (p) => {
        p.phase = `sweeping ${request.prefix === undefined ? 'namespace' : `prefix '${request.prefix}' of`} '${request.ns}'`;
      });
      const totals: SweepTotals = { scanned: 0, removed: 0, changed: 0, batches: 0, tiers: {} };
      return { request, tier: 0, cursor: null, done: tiers().length === 0, totals };
    },

    /** One page of one tier: covered entries removed at the version found. */
    async batch(raw: Record<string, unknown>) {
      const i = batchInput.parse(raw);
      const request = sweepRequest.parse(i.batch.request);
      const totals = i.batch.totals as unknown as SweepTotals;
      const all = tiers();
      const tier = all[i.batch.tier];
      if (!tier) return { request, tier: i.batch.tier, cursor: null, done: true, totals };
      if (!supportsScan(tier)) {
        return { request, tier: i.batch.tier + 1, cursor: null, done: i.batch.tier + 1 >= all.length, totals };
      }
      const inv = await generations();
      const page = await tier.scan(request.ns, {
        limit: request.limit,
        cursor: i.batch.cursor ?? null,
        ...(request.prefix !== undefined ? { prefix: request.prefix } : {}),
      });
      const per = (totals.tiers[tier.name] ??= { scanned: 0, removed: 0 });
      let removed = 0;
      for (const item of page.items) {
        if (!inv.covers(request.ns, item.key, item.header)) continue;
        if (await tier.delete(request.ns, item.key, item.header.version)) removed++;
        else totals.changed++;
      }
      per.scanned += page.items.length;
      per.removed += removed;
      totals.scanned += page.items.length;
      totals.removed += removed;
      totals.batches++;
      const next = page.cursor === null ? { tier: i.batch.tier + 1, cursor: null } : { tier: i.batch.tier, cursor: page.cursor };
      const done = next.tier >= all.length;
      if (removed > 0) d.metric('entriesSwept', removed);
      // Its request is done with (a later invalidation of the same window would start a sweep that finds nothing).
      if (done && request.object !== undefined) await requests().deleteSweepRequest(request.object);
      await d.progress.update(i.execution, 'invalidation-sweep', (p) => {
        p.keys += removed;
        p.done = totals.batches;
        p.phase = `${tier.name}: removed ${per.removed} of ${per.scanned} entries scanned`;
        if (done) {
          p.total = totals.batches;
          p.phase = `removed ${totals.removed} covered entries of ${totals.scanned} scanned`;
          p.outcome = 'succeeded';
        }
      });
      return { request, ...next, done, totals };
    },
  };
}

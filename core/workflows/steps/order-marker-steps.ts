import * as z from 'zod';
import { NAMESPACE_PATTERN } from '../../model/keys.js';
import { maintainsOrderMarkers, ORDER_MARKER_MIN_AGE_MS } from '../../tiers/s3-order-markers.js';
import type { Tier } from '../../tiers/tier.js';
import { log } from '../../util/logger.js';
import { execution, firstStateInput, tiersTopDown, type DataStepDeps } from './data-steps.js';

/**
 * OrderMarkers: upkeep of the S3 tier's key-order index (core/tiers/s3-order-markers.ts). Markers are never deleted on
 * the write path, so those of deleted, expired and lifecycle-removed objects pile up and each costs every ordered
 * listing that meets it a read; objects written before markers existed have none, so ordered listings miss them.
 * - `prune` (on a schedule): one page of markers per batch, listed with their ages; those old enough go to
 *   S3OrderMarkers.prune, which deletes a marker only when it is at least an hour old, its object is gone, and its
 *   ETag is unchanged (a conditional delete). A backend that refuses conditional deletes (501) keeps every marker: the
 *   run stops there and reports `unsupported`, it does not fail.
 * - `backfill` (by hand, once, after every writer marks its creations): one page of entry objects per batch, each
 *   given a marker where it has none.
 * Tiers without markers are skipped. Each batch resumes from the cursor in the state (namespace and page).
 */

/** Markers (prune) or objects (backfill) a batch lists: one S3 page. */
export const ORDER_MARKERS_PAGE = 1000;

export const orderMarkersRequest = z.strictObject({
  mode: z.enum(['prune', 'backfill']),
  /** One namespace; absent: every namespace of each tier with markers. */
  ns: z
    .string()
    .regex(NAMESPACE_PATTERN, 'ns must be a namespace: 1-63 of a-z, 0-9, "_", "-", starting with a letter or digit')
    .optional(),
  /** Markers (prune) or objects (backfill) per batch. */
  limit: z.number().int().min(1).max(ORDER_MARKERS_PAGE).default(ORDER_MARKERS_PAGE),
});
export type OrderMarkersRequest = z.infer<typeof orderMarkersRequest>;

export interface OrderMarkersTotals {
  mode: 'prune' | 'backfill';
  /** Markers (prune) or entry objects (backfill) listed. */
  listed: number;
  /** Prune: stale markers deleted. */
  removed: number;
  /** Prune: markers old enough to look at, kept (object present, changed meanwhile, or deletes unsupported). */
  kept: number;
  /** Prune: markers younger than an hour, not looked at. */
  young: number;
  /** Backfill: markers written for objects that had none. */
  created: number;
  /** Namespaces gone through to the end. */
  namespaces: number;
  batches: number;
  /** Tiers passed over: they keep no order markers. */
  skipped: string[];
  /** Prune: the backend refuses conditional deletes (LocalStack's 501): every marker was kept and the run stopped. */
  unsupported: boolean;
}

const batchInput = z.looseObject({
  execution,
  batch: z.looseObject({
    request: z.looseObject({}),
    tier: z.number().int().min(0),
    /** The namespace being gone through; null: the tier's first (or `request.ns`). */
    ns: z.string().nullish(),
    cursor: z.string().nullish(),
    totals: z.looseObject({}),
  }),
});

export function orderMarkerSteps(d: DataStepDeps) {
  const tiers = (): Tier[] => tiersTopDown(d);

  return {
    /** Validates the request (first state): a bad one fails the execution before anything is listed. */
    async begin(raw: Record<string, unknown>) {
      const { exec, request: rest } = firstStateInput(raw, 'order-markers');
      const request = orderMarkersRequest.parse(rest);
      await d.progress.update(exec, 'order-markers', (p) => {
        p.phase = `${request.mode === 'prune' ? 'pruning' : 'backfilling'} order markers of ${
          request.ns === undefined ? 'every namespace' : `'${request.ns}'`
        }`;
      });
      const totals: OrderMarkersTotals = {
        mode: request.mode,
        listed: 0,
        removed: 0,
        kept: 0,
        young: 0,
        created: 0,
        namespaces: 0,
        batches: 0,
        skipped: [],
        unsupported: false,
      };
      return finish(exec, { request, tier: 0, ns: null, cursor: null, done: tiers().length === 0, totals });
    },

    /** One page of one namespace of one tier: stale markers pruned, or missing ones written. */
    async batch(raw: Record<string, unknown>) {
      const i = batchInput.parse(raw);
      const request = orderMarkersRequest.parse(i.batch.request);
      const totals = i.batch.totals as unknown as OrderMarkersTotals;
      const all = tiers();
      const nextTier = () => ({
        request,
        tier: i.batch.tier + 1,
        ns: null,
        cursor: null,
        done: i.batch.tier + 1 >= all.length,
        totals,
      });
      const tier = all[i.batch.tier];
      if (!tier) return { request, tier: i.batch.tier, ns: null, cursor: null, done: true, totals };
      if (!maintainsOrderMarkers(tier)) {
        totals.skipped.push(tier.name);
        return finish(i.execution, nextTier());
      }
      const ns = i.batch.ns ?? request.ns ?? (await tier.namespaces())[0];
      if (ns === undefined) return finish(i.execution, nextTier()); // a tier with no namespace
      const cursor = i.batch.cursor ?? null;
      let next: string | null;
      let changed = 0;
      let listed: number;
      if (request.mode === 'prune') {
        const page = await tier.orderMarkerPage(ns, cursor, request.limit);
        const old = page.markers.filter((m) => m.ageMs >= ORDER_MARKER_MIN_AGE_MS).map((m) => m.key);
        const res = old.length ? await tier.pruneOrderMarkers(ns, old) : { removed: [], kept: [], unsupported: false };
        listed = page.markers.length;
        totals.listed += listed;
        totals.young += page.markers.length - old.length;
        totals.removed += res.removed.length;
        totals.kept += res.kept.length;
        changed = res.removed.length;
        if (res.unsupported) totals.unsupported = true;
        next = page.cursor;
      } else {
        const page = await tier.backfillOrderMarkers(ns, cursor, request.limit);
        listed = page.listed;
        totals.listed += listed;
        totals.created += page.created;
        changed = page.created;
        next = page.cursor;
      }
      totals.batches++;
      if (changed > 0) d.metric(request.mode === 'prune' ? 'orderMarkersRemoved' : 'orderMarkersCreated', changed);
      log.info('order markers batch', {
        execution: i.execution,
        mode: request.mode,
        tier: tier.name,
        ns,
        [request.mode === 'prune' ? 'removed' : 'created']: changed,
        listed,
        more: next !== null,
        ...(totals.unsupported ? { unsupported: true } : {}),
      });
      let state;
      if (totals.unsupported) {
        // Every further delete would be refused as well: nothing more can be pruned on this backend.
        state = { request, tier: i.batch.tier, ns, cursor: next, done: true, totals };
      } else if (next !== null) {
        state = { request, tier: i.batch.tier, ns, cursor: next, done: false, totals };
      } else {
        totals.namespaces++;
        const following = request.ns === undefined ? (await tier.namespaces()).find((n) => n > ns) : undefined;
        state =
          following === undefined
            ? nextTier()
            : { request, tier: i.batch.tier, ns: following, cursor: null, done: false, totals };
      }
      await d.progress.update(i.execution, 'order-markers', (p) => {
        p.keys += changed;
        p.done = totals.batches;
        p.phase =
          request.mode === 'prune'
            ? `${tier.name} '${ns}': removed ${totals.removed} stale order markers of ${totals.listed} listed`
            : `${tier.name} '${ns}': created ${totals.created} order markers for ${totals.listed} objects listed`;
        p.facts.unsupported = totals.unsupported;
      });
      return finish(i.execution, state);
    },
  };

  /** Passes the loop state on; once the run is done, records its outcome in the progress document. */
  async function finish<S extends { done: boolean; totals: OrderMarkersTotals }>(exec: string, state: S): Promise<S> {
    if (!state.done) return state;
    const t = state.totals;
    await d.progress.update(exec, 'order-markers', (p) => {
      p.total = t.batches;
      p.done = t.batches;
      p.facts.unsupported = t.unsupported;
      p.phase =
        t.mode === 'backfill'
          ? `created ${t.created} order markers for ${t.listed} objects listed`
          : t.unsupported
            ? `unsupported: the backend refuses conditional deletes (501), so every order marker was kept ` +
              `(${t.listed} listed, ${t.young} younger than an hour)`
            : `removed ${t.removed} stale order markers of ${t.listed} listed (${t.young} younger than an hour, ${t.kept} kept)`;
      p.outcome = 'succeeded';
    });
    return state;
  }
}

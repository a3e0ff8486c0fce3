import * as z from 'zod';
import type { Tier } from '../../tiers/tier.js';
import { ConfigError } from '../../errors.js';
import type { WorkflowName } from '../progress.js';
import {
  evictBatch,
  planEviction,
  type EvictBatchInput,
  type EvictBatchResult,
  type EvictReportLine,
  type PlannedNode,
} from './evict.js';
import { appendWithinBudget } from './report-budget.js';
import type { ScaleDeps } from './scale-steps.js';
import { tierMigrateBatch, tierMigrateInput, type MigrateReportLine, type TierMigrateResult } from './tier-migrate.js';

/**
 * The EvictToS3 and TierMigrate steps: thin adapters that carry the loop state of the state machines (cursor,
 * running totals, a bounded report) around the eviction and tier-move batches of evict.ts and tier-migrate.ts,
 * and record progress and metrics.
 */
export interface DataStepDeps extends Pick<ScaleDeps, 'ring' | 'nodes' | 'progress' | 'metric' | 'now'> {
  tiers: { hot?: Tier; warm?: Tier; cold?: Tier };
}

/** Report lines kept per node (evict) or per run (tier-migrate) in the execution's output. */
const REPORT_LINES = 200;
/**
 * JSON bytes of report lines an execution carries in all (an EvictToS3 run splits them between its nodes): the
 * lines ride in the state machine's state, and Step Functions refuses payloads over 256 KiB. Keys are up to 512
 * bytes, so 200 lines of one node alone could approach that.
 */
const REPORT_BYTES = 96 * 1024;

/** The execution's name, which every step receives (the progress document's id). */
export const execution = z.string().min(1).max(128);

/**
 * A first state's input: the execution's name, the workflow's own name (optional, checked), and the request's
 * fields, which the workflow's schema then validates.
 */
export function firstStateInput(
  raw: Record<string, unknown>,
  workflow: WorkflowName,
): { exec: string; request: Record<string, unknown> } {
  const {
    execution: exec,
    workflow: _w,
    ...request
  } = z.looseObject({ execution, workflow: z.literal(workflow).optional() }).parse(raw);
  return { exec, request };
}

/** The configured tiers top-down (hot, warm, cold): the order the invalidation sweep and the order-marker upkeep visit. */
export function tiersTopDown(d: Pick<DataStepDeps, 'tiers'>): Tier[] {
  return [d.tiers.hot, d.tiers.warm, d.tiers.cold].filter((t): t is Tier => t !== undefined);
}

/** The options of an EvictToS3 execution that apply to every node's batches. */
const evictOptions = z.strictObject({
  rateBytesPerSec: z.number().positive().optional(),
  maxKeys: z.number().int().positive().optional(),
  maxMs: z.number().int().min(100).max(900_000).default(60_000),
  verify: z.enum(['head', 'content']).default('head'),
  /** This node's share of {@link REPORT_BYTES} (set by the plan). */
  reportBytes: z.number().int().min(0).default(REPORT_BYTES),
});

const evictRequest = z.looseObject({ execution, workflow: z.literal('evict-to-s3').optional() });

/** The counters of an eviction batch that add up over a node's batches. */
const EVICT_COUNTS = [
  'keys',
  'bytes',
  'freedBytes',
  'skippedChanged',
  'skippedExpired',
  'skippedPinned',
  'skippedNotOwned',
  'skippedMigrating',
  'failed',
] as const;
type EvictTotals = Pick<EvictBatchResult, (typeof EVICT_COUNTS)[number]> & {
  nodeId: string;
  calls: number;
  reason?: string;
  report: EvictReportLine[];
  reportOmitted: number;
};

/** The counters of a tier-migration batch that add up over the run. */
const MIGRATE_COUNTS = [
  'scanned',
  'matched',
  'moved',
  'bytes',
  'alreadyThere',
  'skippedNewer',
  'skippedChanged',
  'skippedPinned',
  'full',
  'failed',
] as const;
type MigrateTotals = Pick<TierMigrateResult, (typeof MIGRATE_COUNTS)[number]> & {
  calls: number;
  report: MigrateReportLine[];
  reportOmitted: number;
};

export function dataSteps(d: DataStepDeps) {
  const ringLoader = async () => {
    const doc = await d.ring.load();
    if (!doc) throw new ConfigError('there is no ring document: the warm tier has no nodes to evict from');
    return doc;
  };
  const cold = () => {
    if (!d.tiers.cold) throw new ConfigError('eviction needs a cold tier (STRATA_S3_BUCKET, or STRATA_LOCAL_DIR locally)');
    return d.tiers.cold;
  };

  return {
    /** Which nodes to relieve and how many bytes from each; the batch options for all of them. */
    async evictPlan(raw: Record<string, unknown>) {
      const { execution: exec, workflow: _w, rateBytesPerSec, maxKeys, maxMs, verify, ...planInput } = evictRequest.parse(raw);
      const options = evictOptions.parse({ rateBytesPerSec, maxKeys, maxMs, verify });
      const plan = await planEviction({ nodes: d.nodes, ring: ringLoader }, planInput);
      options.reportBytes = Math.floor(REPORT_BYTES / Math.max(1, plan.nodes.length));
      await d.progress.update(exec, 'evict-to-s3', (p) => {
        p.total = plan.nodes.length;
        p.phase = plan.nodes.length
          ? `evicting from ${plan.nodes.length} node(s), ${plan.totalBytes} bytes planned`
          : 'no node needs eviction';
        p.facts.plannedBytes = plan.totalBytes;
        p.facts.ringVersion = plan.ringVersion;
      });
      return { ...plan, options };
    },

    /** One bounded batch on one node; `done: false` means "call again". */
    async evictBatch(raw: Record<string, unknown>) {
      const i = z
        .looseObject({
          execution,
          node: z.looseObject({ nodeId: z.string(), targetBytes: z.number() }),
          options: evictOptions,
          /** The previous batch's result (`{ done: false }` before the first): its cursor and totals carry on. */
          batch: z.looseObject({ cursor: z.unknown().nullish(), totals: z.looseObject({}).nullish() }),
        })
        .parse(raw);
      const prev = i.batch;
      const node = i.node as unknown as PlannedNode;
      const { reportBytes, ...options } = i.options;
      const r: EvictBatchResult = await evictBatch(
        { nodes: d.nodes, ring: ringLoader, cold: cold(), now: d.now },
        {
          nodeId: node.nodeId,
          maxBytes: Math.max(1, node.targetBytes),
          ...options,
          reportLimit: REPORT_LINES,
          cursor: (prev.cursor as EvictBatchInput['cursor']) ?? null,
        },
      );
      const t = addEvict(
        prev.totals && 'nodeId' in prev.totals ? (prev.totals as unknown as EvictTotals) : emptyEvict(node.nodeId),
        r,
        reportBytes,
      );
      d.metric('keysEvicted', r.keys);
      d.metric('bytesMoved', r.bytes, { Workflow: 'evict-to-s3' });
      await d.progress.update(i.execution, 'evict-to-s3', (p) => {
        p.keys += r.keys;
        p.bytes += r.bytes;
        if (r.done) p.done = Math.min(p.total, p.done + 1);
      });
      return { done: r.done, cursor: r.cursor, totals: t };
    },

    /** Sums the nodes' totals into the execution's report. */
    async evictReport(raw: Record<string, unknown>) {
      const i = z
        .looseObject({
          execution,
          results: z.array(z.looseObject({ nodeId: z.string() })),
          plan: z.looseObject({ skipped: z.array(z.unknown()).optional() }),
        })
        .parse(raw);
      const nodes = i.results as unknown as EvictTotals[];
      const sum = (k: keyof EvictTotals) => nodes.reduce((a, n) => a + (n[k] as number), 0);
      const report = {
        keys: sum('keys'),
        bytes: sum('bytes'),
        freedBytes: sum('freedBytes'),
        skippedChanged: sum('skippedChanged'),
        skippedExpired: sum('skippedExpired'),
        skippedPinned: sum('skippedPinned'),
        failed: sum('failed'),
        nodes,
        skipped: i.plan.skipped ?? [],
      };
      await d.progress.update(i.execution, 'evict-to-s3', (p) => {
        p.phase = `moved ${report.keys} keys (${report.bytes} bytes) to the cold tier`;
        p.outcome = 'succeeded';
      });
      return report;
    },

    /** Validates a TierMigrate request (first state): bad input fails the execution before anything moves. */
    async tierMigrateBegin(raw: Record<string, unknown>) {
      const { exec, request } = firstStateInput(raw, 'tier-migrate');
      tierMigrateInput.parse(request); // the batches' own validation, before anything moves
      await d.progress.update(exec, 'tier-migrate', (p) => {
        p.phase = `${String(request.action)} ${JSON.stringify(request.selector)} from ${String(request.from)}`;
      });
      return { request, cursor: null, done: false, totals: emptyMigrate() };
    },

    async tierMigrateBatch(raw: Record<string, unknown>) {
      const i = z
        .looseObject({
          execution,
          batch: z.looseObject({ request: z.looseObject({}), cursor: z.string().nullish(), totals: z.looseObject({}).nullish() }),
        })
        .parse(raw);
      const r = await tierMigrateBatch(
        { ...d.tiers, now: d.now },
        { ...i.batch.request, cursor: i.batch.cursor ?? null, reportLimit: REPORT_LINES },
      );
      const t = addMigrate((i.batch.totals as unknown as MigrateTotals | null) ?? emptyMigrate(), r);
      d.metric('bytesMoved', r.bytes, { Workflow: 'tier-migrate' });
      await d.progress.update(i.execution, 'tier-migrate', (p) => {
        p.keys += r.moved;
        p.bytes += r.bytes;
        p.done = t.calls;
        if (r.done) {
          p.total = t.calls;
          p.phase = `moved ${t.moved} of ${t.matched} selected keys`;
          p.outcome = 'succeeded';
        }
      });
      return { request: i.batch.request, cursor: r.cursor, done: r.done, totals: t };
    },
  };
}

/**
 * `t` plus the batch `r`: its counters summed, its report lines appended while the report stays within
 * {@link REPORT_LINES} lines and `maxBytes` of JSON; the lines left out are counted in `reportOmitted` (along
 * with those the batch itself left out).
 */
function addUp<K extends string, T extends Record<K, number> & { calls: number; report: unknown[]; reportOmitted: number }>(
  t: T,
  r: Record<K, number> & { report: unknown[]; reportTruncated?: number },
  counts: readonly K[],
  maxBytes: number,
): T {
  const { report, omitted } = appendWithinBudget(t.report, r.report, { maxLines: REPORT_LINES, maxBytes });
  const out = { ...t, calls: t.calls + 1, report, reportOmitted: t.reportOmitted + (r.reportTruncated ?? 0) + omitted };
  for (const k of counts) (out as Record<K, number>)[k] = t[k] + r[k];
  return out;
}

function zeros<K extends string>(counts: readonly K[]): Record<K, number> {
  return Object.fromEntries(counts.map((k) => [k, 0])) as Record<K, number>;
}

function emptyEvict(nodeId: string): EvictTotals {
  return { nodeId, ...zeros(EVICT_COUNTS), calls: 0, report: [], reportOmitted: 0 };
}

function addEvict(t: EvictTotals, r: EvictBatchResult, maxBytes: number): EvictTotals {
  return { ...addUp(t, r, EVICT_COUNTS, maxBytes), reason: r.reason };
}

function emptyMigrate(): MigrateTotals {
  return { ...zeros(MIGRATE_COUNTS), calls: 0, report: [], reportOmitted: 0 };
}

function addMigrate(t: MigrateTotals, r: TierMigrateResult): MigrateTotals {
  return addUp(t, r, MIGRATE_COUNTS, REPORT_BYTES);
}

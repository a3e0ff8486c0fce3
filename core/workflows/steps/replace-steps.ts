// ReplaceNode's steps: a DOWN cache node's ranges go to a freshly launched node, filled from the cold tier.
import * as z from 'zod';
import { StrataError, ValidationError } from '../../errors.js';
import { isLive, type Entry } from '../../model/entry.js';
import {
  leaseOf,
  rangesOfNode,
  replaceDownNode,
  spanContains,
  type RangeSpan,
  type RingDocument,
  nodeIdSchema,
} from '../../ring/document.js';
import { ringHash } from '../../ring/hash.js';
import { reportLateHandOver, takeoverSettled } from '../../ring/takeover.js';
import { supportsKeyListing, supportsNamespaceListing, supportsScan, type Tier } from '../../tiers/tier.js';
import { chooseLaunchSubnet, launchClientToken, launchedNode, launchedNodeFields } from './fleet-placement.js';
import { NoNodeToRemoveError, type ScaleDeps } from './scale-steps.js';
import { TokenBucket } from './token-bucket.js';
import { mapLimit } from '../../util/concurrency.js';
import type { DataStepDeps } from './data-steps.js';

const namespaceName = z.string().min(1).max(128);

/** What `replace-node` takes (the execution's input), validated by the API before it starts and by the begin step. */
export const replaceNodeRequest = z.strictObject({
  /** The DOWN node to replace (a node must have been marked DOWN, by the health check or by hand). */
  nodeId: nodeIdSchema,
  /** Why (recorded in the progress facts): `health check` when detection started it. */
  reason: z.string().max(200).nullish(),
  /**
   * Namespaces whose entries the new node is filled with from the cold tier in the background (the keys hot holds
   * first), within its ranges. Default: every namespace the cold tier holds (listed when the fill starts). `[]`: none,
   * the node fills by read-through only (misses are read from cold and promoted where the namespace's policy promotes
   * into warm).
   */
  fillNamespaces: z.array(namespaceName).max(100).optional(),
  /** The fill's bandwidth cap, bytes per second. @default 8 MiB/s */
  rateBytesPerSec: z
    .number()
    .min(1024)
    .max(10 * 1024 ** 3)
    .default(8 * 1024 ** 2),
  /** Each fill step returns after this long (a Lambda step must end well inside its timeout). @default 60000 */
  fillMaxMs: z.number().int().min(100).max(600_000).default(60_000),
  /** How long the replacement may take to answer its health check. @default 900000 */
  launchTimeoutMs: z.number().int().min(1000).max(3_600_000).default(900_000),
  /** Terminate the dead node's instance (and with it its data volume) once replaced. @default true */
  terminate: z.boolean().default(true),
});
export type ReplaceNodeRequest = z.input<typeof replaceNodeRequest>;

const execution = z.string().min(1).max(128);
const workflow = z.literal('replace-node').default('replace-node');

const beginInput = replaceNodeRequest.extend({ execution, workflow });

const takeOverInput = z.strictObject({
  execution,
  workflow,
  /** The DOWN node. */
  nodeId: nodeIdSchema,
  /** The replacement. */
  ...launchedNodeFields,
});

const fillOptions = z.looseObject({
  /** Absent: every namespace the cold tier lists. */
  fillNamespaces: z.array(namespaceName).optional(),
  rateBytesPerSec: z.number().min(1024),
  fillMaxMs: z.number().int().min(100).max(600_000),
});

const fillInput = z.strictObject({
  execution,
  workflow,
  /** The replacement node, whose ranges are filled. */
  nodeId: nodeIdSchema,
  /** Where the previous fill step stopped (opaque; null at the start). */
  cursor: z.string().max(4096).nullable(),
  options: fillOptions,
});

/** The execution's state as the finish and rollback states pass it (`$`). */
const stateInput = z.strictObject({
  execution,
  workflow,
  state: z.looseObject({
    begin: z.looseObject({ nodeId: z.string(), downAt: z.number().nullish() }).nullish(),
    instance: z.looseObject({ instanceId: z.string().nullish() }).nullish(),
    takeOver: z.looseObject({ ringVersion: z.number(), ranges: z.number(), recoveryMs: z.number().nullish() }).nullish(),
    fill: z.looseObject({ keys: z.number().optional(), bytes: z.number().optional() }).nullish(),
    fillError: z.looseObject({ Error: z.string().optional(), Cause: z.string().optional() }).nullish(),
    error: z.looseObject({ Error: z.string().optional(), Cause: z.string().optional() }).nullish(),
  }),
});

/**
 * Where a fill stands: the namespace (by index, and its name: a listing of cold's namespaces may have grown between
 * two steps), the pass (keys hot holds first, then all of cold), the scan cursor.
 */
interface FillCursor {
  ns: number;
  name?: string;
  pass: 'hot' | 'cold';
  scan: string | null;
  /** Items of the page at `scan` already handled: a step that ran out of time mid-page resumes after them. */
  skip?: number;
}

/** Entries a fill step examines per scan page. */
const FILL_PAGE = 200;

/**
 * Entries a fill step copies at once (a chunk): their cold reads in flight (up to {@link FILL_READS}), then written to the
 * node in batch puts. One copy at a time, the fill waited on every round trip; 32 single copies at once it still
 * paid one node request per entry (bench/README.md, node-failure: 57 s for 40,000 entries).
 */
const FILL_CHUNK = 128;
/**
 * ...or as many as make at least this many value bytes: what a chunk holds in memory at once (plus one window of
 * {@link FILL_READS} reads), in a step that runs in a Lambda function. One second's worth at the default cap.
 */
const FILL_CHUNK_BYTES = 8 * 1024 * 1024;
/** Cold reads of a fill step in flight at once. */
const FILL_READS = 32;
/**
 * A batch put to the node carries at most this many value bytes (and {@link FILL_BATCH_OPS} entries): well inside
 * the node's body limit for one request (its largest value plus the headers), and an entry larger than it goes alone.
 */
const FILL_BATCH_BYTES = 1024 * 1024;
const FILL_BATCH_OPS = 64;
/** Batch puts of a fill step in flight at once. */
const FILL_PUTS = 2;

/** Progress of a replacement: launched, took over, filled. */
const PHASES = 3;

/**
 * How long Begin waits for a migration that involves the DOWN node to end before it gives up (a retryable failure:
 * the state machine calls it again). The node usually died in the middle of one, a ScaleIn draining it (a spot
 * interruption whose notice was too short) or a ScaleOut taking ranges from it: the detector can mark it DOWN
 * (5-8 s locally) while that migration's stream steps are still being retried, before its rollback releases the
 * pending ranges and the node's lock. Well inside the step Lambda's 300 s timeout.
 */
export const BEGIN_MIGRATION_WAIT_MS = 120_000;
const BEGIN_POLL_MS = 1000;

/** A migration involving the DOWN node has not ended (or rolled back) within Begin's wait: retried, not permanent. */
export class NodeMigrationInFlightError extends StrataError {
  constructor(node: string, why: string, waitedMs: number) {
    super('VERSION_CONFLICT', `node '${node}' cannot be replaced yet: ${why} (waited ${Math.round(waitedMs / 1000)} s)`, {
      node,
    });
  }
}

type ReplaceDeps = Pick<ScaleDeps, 'ring' | 'nodes' | 'progress' | 'locks' | 'metric' | 'now' | 'fleetSubnets'> &
  Pick<DataStepDeps, 'tiers'> & {
    /** @default {@link BEGIN_MIGRATION_WAIT_MS} */
    beginWaitMs?: number;
    /** @default a timer */
    sleep?: (ms: number) => Promise<void>;
  };

/**
 * ReplaceNode's steps (the state machine: cdk/constructs/workflows/replace-node.ts). Begin checks the node is DOWN
 * and locks it; the launch and health check are ScaleOut's; TakeOver hands every range of the dead node to the new
 * one in one ring compare-and-set (the new node starts empty and serves misses from the next tier at once); Fill
 * copies the named namespaces' entries of those ranges from cold, the keys hot holds first, under a bandwidth cap,
 * each copy a versioned write that never replaces a newer one; Finish records the time to recovery.
 */
export function replaceSteps(d: ReplaceDeps) {
  const sleep = d.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));

  /** The node as Begin may replace it (in the ring, DOWN), or why not: permanent (not there, not DOWN) or for now. */
  async function readDead(nodeId: string): Promise<{ doc: RingDocument; dead: RingDocument['nodes'][number]; busy?: string }> {
    const doc = await d.ring.load();
    const dead = doc?.nodes.find((n) => n.id === nodeId);
    if (!doc || !dead) {
      const ids = doc?.nodes.map((n) => n.id).join(', ') ?? 'none';
      throw new NoNodeToRemoveError(`node '${nodeId}' is not in the ring (nodes: ${ids})`);
    }
    if (dead.state !== 'DOWN') {
      throw new NoNodeToRemoveError(
        `node '${nodeId}' is ${dead.state}, not DOWN: only a node marked DOWN is replaced (ScaleIn drains a live one)`,
      );
    }
    try {
      // The same check TakeOver makes, now, so a replacement that cannot take over launches nothing.
      replaceDownNode(structuredClone(doc), nodeId, { id: `${nodeId}-check`, url: 'http://check.invalid' }, doc.version + 1);
    } catch (e) {
      // A range of it still migrating: the migration ends or rolls back (its stream steps fail on the dead node).
      if (doc.ranges.some((r) => r.pending && (r.owner === nodeId || r.pending.target === nodeId)))
        return { doc, dead, busy: e instanceof Error ? e.message : String(e) };
      throw e;
    }
    return { doc, dead };
  }

  /**
   * Waits (up to `beginWaitMs`) until no range of the DOWN node is pending and this execution holds its lock: a
   * ScaleIn draining the node (or a ScaleOut launched for it) holds the lock until it ends or its rollback ended. Before, a replacement started
   * while the dead node's migration was still rolling back failed here and had to be started again by hand.
   */
  async function waitForNoMigration(nodeId: string, execution: string) {
    const waitMs = d.beginWaitMs ?? BEGIN_MIGRATION_WAIT_MS;
    const started = d.now();
    let noted = false;
    for (;;) {
      const r = await readDead(nodeId);
      let busy = r.busy;
      if (!busy) {
        if (await d.locks.acquire(nodeId, execution)) {
          // Taken: no scale execution can begin on it now; a migration that began just before the lock shows here.
          const again = await readDead(nodeId).catch(async (e: unknown) => {
            await d.locks.release(nodeId, execution);
            throw e;
          });
          if (!again.busy) return again;
          await d.locks.release(nodeId, execution);
          busy = again.busy;
        } else
          busy = `another workflow execution holds node '${nodeId}' (a scale-in or scale-out of it, until it ends or rolls back)`;
      }
      const waited = d.now() - started;
      // Retried by the state machine (not a permanent error): a long rollback gets more time, a stale lock fails.
      if (waited >= waitMs) throw new NodeMigrationInFlightError(nodeId, busy, waited);
      if (!noted) {
        noted = true;
        await d.progress.update(execution, 'replace-node', (p) => {
          p.phase = `waiting for the migration involving ${nodeId} to end or roll back: ${busy}`.slice(0, 300);
        });
      }
      await sleep(Math.min(BEGIN_POLL_MS, Math.max(1, waitMs - waited)));
    }
  }

  return {
    /** Validates the request, locks the node and places the launch in the dead node's AZ (else the emptiest). */
    async begin(raw: unknown) {
      const i = beginInput.parse(raw);
      if (d.fleetSubnets.length === 0) {
        throw new ValidationError(
          'STRATA_FLEET_SUBNETS',
          'the fleet has no subnets configured: ReplaceNode cannot launch a node',
        );
      }
      const { doc, dead } = await waitForNoMigration(i.nodeId, i.execution);
      const sameAz = d.fleetSubnets.find((s) => s.availabilityZone === dead.az);
      const subnet = sameAz ?? chooseLaunchSubnet(d.fleetSubnets, doc.nodes);
      const launch = { ordinal: 0, ...subnet, clientToken: launchClientToken(i.execution, 0) };
      await d.progress.update(i.execution, 'replace-node', (p) => {
        p.total = PHASES;
        p.phase = `launching a replacement for ${i.nodeId} in ${launch.availabilityZone}`;
        p.facts.nodeId = i.nodeId;
        p.facts.reason = i.reason ?? null;
        p.facts.downAt = dead.down ? new Date(dead.down.at).toISOString() : null;
        p.facts.availabilityZone = launch.availabilityZone;
      });
      return {
        nodeId: i.nodeId,
        deadInstanceId: dead.instance ?? null,
        downAt: dead.down?.at ?? null,
        launch,
        launchedAt: d.now(),
        launchTimeoutMs: i.launchTimeoutMs,
        options: {
          ...(i.fillNamespaces ? { fillNamespaces: i.fillNamespaces } : {}),
          rateBytesPerSec: i.rateBytesPerSec,
          fillMaxMs: i.fillMaxMs,
          terminate: i.terminate,
        },
      };
    },

    /** One ring CAS: the new node joins NORMAL owning the dead node's ranges, and the dead node leaves. Idempotent. */
    async takeOver(raw: unknown) {
      const i = takeOverInput.parse(raw);
      let moved = 0;
      let downAt: number | null = null;
      let at: number | undefined;
      const doc = await d.ring.update((draft, next) => {
        const dead = draft.nodes.find((n) => n.id === i.nodeId);
        // A retry after the write landed: the new node is in, the dead one gone.
        if (!dead && draft.nodes.some((n) => n.id === i.newNodeId)) return false;
        downAt = dead?.down?.at ?? null;
        const node = launchedNode(i);
        at = d.now();
        moved = replaceDownNode(draft, i.nodeId, node, next, new Date(at));
      });
      if (at !== undefined) reportLateHandOver(leaseOf(doc), at, d.now(), `${i.newNodeId} taking over ${i.nodeId}`);
      // The new node learns its ranges now, not at its next poll of the ring store.
      await d.nodes.pushRing(i.url, doc).catch(() => undefined);
      const recoveryMs = downAt === null ? null : Math.max(0, d.now() - downAt);
      if (recoveryMs !== null) d.metric('nodeRecoveryMs', recoveryMs);
      await d.progress.update(i.execution, 'replace-node', (p) => {
        p.done = Math.max(p.done, 2);
        p.phase = `${i.newNodeId} took over ${moved} range(s) of ${i.nodeId}; filling`;
        p.facts.newNodeId = i.newNodeId;
        p.facts.recoveryMs = recoveryMs;
      });
      return { ringVersion: doc.version, ranges: moved, recoveryMs };
    },

    /**
     * Copies entries of the named namespaces (else of every namespace cold holds) in the new node's ranges from cold
     * for at most `fillMaxMs`: first the keys hot holds (the ones being read), then everything cold holds.
     * `done: false` means "call again".
     */
    async fill(raw: unknown) {
      const i = fillInput.parse(raw);
      const { hot, warm, cold } = d.tiers;
      if (!warm || !cold || !supportsScan(cold)) return { done: true, cursor: null, keys: 0, bytes: 0 };
      const namespaces = i.options.fillNamespaces ?? (supportsNamespaceListing(cold) ? await cold.namespaces() : []);
      if (namespaces.length === 0) return { done: true, cursor: null, keys: 0, bytes: 0 };
      const hotScan = hot && supportsScan(hot) ? hot : undefined;
      const firstPass = (): FillCursor['pass'] => (hotScan ? 'hot' : 'cold');
      const doc = await d.ring.load();
      const spans: RangeSpan[] = doc ? rangesOfNode(doc, i.nodeId).owned : [];
      const deadline = d.now() + i.options.fillMaxMs;
      // Copies of older versions wait until every write that skipped the node's ranges has ended (ring/takeover.ts):
      // 4/3 L + 4 s after the take-over (24 s at the default lease), within the step's time.
      const settled = doc ? takeoverSettledOf(doc, i.nodeId) : 0;
      if (d.now() < settled) {
        await d.progress.update(i.execution, 'replace-node', (p) => {
          const s = Math.ceil((settled - d.now()) / 1000);
          p.phase = `waiting ${s} s for writes that went around ${i.nodeId}'s ranges to end before filling them`;
        });
        await sleep(Math.min(settled, deadline) - d.now());
        if (d.now() < settled) return { done: false, cursor: i.cursor, keys: 0, bytes: 0 };
      }
      const ours = (ns: string, key: string) => {
        const position = ringHash(ns, key);
        return spans.some((s) => spanContains(s, position));
      };
      const bucket = new TokenBucket({ ratePerSec: i.options.rateBytesPerSec });
      let cur: FillCursor = i.cursor ? (JSON.parse(i.cursor) as FillCursor) : { ns: 0, pass: firstPass(), scan: null };
      if (cur.name !== undefined && namespaces[cur.ns] !== cur.name) {
        // The listing moved under the cursor (a namespace created meanwhile): go on from that namespace by name, or
        // from the next one in order if it is gone.
        const at = namespaces.findIndex((n) => n >= cur.name!);
        cur =
          at < 0
            ? { ns: namespaces.length, pass: 'cold', scan: null }
            : namespaces[at] === cur.name
              ? { ...cur, ns: at }
              : { ns: at, pass: firstPass(), scan: null };
      }
      let keys = 0;
      let bytes = 0;
      while (cur.ns < namespaces.length && d.now() < deadline && spans.length > 0) {
        const ns = namespaces[cur.ns]!;
        const source = cur.pass === 'hot' && hotScan ? hotScan : cold;
        // `match`: the cold tiers then read nothing of keys outside the new node's ranges (three quarters of a
        // four-node fleet's namespace). The filter below stays: a tier may ignore it. The cold pass lists keys only
        // where cold can: the copy reads each entry anyway, and a scan's header read per key (a file read, an S3
        // HEAD) was half the fill's time.
        const options = { limit: FILL_PAGE, cursor: cur.scan, match: (key: string) => ours(ns, key) };
        const page =
          source === cold && supportsKeyListing(cold)
            ? await cold.keys(ns, options)
            : await source.scan(ns, options).then((p) => ({ keys: p.items.map((it) => it.key), cursor: p.cursor }));
        let handled = cur.skip ?? 0;
        // A chunk at a time: its cold reads in parallel, then its live entries written in batch puts, so the node
        // takes many per request. Large values at a low rate can take a page past the step's time: it stops between
        // chunks and the next step resumes after them.
        while (handled < page.keys.length && d.now() < deadline) {
          const chunk = await readChunk(cold, ns, page.keys, handled, (key) => ours(ns, key));
          handled = chunk.end;
          await mapLimit(fillBatches(chunk.live), FILL_PUTS, async (batch) => {
            const size = batch.reduce((n, it) => n + it.entry.value.length, 0);
            await bucket.take(size);
            // Versioned writes: an entry the node holds in that version or a newer one is not applied (nor counted).
            const outcomes = await warm.putMany(ns, batch);
            outcomes.forEach((o, j) => {
              if (!o.applied) return;
              keys++;
              bytes += batch[j]!.entry.value.length;
            });
          });
        }
        if (handled < page.keys.length) cur = { ...cur, skip: handled };
        else if (page.cursor) cur = { ns: cur.ns, pass: cur.pass, scan: page.cursor };
        else if (cur.pass === 'hot') cur = { ns: cur.ns, pass: 'cold', scan: null };
        else cur = { ns: cur.ns + 1, pass: firstPass(), scan: null };
      }
      if (cur.ns < namespaces.length) cur.name = namespaces[cur.ns];
      const done = cur.ns >= namespaces.length || spans.length === 0;
      if (bytes > 0) d.metric('bytesMoved', bytes, { Workflow: 'replace-node' });
      await d.progress.update(i.execution, 'replace-node', (p) => {
        p.keys += keys;
        p.bytes += bytes;
        p.phase = done
          ? 'filled'
          : `filling ${namespaces[cur.ns]} from cold (${cur.pass === 'hot' ? 'keys hot holds' : 'all keys'})`;
      });
      return { done, cursor: done ? null : JSON.stringify(cur), keys, bytes };
    },

    /** Releases the lock and records the outcome (a failed fill is reported: the node serves by read-through). */
    async finish(raw: unknown) {
      const i = stateInput.parse(raw);
      const st = i.state;
      const node = st.begin?.nodeId;
      if (node) await d.locks.release(node, i.execution);
      const fillError = st.fillError
        ? `${st.fillError.Error ?? 'error'}: ${String(st.fillError.Cause ?? '').slice(0, 300)}`
        : null;
      await d.progress.update(i.execution, 'replace-node', (p) => {
        p.done = PHASES;
        p.phase = fillError
          ? `replaced ${node}; the fill stopped (${fillError}): the node fills by read-through`
          : `replaced ${node} by ${st.instance?.instanceId ?? '?'}`;
        p.facts.fillError = fillError;
        p.outcome = 'succeeded';
      });
      return {
        node: node ?? null,
        newNodeId: st.instance?.instanceId ?? null,
        recoveryMs: st.takeOver?.recoveryMs ?? null,
        fillError,
      };
    },

    /**
     * After a failure before or during TakeOver (which is one CAS, so either happened or not): the launched node,
     * if any, owns nothing and is to be terminated; the dead node stays DOWN for another try. Releases the lock.
     */
    async rollback(raw: unknown) {
      const i = stateInput.parse(raw);
      const st = i.state;
      const instanceId = st.instance?.instanceId ?? null;
      const doc = await d.ring.load();
      const inRing = !!instanceId && !!doc?.nodes.some((n) => n.id === instanceId);
      if (st.begin?.nodeId) await d.locks.release(st.begin.nodeId, i.execution);
      await d.progress.update(i.execution, 'replace-node', (p) => {
        p.phase = `rolled back after ${st.error?.Error ?? 'a failure'}${st.error?.Cause ? `: ${String(st.error.Cause).slice(0, 300)}` : ''}`;
        p.outcome = 'rolled-back';
      });
      return { instanceId, terminate: !!instanceId && !inRing };
    },
  };
}

export type ReplaceSteps = ReturnType<typeof replaceSteps>;

/** When the hand-over windows of the ranges `node` took over end (0: none open): see ring/takeover.ts. */
export function takeoverSettledOf(doc: RingDocument, node: string): number {
  const lease = leaseOf(doc);
  let settled = 0;
  for (const r of doc.ranges)
    if (r.owner === node && r.takenOver) settled = Math.max(settled, takeoverSettled(lease, r.takenOver.at));
  return settled;
}

/**
 * Reads the fill's next chunk of `keys` from `from` on: the live entries of those `wanted`, {@link FILL_READS} reads
 * at a time, until {@link FILL_CHUNK} keys are handled or {@link FILL_CHUNK_BYTES} of values read (what the step,
 * in a Lambda function, holds at once). `end`: where the next chunk starts. Each entry is copied with its flags
 * cleared (pinning and the like are the source's, not the new node's).
 */
export async function readChunk(
  cold: Tier,
  ns: string,
  keys: readonly string[],
  from: number,
  wanted: (key: string) => boolean,
): Promise<{ end: number; live: { key: string; entry: Entry }[] }> {
  const live: { key: string; entry: Entry }[] = [];
  let end = from;
  let bytes = 0;
  const last = Math.min(keys.length, from + FILL_CHUNK);
  while (end < last && bytes < FILL_CHUNK_BYTES) {
    const window = keys.slice(end, Math.min(last, end + FILL_READS)).filter(wanted);
    end = Math.min(last, end + FILL_READS);
    const got = await mapLimit(window, FILL_READS, (key) => cold.get(ns, key));
    got.forEach((e, j) => {
      if (!e || !isLive(e.header)) return;
      live.push({ key: window[j]!, entry: { header: { ...e.header, flags: {} }, value: e.value } });
      bytes += e.value.length;
    });
  }
  return { end, live };
}

/** `items` in order, cut into batch puts of at most {@link FILL_BATCH_OPS} entries and {@link FILL_BATCH_BYTES}. */
export function fillBatches<T extends { entry: Entry }>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let bytes = 0;
  for (const it of items) {
    const size = it.entry.value.length;
    if (cur.length > 0 && (cur.length >= FILL_BATCH_OPS || bytes + size > FILL_BATCH_BYTES)) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(it);
    bytes += size;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

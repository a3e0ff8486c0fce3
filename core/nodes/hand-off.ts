// A hand-off: every range of one cache node goes, whole, to a freshly launched node (a rolling upgrade's step).
import { addNode, coalesce, removeNode, requireNode, spanOf, type RingDocument } from '../ring/document.js';
import { RingPreconditionError, type RingStore } from '../ring/store.js';
import type { MigrationMode, MigrationPlan, MigrationSession } from './migration.js';
import type { NodeClient } from './node-client.js';

/**
 * What the Migrator gives the hand-off: the ring, the node client and its own session and plan machinery, so that
 * a hand-off's sessions are prepared, streamed, published and rolled back exactly like a scale-out's or scale-in's.
 */
export interface HandOffDeps {
  ring: RingStore;
  client: NodeClient;
  push(doc: RingDocument, first: string[], o?: { required?: string[]; warn?: (message: string) => void }): Promise<void>;
  newPlanId(): string;
  newSession(
    plan: string,
    i: number,
    source: string,
    target: string,
    span: { start: string; end: string | null },
    planned: { keys: number; bytes: number },
  ): MigrationSession;
  createPlan(
    id: string,
    kind: MigrationPlan['kind'],
    mode: MigrationMode,
    node: string,
    sessions: MigrationSession[],
    execution?: string,
    target?: string,
  ): Promise<MigrationPlan>;
  warn(message: string): void;
}

export interface HandOffRequest {
  /** The node to replace: NORMAL, in no migration. */
  from: string;
  /** Its successor, added to the ring as JOINING (on EC2 a freshly launched instance of the new version). */
  target: { id: string; url: string; instance?: string; az?: string };
  mode: MigrationMode;
  /** The workflow execution planning it: only its steps may act on the plan. */
  execution?: string;
}

/**
 * Plans handing every range of `from` over to `target`: in one ring edit the target joins (JOINING) and `from` is
 * marked LEAVING (so no scale-out takes it as a source and no scale-in drains onto it meanwhile); then one session
 * per range `from` owns, the whole range, from `from` to the target. The sessions then run like any others:
 * incremental mode publishes them one by one (the new node serves range by range), parallel mode all together.
 *
 * Refused (`RingPreconditionError`) when `from` is not NORMAL (a DOWN node is ReplaceNode's; a LEAVING one is being
 * drained) or when a migration involves it. Re-planning after a crash between the ring edit and the plan finds the
 * ring already edited and plans anew.
 */
export async function planHandOff(d: HandOffDeps, o: HandOffRequest): Promise<MigrationPlan> {
  const doc = await d.ring.update((r) => {
    const from = requireNode(r, o.from);
    const joined = r.nodes.find((n) => n.id === o.target.id);
    if (from.state === 'LEAVING' && joined) return false; // an earlier attempt's edit landed
    if (from.state !== 'NORMAL')
      throw new RingPreconditionError(`node '${o.from}' is ${from.state}: only a NORMAL node is handed off`);
    const busy = r.ranges.find((x) => x.pending && (x.owner === o.from || x.pending.target === o.from));
    if (busy) throw new RingPreconditionError(`node '${o.from}' is in a migration (range ${busy.start} is pending)`);
    if (!joined) addNode(r, { ...o.target, state: 'JOINING' });
    from.state = 'LEAVING';
  });
  // The target first (it takes shadow writes once a range is prepared), then the node handing over.
  await d.push(doc, [o.target.id, o.from]);
  const url = requireNode(doc, o.from).url;
  const planId = d.newPlanId();
  const sessions: MigrationSession[] = [];
  for (let i = 0; i < doc.ranges.length; i++) {
    const r = doc.ranges[i]!;
    if (r.owner !== o.from || r.pending) continue;
    const span = spanOf(doc, i);
    const { keys, bytes } = await d.client.rangeStats(url, span.start, span.end);
    sessions.push(d.newSession(planId, sessions.length, o.from, o.target.id, span, { keys, bytes }));
  }
  return d.createPlan(planId, 'hand-off', o.mode, o.from, sessions, o.execution, o.target.id);
}

/**
 * The ring edit that ends a hand-off whose sessions are all published: the new node is NORMAL and the old one leaves
 * the ring (it owns nothing any more; its instance goes after the grace period). Throws when it still owns ranges.
 */
export function finishHandOffEdit(d: RingDocument, plan: MigrationPlan): void {
  if (d.ranges.some((r) => r.owner === plan.node || r.pending?.target === plan.node))
    throw new RingPreconditionError(`node '${plan.node}' still owns ranges`);
  const target = plan.target ? d.nodes.find((n) => n.id === plan.target) : undefined;
  if (target) target.state = 'NORMAL';
  if (d.nodes.some((n) => n.id === plan.node)) removeNode(d, plan.node);
}

/**
 * After a hand-off's rollback released its pending ranges (migration-rollback.ts, which settles the nodes of
 * scale-outs and scale-ins only), settles its two nodes in one more ring edit:
 * - the new node leaves the ring if it owns nothing (nothing was published: its instance is to be terminated),
 *   else it is NORMAL with what it took over;
 * - the old node is NORMAL again with what it did not hand over, or leaves the ring if it handed over everything
 *   (only a failure after the last publish gets here: its instance is to be terminated too).
 * Either way the ring is consistent: no pending range, every node NORMAL. Idempotent. Returns the two nodes'
 * fates (`removed` = no longer in the ring).
 */
export async function settleRolledBackHandOff(
  d: Pick<HandOffDeps, 'ring' | 'client' | 'push' | 'warn'>,
  plan: MigrationPlan,
): Promise<{ oldRemoved: boolean; newRemoved: boolean }> {
  const before = (await d.ring.load())!;
  const doc = await d.ring.update((r) => {
    let changed = false;
    for (const id of [plan.target, plan.node]) {
      const n = id ? r.nodes.find((x) => x.id === id) : undefined;
      if (!n) continue;
      const owns = r.ranges.some((x) => x.owner === n.id || x.pending?.target === n.id);
      if (!owns) {
        removeNode(r, n.id);
        changed = true;
      } else if (n.state === 'JOINING' || n.state === 'PARTIAL' || n.state === 'LEAVING') {
        n.state = 'NORMAL';
        changed = true;
      }
    }
    if (changed) coalesce(r);
    return changed;
  });
  const involved = [plan.target, plan.node].filter((x): x is string => !!x);
  await d.push(doc, involved, { required: [], warn: (m) => d.warn(m) });
  // A node that left the ring still gets the ring without it: it then owns nothing and refuses what it is sent.
  for (const n of before.nodes.filter((x) => involved.includes(x.id) && !doc.nodes.some((y) => y.id === x.id)))
    await d.client
      .pushRing(n.url, doc)
      .catch((e: unknown) => d.warn(`ring version ${doc.version} not pushed to '${n.id}': ${String(e)}`));
  const inRing = (id: string | undefined) => !!id && doc.nodes.some((n) => n.id === id);
  return { oldRemoved: !inRing(plan.node), newRemoved: !!plan.target && !inRing(plan.target) };
}

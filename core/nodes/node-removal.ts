// Removing a DOWN cache node from the ring by hand, without a replacement: its ranges go to their successors.
import { applyRemoval, leaseOf, removalPlan, requireNode, RingDocumentError } from '../ring/document.js';
import { RingPreconditionError, type RingStore } from '../ring/store.js';
import { reportLateHandOver } from '../ring/takeover.js';
import type { NodeClient } from './node-client.js';

export interface NodeRemoval {
  ringVersion: number;
  /** Each range the node owned, and who took it. */
  moved: { start: string; end: string | null; to: string }[];
}

/**
 * Removes DOWN node `nodeId`: each of its ranges goes to the next NORMAL owner clockwise, empty, and is filled by
 * read-through (misses are read from the next tier). First every receiver drops whatever it still holds in the
 * spans it is about to take: a copy left from an earlier ownership (a handover whose clean-up never ran) may be
 * older than what was acknowledged since, and must not be served. Nothing writes there meanwhile (the receiver
 * neither owns those spans nor receives them), and the ring edit re-checks the plan, planning again if the ring
 * moved on. Refused (RingDocumentError) unless the node is DOWN and no migration involves it.
 */
export async function removeDownNode(d: { ring: RingStore; nodes: NodeClient }, nodeId: string): Promise<NodeRemoval> {
  for (let attempt = 0; ; attempt++) {
    const doc = await d.ring.load();
    if (!doc) throw new RingDocumentError('there is no ring yet: no node to remove');
    const plan = removalPlan(doc, nodeId);
    for (const p of plan) await d.nodes.deleteRange(requireNode(doc, p.to).url, p.start, p.end);
    let applied = false;
    let at = 0;
    const written = await d.ring.update((draft, next) => (applied = applyRemoval(draft, nodeId, plan, next, (at = Date.now()))));
    if (applied) {
      reportLateHandOver(leaseOf(written), at, Date.now(), `removing ${nodeId}`);
      const receivers = new Set(plan.map((p) => p.to));
      await Promise.allSettled(written.nodes.filter((n) => receivers.has(n.id)).map((n) => d.nodes.pushRing(n.url, written)));
      return { ringVersion: written.version, moved: plan };
    }
    if (attempt >= 3)
      throw new RingPreconditionError(`the ring kept changing while node '${nodeId}' was being removed; try again`);
  }
}

import { RingStore, type CasStore } from '../../ring/store.js';
import { Migrator } from '../../nodes/migration.js';
import type { NodeClient } from '../../nodes/node-client.js';
import { dataSteps, type DataStepDeps } from './data-steps.js';
import { ProgressStore, ScaleLocks } from '../progress.js';
import { replaceSteps } from './replace-steps.js';
import { scaleSteps, type ScaleDeps } from './scale-steps.js';
import { upgradeSteps } from './upgrade-steps.js';
import { orderMarkerSteps } from './order-marker-steps.js';
import { sweepSteps } from './sweep-steps.js';
import { uploadCommitSteps, type UploadCommitStepDeps } from './upload-commit-steps.js';
import type { StepHandlers } from './registry.js';

/** What the step Lambda (or a local run) gives the steps. */
export type WorkflowDeps = ScaleDeps & DataStepDeps & Pick<UploadCommitStepDeps, 'uploads'>;

/**
 * The steps' dependencies over one CAS store (ring, migration sessions, progress records and scale locks all live
 * there) and one cache-node client; what differs between the step Lambda, a local run and the tests is how a
 * launched node is reached, where metrics go and which tiers there are.
 */
export function workflowDeps(
  o: Pick<WorkflowDeps, 'nodeUrl' | 'metric' | 'tiers' | 'uploads'> &
    Partial<Pick<WorkflowDeps, 'fleetSubnets' | 'now'>> & {
      cas: CasStore;
      nodes: NodeClient;
      onWarning?: (message: string) => void;
    },
): WorkflowDeps {
  const ring = new RingStore(o.cas);
  return {
    ring,
    migrator: new Migrator({ ring, docs: o.cas, client: o.nodes, ...(o.onWarning ? { onWarning: o.onWarning } : {}) }),
    nodes: o.nodes,
    progress: new ProgressStore(o.cas),
    locks: new ScaleLocks(o.cas),
    nodeUrl: o.nodeUrl,
    metric: o.metric,
    now: o.now ?? Date.now,
    fleetSubnets: o.fleetSubnets ?? [],
    tiers: o.tiers,
    ...(o.uploads ? { uploads: o.uploads } : {}),
  };
}

/** Every step of every workflow, bound to `d`. */
export function stepHandlers(d: WorkflowDeps): StepHandlers {
  const s = scaleSteps(d);
  const data = dataSteps(d);
  const r = replaceSteps(d);
  const u = upgradeSteps(d);
  const sweep = sweepSteps(d);
  const markers = orderMarkerSteps(d);
  const upload = uploadCommitSteps(d);
  return {
    'scale-out.begin': s.scaleOutBegin,
    'scale-out.check-node': s.checkNode,
    'scale-out.plan': s.scaleOutPlan,
    'scale-in.begin': s.scaleInBegin,
    'migrate.prepare': s.prepare,
    'migrate.stream': s.stream,
    'migrate.publish': s.publish,
    'migrate.finish': s.finish,
    'migrate.cleanup': s.cleanup,
    'migrate.rollback': s.rollback,
    'evict.plan': data.evictPlan,
    'evict.batch': data.evictBatch,
    'evict.report': data.evictReport,
    'tier-migrate.begin': data.tierMigrateBegin,
    'tier-migrate.batch': data.tierMigrateBatch,
    'replace-node.begin': r.begin,
    'replace-node.take-over': r.takeOver,
    'replace-node.fill': r.fill,
    'replace-node.finish': r.finish,
    'replace-node.rollback': r.rollback,
    'rolling-upgrade.begin': u.begin,
    'rolling-upgrade.next': u.next,
    'rolling-upgrade.plan': u.plan,
    'rolling-upgrade.finish': u.finish,
    'rolling-upgrade.done': u.done,
    'rolling-upgrade.rollback': u.rollback,
    'invalidation-sweep.load': sweep.load,
    'invalidation-sweep.begin': sweep.begin,
    'invalidation-sweep.batch': sweep.batch,
    'order-markers.begin': markers.begin,
    'order-markers.batch': markers.batch,
    'upload-commit.commit': upload.commit,
    'upload-commit.failed': upload.failed,
  };
}

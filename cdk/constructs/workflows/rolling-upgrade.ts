import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { terminateNodeTask, type FleetLaunch } from './fleet-launch.js';
import { launchAndCheck } from './launch-and-check.js';
import { migrationChain } from './migration-map.js';
import { stepTask, type StepContext } from './step-task.js';

/**
 * RollingUpgrade: a new cache-node version (a launch template version, the bundle its user data fetches) reaches the
 * running nodes by replacing them one at a time. Begin (the nodes to replace: the named ones, the rest of a stopped
 * upgrade, or every NORMAL node; the fleet-wide upgrade record) → a loop, one node per turn: NextNode (the next node
 * still to replace, locked; its successor's launch in its AZ) → launch the successor from the launch template →
 * wait until it answers (ScaleOut's health check) → plan the hand-off (it joins, the old node is LEAVING, one
 * session per range of the old node) → migrate the sessions (the shared migration states: incremental publishes range
 * by range) → HandOffDone (the successor NORMAL, the old node out of the ring) → the grace period (routers refresh)
 * → terminate the old instance → NextNode again, until none is left → Done.
 *
 * A loop rather than a Map over the nodes: NextNode reads the ring and the upgrade record each turn, so a turn that
 * finds its node gone (scaled in, marked DOWN) skips it, and only one node's states are in the payload at a time.
 * A failure rolls back the current node's hand-off and stops: the nodes replaced so far stay replaced, the current
 * one keeps (or gets back) its ranges, a successor that took nothing over is terminated; starting the workflow again
 * without `nodes` continues with the nodes not yet replaced.
 */
export class RollingUpgradeDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn']; fleet: FleetLaunch }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'rolling-upgrade' };
    const begin = stepTask(c, 'Begin', 'rolling-upgrade.begin', { 'request.$': '$' }, { resultPath: '$.begin' });
    const next = stepTask(
      c,
      'NextNode',
      'rolling-upgrade.next',
      { 'nodes.$': '$.begin.nodes', 'launchTimeoutMs.$': '$.begin.launchTimeoutMs' },
      { resultPath: '$.next' },
    );
    // Each turn starts from the begin step's result alone: what the previous node's turn left ($.instance, $.plan,
    // ...) must not be taken for this one's by the rollback.
    const turn = new sfn.Pass(this, 'NextTurn', { parameters: { 'begin.$': '$.begin' } });
    const plan = stepTask(
      c,
      'PlanHandOff',
      'rolling-upgrade.plan',
      {
        'nodeId.$': '$.next.nodeId',
        'newNodeId.$': '$.instance.instanceId',
        'instanceId.$': '$.instance.instanceId',
        'url.$': '$.health.url',
        'az.$': '$.next.launch.availabilityZone',
        'mode.$': '$.begin.options.mode',
      },
      { resultPath: '$.plan' },
    );
    const { launch, check } = launchAndCheck(c, props.fleet, '$.next', plan);
    const migrate = migrationChain(c, { plan: '$.plan', options: '$.begin.options' });
    const finish = stepTask(
      c,
      'HandOffDone',
      'rolling-upgrade.finish',
      {
        'planId.$': '$.plan.planId',
        'nodeId.$': '$.next.nodeId',
        'newNodeId.$': '$.instance.instanceId',
        'graceSeconds.$': '$.begin.options.graceSeconds',
      },
      { resultPath: '$.finish' },
    );
    // Routers that have not yet seen the ring without the old node may still send it a request or two.
    const grace = new sfn.Wait(this, 'GracePeriod', { time: sfn.WaitTime.secondsPath('$.begin.options.graceSeconds') });
    const terminateOld = terminateNodeTask(this, 'TerminateOldNode', props.fleet, '$.next.instanceId');
    const done = stepTask(c, 'Done', 'rolling-upgrade.done', {}, { resultPath: '$.done' });

    const rollback = stepTask(c, 'RollBack', 'rolling-upgrade.rollback', { 'state.$': '$' }, { resultPath: '$.rollback' });
    const failed = new sfn.Fail(this, 'UpgradeFailed', { errorPath: '$.error.Error', causePath: '$.error.Cause' });
    const terminateNew = terminateNodeTask(this, 'TerminateNewNode', props.fleet, '$.rollback.newInstanceId');
    const terminateLeft = terminateNodeTask(this, 'TerminateHandedOffNode', props.fleet, '$.rollback.oldInstanceId');
    terminateNew.addCatch(failed, { resultPath: '$.terminateError' });
    terminateLeft.addCatch(failed, { resultPath: '$.terminateError' });
    const oldLeft = new sfn.Choice(this, 'OldNodeLeftRing')
      .when(sfn.Condition.booleanEquals('$.rollback.terminateOld', true), terminateLeft.next(failed))
      .otherwise(failed);
    rollback.next(
      new sfn.Choice(this, 'NewNodeOwnsNothing')
        .when(sfn.Condition.booleanEquals('$.rollback.terminateNew', true), terminateNew.next(oldLeft))
        .otherwise(oldLeft),
    );
    for (const t of [next, launch, check, plan, ...migrate.catchables, finish, terminateOld])
      t.addCatch(rollback, { resultPath: '$.error' });

    plan.next(migrate.start);
    const afterGrace = new sfn.Choice(this, 'OldHasInstance')
      .when(sfn.Condition.isString('$.next.instanceId'), terminateOld.next(turn))
      .otherwise(turn);
    migrate.end.next(finish).next(grace).next(afterGrace);
    next.next(
      new sfn.Choice(this, 'AllReplaced')
        .when(sfn.Condition.booleanEquals('$.next.done', true), done.next(new sfn.Succeed(this, 'Upgraded')))
        .otherwise(launch),
    );
    turn.next(next);
    this.definition = begin.next(turn);
  }
}

import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { stepTask, type StepContext } from './step-task.js';
import type { FleetLaunch } from './fleet-launch.js';
import { terminateNodeTask } from './fleet-launch.js';
import { launchAndCheck } from './launch-and-check.js';

/**
 * ReplaceNode: a cache node marked DOWN (by the failure detector or by hand) gets a successor that takes over its
 * ranges. Begin (validates the request, of a DOWN node; the options, the subnet to launch into and the launch's
 * ClientToken) → launch an instance from the fleet's launch template into it (EC2 SDK integration, exactly as
 * ScaleOut launches) → wait until the daemon answers (ScaleOut's check-node step, recording the allocation time) →
 * take over: the new node replaces the dead one in the ring and serves its ranges from then on, empty, filling by
 * read-through → terminate the dead node's instance when it has one and the request allows it (`terminate`, the
 * default) → fill the new node from the cold tier in bounded steps resumable from a cursor (the request's
 * `fillNamespaces`, bandwidth capped) → finish (outcome and progress).
 * After the take-over nothing fails the replacement: a dead instance that cannot be terminated and a fill that
 * fails are recorded (`$.terminateError`, `$.fillError`) and the execution goes on to finish. A failure of the
 * launch, the health check or the take-over rolls back, and a new instance that ended up owning nothing is
 * terminated.
 */
export class ReplaceNodeDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn']; fleet: FleetLaunch }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'replace-node' };
    const begin = stepTask(c, 'Begin', 'replace-node.begin', { 'request.$': '$' }, { resultPath: '$.begin' });
    const takeOver = stepTask(
      c,
      'TakeOver',
      'replace-node.take-over',
      {
        'nodeId.$': '$.begin.nodeId',
        'newNodeId.$': '$.instance.instanceId',
        'instanceId.$': '$.instance.instanceId',
        'url.$': '$.health.url',
        'az.$': '$.begin.launch.availabilityZone',
      },
      { resultPath: '$.takeOver' },
    );
    const { launch, check } = launchAndCheck(c, props.fleet, '$.begin', takeOver);
    const terminateDead = terminateNodeTask(this, 'TerminateDeadNode', props.fleet, '$.begin.deadInstanceId');
    const fillStart = new sfn.Pass(this, 'FillStart', {
      result: sfn.Result.fromObject({ done: false, cursor: null }),
      resultPath: '$.fill',
    });
    const fill = stepTask(
      c,
      'Fill',
      'replace-node.fill',
      { 'nodeId.$': '$.instance.instanceId', 'cursor.$': '$.fill.cursor', 'options.$': '$.begin.options' },
      { resultPath: '$.fill' },
    );
    const finish = stepTask(c, 'Finish', 'replace-node.finish', { 'state.$': '$' }, { resultPath: '$.finish' });

    const rollback = stepTask(c, 'RollBack', 'replace-node.rollback', { 'state.$': '$' }, { resultPath: '$.rollback' });
    const failed = new sfn.Fail(this, 'ReplaceNodeFailed', { errorPath: '$.error.Error', causePath: '$.error.Cause' });
    const terminate = terminateNodeTask(this, 'TerminateNode', props.fleet, '$.rollback.instanceId');
    terminate.addCatch(failed, { resultPath: '$.terminateError' });
    rollback.next(
      new sfn.Choice(this, 'NewNodeOwnsNothing')
        .when(sfn.Condition.booleanEquals('$.rollback.terminate', true), terminate.next(failed))
        .otherwise(failed),
    );
    for (const t of [launch, check, takeOver]) t.addCatch(rollback, { resultPath: '$.error' });

    // After the take-over the node serves its ranges: what fails from here on is caught and the execution goes on.
    terminateDead.addCatch(fillStart, { resultPath: '$.terminateError' });
    fill.addCatch(finish, { resultPath: '$.fillError' });

    takeOver.next(
      new sfn.Choice(this, 'TerminateDead')
        .when(
          sfn.Condition.and(
            sfn.Condition.isString('$.begin.deadInstanceId'),
            sfn.Condition.booleanEquals('$.begin.options.terminate', true),
          ),
          terminateDead.next(fillStart),
        )
        .otherwise(fillStart),
    );
    fillStart.next(fill);
    fill.next(new sfn.Choice(this, 'FillDone').when(sfn.Condition.booleanEquals('$.fill.done', true), finish).otherwise(fill));
    finish.next(new sfn.Succeed(this, 'Replaced'));
    this.definition = begin.next(launch);
  }
}

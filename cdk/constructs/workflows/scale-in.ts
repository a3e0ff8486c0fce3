import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { terminateNodeTask, type FleetLaunch } from './fleet-launch.js';
import { migrationChain } from './migration-map.js';
import { stepTask, type StepContext } from './step-task.js';

/**
 * ScaleIn: pick the node (the named one, or the least loaded of the AZ with the most nodes), mark it LEAVING and
 * plan draining each of its ranges to its successor → migrate the sessions the same way as ScaleOut → remove the
 * node from the ring → after the grace period (routers refresh) terminate its instance, whose data volume goes
 * with it. A failure before the end rolls back: unpublished sessions are released and the node is NORMAL again.
 */
export class ScaleInDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn']; fleet: FleetLaunch }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'scale-in' };
    const begin = stepTask(c, 'Begin', 'scale-in.begin', { 'request.$': '$' }, { resultPath: '$.begin' });
    const migrate = migrationChain(c, { plan: '$.begin', options: '$.begin.options' });
    const finish = stepTask(
      c,
      'RemoveFromRing',
      'migrate.finish',
      { 'planId.$': '$.begin.planId', 'graceSeconds.$': '$.begin.options.graceSeconds' },
      { resultPath: '$.finish' },
    );
    const grace = new sfn.Wait(this, 'GracePeriod', { time: sfn.WaitTime.secondsPath('$.begin.options.graceSeconds') });
    const terminate = terminateNodeTask(this, 'TerminateNode', props.fleet, '$.begin.instanceId');
    const done = new sfn.Succeed(this, 'ScaledIn');

    const rollback = stepTask(c, 'RollBack', 'migrate.rollback', { 'state.$': '$' }, { resultPath: '$.rollback' });
    rollback.next(new sfn.Fail(this, 'ScaleInFailed', { errorPath: '$.error.Error', causePath: '$.error.Cause' }));
    for (const t of [...migrate.catchables, finish]) t.addCatch(rollback, { resultPath: '$.error' });

    migrate.end
      .next(finish)
      .next(grace)
      .next(
        new sfn.Choice(this, 'HasInstance')
          .when(sfn.Condition.isString('$.begin.instanceId'), terminate.next(done))
          .otherwise(done),
      );
    this.definition = begin.next(migrate.start);
  }
}

import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { migrationChain } from './migration-map.js';
import { stepTask, type StepContext } from './step-task.js';
import type { FleetLaunch } from './fleet-launch.js';
import { terminateNodeTask } from './fleet-launch.js';
import { launchAndCheck } from './launch-and-check.js';

/**
 * ScaleOut (papers 000 and 004): begin (options, the per-node lock, the subnet of the AZ with the fewest nodes) →
 * launch an instance from the fleet's launch template into it (EC2 SDK integration) → wait until the daemon
 * answers (recording the allocation time) → plan one session per source node (its fullest range cut at the
 * median), recording the node's AZ in the ring → migrate the sessions (incremental or parallel) → the node is
 * NORMAL → after the grace period the sources drop what they handed over.
 * Any failure after the launch rolls back: sessions not yet published are released, and an instance that ended
 * up owning nothing leaves the ring and is terminated.
 */
export class ScaleOutDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn']; fleet: FleetLaunch }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'scale-out' };
    const begin = stepTask(c, 'Begin', 'scale-out.begin', { 'request.$': '$' }, { resultPath: '$.begin' });
    const plan = stepTask(
      c,
      'PlanSessions',
      'scale-out.plan',
      {
        'nodeId.$': '$.instance.instanceId',
        'instanceId.$': '$.instance.instanceId',
        'url.$': '$.health.url',
        'az.$': '$.begin.launch.availabilityZone',
        'mode.$': '$.begin.options.mode',
        'sources.$': '$.begin.sources',
      },
      { resultPath: '$.plan' },
    );
    const { launch, check } = launchAndCheck(c, props.fleet, '$.begin', plan);
    const migrate = migrationChain(c, { plan: '$.plan', options: '$.begin.options' });
    const finish = stepTask(
      c,
      'NodeNormal',
      'migrate.finish',
      {
        'planId.$': '$.plan.planId',
        'forNode.$': '$.begin.forNode',
        'graceSeconds.$': '$.begin.options.graceSeconds',
      },
      { resultPath: '$.finish' },
    );
    const grace = new sfn.Wait(this, 'GracePeriod', { time: sfn.WaitTime.secondsPath('$.begin.options.graceSeconds') });
    const cleanup = stepTask(
      c,
      'CleanUpSources',
      'migrate.cleanup',
      { 'planId.$': '$.plan.planId' },
      { resultPath: '$.cleanup' },
    );

    const rollback = stepTask(c, 'RollBack', 'migrate.rollback', { 'state.$': '$' }, { resultPath: '$.rollback' });
    const failed = new sfn.Fail(this, 'ScaleOutFailed', { errorPath: '$.error.Error', causePath: '$.error.Cause' });
    const terminate = terminateNodeTask(this, 'TerminateNode', props.fleet, '$.rollback.instanceId');
    terminate.addCatch(failed, { resultPath: '$.terminateError' });
    rollback.next(
      new sfn.Choice(this, 'NodeOwnsNothing')
        .when(sfn.Condition.booleanEquals('$.rollback.terminate', true), terminate.next(failed))
        .otherwise(failed),
    );
    for (const t of [launch, check, plan, ...migrate.catchables, finish]) t.addCatch(rollback, { resultPath: '$.error' });

    plan.next(migrate.start);
    migrate.end.next(finish).next(grace).next(cleanup).next(new sfn.Succeed(this, 'ScaledOut'));
    this.definition = begin.next(launch);
  }
}

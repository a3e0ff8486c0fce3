import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { launchNodeTask, type FleetLaunch } from './fleet-launch.js';
import { stepTask, type StepContext } from './step-task.js';

/**
 * A node's launch and health check, as every workflow that launches one runs them (ScaleOut, ReplaceNode,
 * RollingUpgrade): LaunchNode (the launch request at `<from>.launch`, the result at `$.instance`) → CheckNode
 * (ScaleOut's step, which records the allocation time from `<from>.launchedAt` and gives up after
 * `<from>.launchTimeoutMs`; the result at `$.health`) → NodeHealthy: on to `then` once the daemon answers, else
 * WaitForNode (5 s) and check again. The caller chains into `launch` and adds its catches to `launch` and `check`.
 */
export function launchAndCheck(
  c: StepContext,
  fleet: FleetLaunch,
  from: string,
  then: sfn.IChainable,
): { launch: sfn.TaskStateBase | sfn.Parallel; check: sfn.TaskStateBase } {
  const launch = launchNodeTask(c.scope, 'LaunchNode', fleet, `${from}.launch`, '$.instance');
  const check = stepTask(
    c,
    'CheckNode',
    'scale-out.check-node',
    {
      'nodeId.$': '$.instance.instanceId',
      'instanceId.$': '$.instance.instanceId',
      'privateIp.$': '$.instance.privateIp',
      'launchedAt.$': `${from}.launchedAt`,
      'launchTimeoutMs.$': `${from}.launchTimeoutMs`,
    },
    { resultPath: '$.health' },
  );
  const wait = new sfn.Wait(c.scope, 'WaitForNode', { time: sfn.WaitTime.duration(Duration.seconds(5)) });
  const healthy = new sfn.Choice(c.scope, 'NodeHealthy')
    .when(sfn.Condition.booleanEquals('$.health.healthy', true), then)
    .otherwise(wait.next(check));
  launch.next(check).next(healthy);
  return { launch, check };
}

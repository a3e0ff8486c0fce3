import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { stepTask, type StepContext } from './step-task.js';

/**
 * The migration part shared by ScaleOut and ScaleIn: a Map over the plan's sessions, each {prepare pending →
 * stream (a loop of bounded step calls, resumable from the persisted cursor) → publish ownership}.
 *
 * - incremental (paper 004, the default): one session at a time (MaxConcurrency 1), each published as soon as
 *   it is streamed, so the new owner serves range by range;
 * - parallel (the Cassandra baseline): every session at once (MaxConcurrency 0), published together after the
 *   Map, so nothing moves until everything is copied.
 *
 * Input paths: `<planPath>.sessions` (session ids) and `<optionsPath>` ({ maxConcurrency, streamMaxMs,
 * rateBytesPerSec, graceMs, publishEach }, as the begin step normalised them). Failures of the returned
 * `catchables` are for the caller to catch (and roll back).
 */
export function migrationChain(
  c: StepContext,
  paths: { plan: string; options: string },
): { start: sfn.IChainable; end: sfn.INextable & sfn.IChainable; catchables: (sfn.Map | sfn.TaskStateBase)[] } {
  const session = { 'sessionId.$': '$.sessionId' };
  const prepare = stepTask(c, 'PrepareSession', 'migrate.prepare', session);
  const stream = stepTask(
    c,
    'StreamSession',
    'migrate.stream',
    { ...session, 'maxMs.$': '$.options.streamMaxMs', 'rateBytesPerSec.$': '$.options.rateBytesPerSec' },
    { resultPath: '$.stream' },
  );
  const publishOne = stepTask(c, 'PublishSession', 'migrate.publish', {
    'sessionIds.$': 'States.Array($.sessionId)',
    'graceMs.$': '$.options.graceMs',
  });
  const streamed = new sfn.Choice(c.scope, 'SessionStreamed')
    .when(sfn.Condition.booleanEquals('$.stream.done', false), stream)
    .when(sfn.Condition.booleanEquals('$.options.publishEach', true), publishOne)
    .otherwise(new sfn.Pass(c.scope, 'LeaveForPublishAll'));
  const iteration = prepare.next(stream).next(streamed);

  const map = new sfn.Map(c.scope, 'MigrateSessions', {
    itemsPath: `${paths.plan}.sessions`,
    maxConcurrencyPath: `${paths.options}.maxConcurrency`,
    itemSelector: { 'sessionId.$': '$$.Map.Item.Value', 'options.$': paths.options },
    resultPath: sfn.JsonPath.DISCARD,
  });
  map.itemProcessor(iteration);

  const publishAll = stepTask(c, 'PublishAllSessions', 'migrate.publish', {
    'sessionIds.$': `${paths.plan}.sessions`,
    'graceMs.$': `${paths.options}.graceMs`,
  });
  const migrated = new sfn.Pass(c.scope, 'SessionsMigrated');
  const afterMap = new sfn.Choice(c.scope, 'PublishTogether')
    .when(
      sfn.Condition.and(
        sfn.Condition.booleanEquals(`${paths.options}.publishEach`, false),
        sfn.Condition.isPresent(`${paths.plan}.sessions[0]`),
      ),
      publishAll.next(migrated),
    )
    .otherwise(migrated);
  map.next(afterMap);
  return { start: map, end: migrated, catchables: [map, publishAll] };
}

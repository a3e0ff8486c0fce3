import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { stepTask, type StepContext } from './step-task.js';

/**
 * TierMigrate: move a namespace, a key prefix or a tag between tiers (promote, demote, pin, unpin) in bounded
 * batches, resumable from a cursor, with the tiers' version rules (a move never replaces a newer write, and a
 * demoted entry leaves the upper tier only if it is unchanged).
 */
export class TierMigrateDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn'] }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'tier-migrate' };
    const begin = stepTask(c, 'Begin', 'tier-migrate.begin', { 'request.$': '$' }, { resultPath: '$.batch' });
    const batch = stepTask(c, 'MoveBatch', 'tier-migrate.batch', { 'batch.$': '$.batch' }, { resultPath: '$.batch' });
    const more = new sfn.Choice(this, 'AllMoved')
      .when(sfn.Condition.booleanEquals('$.batch.done', false), batch)
      .otherwise(new sfn.Succeed(this, 'Migrated', { outputPath: '$.batch.totals' }));
    this.definition = begin.next(
      new sfn.Choice(this, 'AnythingToMove')
        .when(sfn.Condition.booleanEquals('$.batch.done', false), batch.next(more))
        .otherwise(new sfn.Succeed(this, 'NothingToMove', { outputPath: '$.batch.totals' })),
    );
  }
}

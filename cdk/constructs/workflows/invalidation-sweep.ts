import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { stepTask, type StepContext } from './step-task.js';

/**
 * InvalidationSweep: remove from every tier the entries a flush or a prefix invalidation covers (reads already treat
 * them as missing), one page of one tier per batch, resumable from its cursor, each entry removed only at the
 * version the scan found (core/workflows/steps/sweep-steps.ts).
 */
export class InvalidationSweepDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn'] }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'invalidation-sweep' };
    const begin = stepTask(c, 'Begin', 'invalidation-sweep.begin', { 'request.$': '$' }, { resultPath: '$.batch' });
    const batch = stepTask(c, 'SweepBatch', 'invalidation-sweep.batch', { 'batch.$': '$.batch' }, { resultPath: '$.batch' });
    const more = new sfn.Choice(this, 'AllSwept')
      .when(sfn.Condition.booleanEquals('$.batch.done', false), batch)
      .otherwise(new sfn.Succeed(this, 'Swept', { outputPath: '$.batch.totals' }));
    this.definition = begin.next(
      new sfn.Choice(this, 'AnythingToSweep')
        .when(sfn.Condition.booleanEquals('$.batch.done', false), batch.next(more))
        .otherwise(new sfn.Succeed(this, 'NothingToSweep', { outputPath: '$.batch.totals' })),
    );
  }
}

import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { stepTask, type StepContext } from './step-task.js';

/**
 * InvalidationSweep: remove from every tier the entries a flush or a prefix invalidation covers (reads already treat
 * them as missing), one page of one tier per batch, resumable from its cursor, each entry removed only at the
 * version the scan found (core/workflows/steps/sweep-steps.ts); with `notBefore` in its input, not before that time;
 * with `object`, the sweep request at that key of the cold tier's bucket (its S3 event started the execution).
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
    begin.next(
      new sfn.Choice(this, 'AnythingToSweep')
        .when(sfn.Condition.booleanEquals('$.batch.done', false), batch.next(more))
        .otherwise(new sfn.Succeed(this, 'NothingToSweep', { outputPath: '$.batch.totals' })),
    );
    // A tag invalidations' sweep starts once their window is over (`notBefore`): a Wait on an absolute time costs
    // nothing while it waits, and a Standard execution may wait up to a year
    // (https://docs.aws.amazon.com/step-functions/latest/dg/state-wait.html).
    const waitForWindow = new sfn.Wait(this, 'WaitForWindow', { time: sfn.WaitTime.timestampPath('$.notBefore') });
    const scheduled = new sfn.Choice(this, 'Scheduled')
      .when(sfn.Condition.isPresent('$.notBefore'), waitForWindow.next(begin))
      .otherwise(begin);
    // Started by a sweep request's S3 event (cdk/stacks/workflows-stack.ts), the input is the request's key: the
    // request it holds replaces it (ResultPath $), and a request already gone (a repeated event) ends the execution.
    const load = stepTask(c, 'LoadRequest', 'invalidation-sweep.load', { 'object.$': '$.object' }, { resultPath: '$' });
    this.definition = new sfn.Choice(this, 'FromRequest')
      .when(
        sfn.Condition.isPresent('$.object'),
        load.next(
          new sfn.Choice(this, 'RequestFound')
            .when(sfn.Condition.isPresent('$.ns'), scheduled)
            .otherwise(new sfn.Succeed(this, 'RequestGone')),
        ),
      )
      .otherwise(scheduled);
  }
}

import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { stepTask, type StepContext } from './step-task.js';

/**
 * OrderMarkers: upkeep of the S3 tier's key-order markers, one page of one namespace per batch, resumable from its
 * cursor: `prune` deletes the markers of objects gone for good (scheduled), `backfill` writes the missing ones of
 * objects older than markers (by hand) (core/workflows/steps/order-marker-steps.ts).
 */
export class OrderMarkersDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn'] }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'order-markers' };
    const begin = stepTask(c, 'Begin', 'order-markers.begin', { 'request.$': '$' }, { resultPath: '$.batch' });
    const batch = stepTask(c, 'MarkerBatch', 'order-markers.batch', { 'batch.$': '$.batch' }, { resultPath: '$.batch' });
    const more = new sfn.Choice(this, 'AllMarkersDone')
      .when(sfn.Condition.booleanEquals('$.batch.done', false), batch)
      .otherwise(new sfn.Succeed(this, 'MarkersDone', { outputPath: '$.batch.totals' }));
    this.definition = begin.next(
      new sfn.Choice(this, 'AnyTierWithMarkers')
        .when(sfn.Condition.booleanEquals('$.batch.done', false), batch.next(more))
        .otherwise(new sfn.Succeed(this, 'NoTierWithMarkers', { outputPath: '$.batch.totals' })),
    );
  }
}

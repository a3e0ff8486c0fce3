import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { stepTask, type StepContext } from './step-task.js';

/**
 * EvictToS3 (on a schedule or the node-fill alarm): plan which nodes to relieve and by how much → for each node
 * (two at a time), loop bounded batches: the node's victims in its eviction order (and expired entries) are
 * copied to S3, verified by size and checksum, then deleted from the node only if their version is unchanged,
 * within a bandwidth cap → a report of keys and bytes moved.
 */
export class EvictToS3Definition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn'] }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'evict-to-s3' };
    const plan = stepTask(c, 'PlanEviction', 'evict.plan', { 'request.$': '$' }, { resultPath: '$.plan' });
    const start = new sfn.Pass(this, 'StartNode', {
      parameters: { 'node.$': '$.node', 'options.$': '$.options', batch: { done: false } },
    });
    const batch = stepTask(
      c,
      'EvictBatch',
      'evict.batch',
      { 'node.$': '$.node', 'options.$': '$.options', 'batch.$': '$.batch' },
      { resultPath: '$.batch' },
    );
    const more = new sfn.Choice(this, 'NodeDone')
      .when(sfn.Condition.booleanEquals('$.batch.done', false), batch)
      .otherwise(new sfn.Pass(this, 'NodeEvicted', { outputPath: '$.batch.totals' }));
    const perNode = new sfn.Map(this, 'EvictNodes', {
      itemsPath: '$.plan.nodes',
      maxConcurrency: 2,
      itemSelector: { 'node.$': '$$.Map.Item.Value', 'options.$': '$.plan.options' },
      resultPath: '$.results',
    });
    perNode.itemProcessor(start.next(batch).next(more));
    const report = stepTask(
      c,
      'Report',
      'evict.report',
      { 'results.$': '$.results', 'plan.$': '$.plan' },
      { resultPath: '$.report' },
    );
    this.definition = plan
      .next(perNode)
      .next(report)
      .next(new sfn.Succeed(this, 'Evicted', { outputPath: '$.report' }));
  }
}

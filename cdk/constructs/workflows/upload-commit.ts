import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { stepTask, type StepContext } from './step-task.js';

/**
 * UploadCommit: the asynchronous half of an upload's completion (core/api/async-complete.ts). One step commits the
 * staged upload as the synchronous completion does (core/workflows/steps/upload-commit-steps.ts) and stores the answer
 * in the upload's record for the owner's poll. The commit is not retried here: a long copy cut off at the step's
 * timeout would only start over; the catch gives the upload back with the failure (the owner's next poll answers
 * it, and a completion after that starts over).
 */
export class UploadCommitDefinition extends Construct {
  readonly definition: sfn.IChainable;

  constructor(scope: Construct, id: string, props: { fn: StepContext['fn'] }) {
    super(scope, id);
    const c: StepContext = { scope: this, fn: props.fn, workflow: 'upload-commit' };
    const commit = stepTask(c, 'Commit', 'upload-commit.commit', { 'request.$': '$' }, { resultPath: '$.commit', retries: 0 });
    const giveBack = stepTask(c, 'GiveBack', 'upload-commit.failed', { 'request.$': '$' });
    commit.addCatch(giveBack.next(new sfn.Fail(this, 'NotCommitted', { error: 'UploadNotCommitted' })), {
      errors: ['States.ALL'],
      resultPath: '$.error',
    });
    this.definition = commit.next(new sfn.Succeed(this, 'Committed', { outputPath: '$.commit' }));
  }
}

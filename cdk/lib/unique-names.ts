import { Fn, Stack } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * The UUID CloudFormation gives the stack of `scope` when it creates it (the last part of AWS::StackId,
 * `arn:aws:cloudformation:<region>:<account>:stack/<name>/<uuid>`): lower-case hex and dashes, unique per stack, and
 * new when a deleted stack is created again. Physical names built on it never collide with what an earlier copy of
 * the stack left behind (retained log groups, final snapshots), so the stack can be deleted and deployed again.
 */
export function stackUuid(scope: IConstruct): string {
  return Fn.select(2, Fn.split('/', Stack.of(scope).stackId));
}

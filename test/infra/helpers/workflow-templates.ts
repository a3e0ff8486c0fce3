/**
 * The Workflows template's state machines, and the EventBridge rules that start a workflow from an S3 object's
 * creation (cdk/stacks/workflows-stack.ts, requestRule): upload commit requests and sweep requests. S3's Object Created event carries detail.bucket.name and
 * detail.object.key (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html); `wildcard` matching:
 * https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html; states:StartExecution
 * acts on the `stateMachine` resource type:
 * https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html.
 */
type Json = Record<string, unknown>;
type Resource = { Type: string; Properties: Json };

/** The Workflows template's rules on S3 events whose key pattern contains `fragment`. */
export function s3RequestRules(wf: Record<string, Resource>, fragment: string): Resource[] {
  return Object.values(wf).filter(
    (r) => r.Type === 'AWS::Events::Rule' && JSON.stringify(r.Properties.EventPattern ?? {}).includes(fragment),
  );
}

/**
 * Checks the one rule whose pattern contains `fragment`: Object Created in the cold bucket of keys matching
 * `wildcard`, starting the state machine `machineId` with `{ object: <key> }`, through a role that may start that
 * state machine and nothing else.
 */
export function expectS3RequestRule(wf: Record<string, Resource>, fragment: string, wildcard: string, machineId: string): void {
  const rules = s3RequestRules(wf, fragment);
  expect(rules).toHaveLength(1);
  const rule = rules[0]!.Properties;
  const pattern = rule.EventPattern as { source: string[]; 'detail-type': string[]; detail: Json };
  expect([pattern.source, pattern['detail-type']]).toEqual([['aws.s3'], ['Object Created']]);
  expect((pattern.detail as { object: Json }).object).toEqual({ key: [{ wildcard }] });
  expect(JSON.stringify((pattern.detail as { bucket: Json }).bucket)).toContain('Fn::GetStackOutput');
  const [target] = rule.Targets as { Arn: Json; InputTransformer: Json; RoleArn: Json }[];
  expect(target!.Arn).toEqual({ Ref: machineId });
  expect(target!.InputTransformer).toEqual({
    InputPathsMap: { 'detail-object-key': '$.detail.object.key' },
    InputTemplate: '{"object":<detail-object-key>}',
  });
  const roleId = (target!.RoleArn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  const statements = Object.values(wf)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(roleId))
    .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Json[] }).Statement);
  expect(statements).toEqual([{ Action: 'states:StartExecution', Effect: 'Allow', Resource: { Ref: machineId } }]);
}

/** The Workflows template's state machine that calls the step `step` (e.g. `invalidation-sweep.batch`): its id and resource. */
export function stateMachineCalling(wf: Record<string, Resource>, step: string): [string, Resource] {
  return Object.entries(wf).find(
    ([, r]) => r.Type === 'AWS::StepFunctions::StateMachine' && JSON.stringify(r.Properties).includes(step),
  )!;
}

/** A state machine's definition as JSON: its DefinitionString is an Fn::Join of literal text and the step Lambda's ARN. */
export function definitionOf(machine: Resource): { StartAt: string; States: Record<string, Json> } {
  const parts = (machine.Properties.DefinitionString as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
  return JSON.parse(parts.map((p) => (typeof p === 'string' ? p : 'ARN')).join('')) as {
    StartAt: string;
    States: Record<string, Json>;
  };
}

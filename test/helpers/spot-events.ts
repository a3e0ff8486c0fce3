/**
 * AWS's documented sample events of a Spot Instance's end, with their placeholders filled in, shared by the tests of
 * the rule that matches them (test/infra/spot-fleet.test.ts), the parser (test/unit/spot-interruption.test.ts) and
 * the function (test/unit/spot-interruption-lambda.test.ts).
 */

/** The instance of the samples. */
export const SAMPLE_INSTANCE = 'i-1234567890abcdef0';

/**
 * https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html ("EC2 Spot Instance
 * Interruption Warning event"): `instance-action` is one of hibernate, stop or terminate, `time` an ISO-8601 instant.
 */
export const DOCUMENTED_WARNING = {
  version: '0',
  id: '12345678-1234-1234-1234-123456789012',
  'detail-type': 'EC2 Spot Instance Interruption Warning',
  source: 'aws.ec2',
  account: '123456789012',
  time: '2026-11-26T12:00:00Z',
  region: 'us-east-2',
  resources: [`arn:aws:ec2:us-east-2:123456789012:instance/${SAMPLE_INSTANCE}`],
  detail: { 'instance-id': SAMPLE_INSTANCE, 'instance-action': 'terminate' },
};

/**
 * https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html ("Monitor rebalance
 * recommendation signals", Amazon EventBridge): no instance-action.
 */
export const DOCUMENTED_REBALANCE = {
  ...DOCUMENTED_WARNING,
  'detail-type': 'EC2 Instance Rebalance Recommendation',
  detail: { 'instance-id': SAMPLE_INSTANCE },
};

import { App, Stack, Validations } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { ENVIRONMENT_NAMES } from '../../cdk/config/schema.js';
import { STACK_KEYS, synthesized } from './helpers/synth.js';

interface Acknowledgment {
  path: string;
  id: string;
  reason: string;
}

/** Every `Validations.of(x).acknowledge()` under `scope`. */
function acknowledgments(scope: IConstruct): Acknowledgment[] {
  return scope.node.findAll().flatMap((c) =>
    c.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY && m.data)
      .flatMap((m) =>
        Object.entries(m.data as Record<string, string>).map(([id, reason]) => ({
          path: c.node.path,
          id: id.replace(/^annotation::/i, ''),
          reason,
        })),
      ),
  );
}

/** Runs AwsSolutions on `scope`, recording which acknowledgments silenced a finding (path of the finding, rule id). */
function check(scope: IConstruct) {
  const pack = new AwsSolutionsChecks();
  const used: { path: string; id: string }[] = [];
  const internals = pack as unknown as { isAcknowledged(node: IConstruct, id: string): boolean };
  const original = internals.isAcknowledged.bind(pack);
  internals.isAcknowledged = (node, id) => {
    const acknowledged = original(node, id);
    if (acknowledged) used.push({ path: node.node.path, id });
    return acknowledged;
  };
  const report = pack.validateScope(scope);
  return { report, used };
}

describe('cdk-nag AwsSolutions', () => {
  it('reports an unencrypted, unlogged bucket (the check is live)', () => {
    const stack = new Stack(new App(), 'Probe');
    new s3.Bucket(stack, 'Bucket', { enforceSSL: false });
    const { report } = check(stack);
    expect(report.violations.map((v) => v.ruleName)).toEqual(expect.arrayContaining(['AwsSolutions-S1', 'AwsSolutions-S10']));
  });

  describe.each(ENVIRONMENT_NAMES)('%s', (env) => {
    const s = synthesized(env);

    it.each(STACK_KEYS)('%s: no unacknowledged findings', (key) => {
      const { report } = check(s.stacks[key]);
      const findings = report.violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`));
      expect(findings).toEqual([]);
      expect(report.success).toBe(true);
    });

    it.each(STACK_KEYS)('%s: every acknowledgment silences a finding and gives a reason', (key) => {
      const { used } = check(s.stacks[key]);
      for (const a of acknowledgments(s.stacks[key]).filter((x) => x.id.startsWith('AwsSolutions-'))) {
        expect(a.reason.length).toBeGreaterThan(60);
        const silenced = used.some((u) => u.id === a.id && (u.path === a.path || u.path.startsWith(`${a.path}/`)));
        if (!silenced)
          throw new Error(`stale acknowledgment ${a.id} at ${a.path}: nothing there triggers it any more; remove it`);
      }
    });
  });
});

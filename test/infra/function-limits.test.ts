import { ENVIRONMENTS, loadEnvironmentConfig } from '../../cdk/config/load.js';
import type { EnvironmentConfigInput } from '../../cdk/config/schema.js';
import { PLACEHOLDER_ALARM_EMAIL, synthesized } from './helpers/synth.js';
import { configErrorOf } from './helpers/config-errors.js';

/** A prod file with one change, for the rule under test. */
function withProd(change: (c: EnvironmentConfigInput) => void): Record<string, EnvironmentConfigInput> {
  const c = structuredClone(ENVIRONMENTS.prod);
  change(c);
  return { prod: c };
}

const errorOf = configErrorOf;

type Resources = Record<string, { Type: string; Properties?: Record<string, unknown> }>;
const functionsOf = (template: { toJSON(): unknown }): { Description?: string; ReservedConcurrentExecutions?: number }[] =>
  Object.values((template.toJSON() as { Resources: Resources }).Resources)
    .filter((r) => r.Type === 'AWS::Lambda::Function')
    .map((r) => r.Properties as { Description?: string; ReservedConcurrentExecutions?: number });

describe('Function limits', () => {
  describe('reserved concurrency', () => {
    const prod = synthesized('prod', { nag: false });
    const dev = synthesized('dev', { nag: false });

    it('caps every prod API function and holds concurrency for the workflow steps, so a flood cannot starve them', () => {
      const api = functionsOf(prod.templates.api);
      expect(api).toHaveLength(5);
      for (const f of api) expect(f.ReservedConcurrentExecutions).toBeGreaterThan(0);
      const step = functionsOf(prod.templates.workflows).find((f) => f.Description?.includes('workflow steps'));
      expect(step?.ReservedConcurrentExecutions).toBe(20);
    });

    it('reserves nothing in dev (the account pool is shared with whatever else runs there)', () => {
      for (const t of Object.values(dev.templates))
        for (const f of functionsOf(t)) expect(f.ReservedConcurrentExecutions).toBeUndefined();
    });

    it('refuses reservations that leave less than 100 of the account quota unreserved, as Lambda would at deploy', () => {
      // https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html: "You can reserve up to the
      // Unreserved account concurrency value that is shown, minus 100 for functions that don't have reserved concurrency."
      const files = withProd((c) => {
        c.api.functions!.keys = { ...c.api.functions!.keys, reservedConcurrency: 800 };
      });
      expect(errorOf(() => loadEnvironmentConfig('prod', {}, files))).toMatch(
        /reserve 1080 concurrent executions.*100 of the account's 1000 unreserved/,
      );
      const raised = withProd((c) => {
        c.api.functions!.keys = { ...c.api.functions!.keys, reservedConcurrency: 800 };
        c.lambdaAccountConcurrency = 2000;
      });
      // Staging and prod need an alarm destination at synth time (helpers/synth.ts's placeholder).
      const sources = { context: { alarmEmails: PLACEHOLDER_ALARM_EMAIL } };
      expect(loadEnvironmentConfig('prod', sources, raised).api.functions.keys.reservedConcurrency).toBe(800);
    });
  });

  it('refuses presigned URL lifetimes past the longest role session (12 h)', () => {
    // "IAM role credentials: the presigned URL expires when the role session expires, even if you specify a longer
    // expiration time" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html).
    const files = withProd((c) => {
      c.api.urlTtlSeconds = 7 * 24 * 3600;
    });
    expect(errorOf(() => loadEnvironmentConfig('prod', {}, files))).toMatch(/urlTtlSeconds is at most 43200/);
  });
});

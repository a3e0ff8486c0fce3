import * as z from 'zod';
import { LAMBDA_FUNCTION_ARN } from '../../core/policy/namespace-settings.js';

/**
 * The environment config's Lambda origins (api.lambdaOrigins): the functions namespace policies may read through
 * (origin.lambda, docs/POLICIES.md). The functions that serve reads are granted lambda:InvokeFunction on exactly these
 * ARNs, and every function that compiles policies gets them as STRATA_LAMBDA_ORIGINS (policies naming others are
 * refused). A qualified ARN (a version or alias) is granted and invoked as written.
 */

/** At most this many: they fill the functions' environment (4 KB in all for a Lambda) and one IAM statement. */
export const MAX_LAMBDA_ORIGINS = 10;

export const lambdaOriginsSchema = z
  .array(
    z
      .string()
      .regex(
        LAMBDA_FUNCTION_ARN,
        'Lambda origins are function ARNs: arn:aws:lambda:<region>:<account>:function:<name>[:<version or alias>]',
      ),
  )
  .max(MAX_LAMBDA_ORIGINS, `at most ${MAX_LAMBDA_ORIGINS} Lambda origins (they go into the functions' environment)`)
  .default([]);

/** What is wrong with the declared origins given the region and the configured namespace policies. */
export function lambdaOriginIssues(c: {
  readonly region: string;
  readonly api: {
    readonly lambdaOrigins: readonly string[];
    readonly namespaces?: { defaults: unknown; namespaces: Record<string, unknown> };
  };
}): { path: (string | number)[]; message: string }[] {
  const issues: { path: (string | number)[]; message: string }[] = [];
  const declared = c.api.lambdaOrigins;
  for (const [i, arn] of declared.entries()) {
    // The functions reach Lambda through the VPC's interface endpoint, which serves its own region only.
    if (arn.split(':')[3] !== c.region)
      issues.push({
        path: ['api', 'lambdaOrigins', i],
        message: `${arn} is not in ${c.region}: the API functions reach Lambda through the VPC's endpoint in their own region`,
      });
    if (declared.indexOf(arn) !== i) issues.push({ path: ['api', 'lambdaOrigins', i], message: `${arn} is listed twice` });
  }
  const ns = c.api.namespaces;
  const named: [string[], unknown][] = [
    [['api', 'namespaces', 'defaults', 'origin', 'lambda'], ns?.defaults],
    ...Object.entries(ns?.namespaces ?? {}).map(([n, s]): [string[], unknown] => [
      ['api', 'namespaces', 'namespaces', n, 'origin', 'lambda'],
      s,
    ]),
  ];
  for (const [path, settings] of named) {
    const fn = (settings as { origin?: { lambda?: unknown } } | undefined)?.origin?.lambda;
    if (typeof fn === 'string' && !declared.includes(fn))
      issues.push({
        path,
        message: `${fn} is not declared in api.lambdaOrigins (declared: ${declared.join(', ') || 'none'}): add it there`,
      });
  }
  return issues;
}

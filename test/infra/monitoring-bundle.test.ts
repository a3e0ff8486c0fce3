import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BUNDLE_BUDGET_BYTES } from '../../cdk/lib/packaging.js';
import { synthesized } from './helpers/synth.js';

// Bundled exactly as `cdk synth` does (NodejsFunction, the chosen packaging), like the API functions' bundles.
const s = synthesized('dev', { bundling: true });

function publisherBundle(): string {
  const resources = s.templates.monitoring.toJSON().Resources as Record<
    string,
    { Type: string; Properties: { Code?: { S3Key?: string }; Environment?: { Variables?: Record<string, unknown> } } }
  >;
  const fns = Object.values(resources).filter(
    (r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Environment?.Variables?.STRATA_COST_SETTINGS,
  );
  expect(fns).toHaveLength(1);
  return join(s.outdir, `asset.${fns[0]!.Properties.Code!.S3Key!.replace(/\.zip$/, '')}`);
}

describe('Cost publisher bundle', () => {
  it('stays within the Lambda bundle budget', () => {
    const bytes = statSync(join(publisherBundle(), 'index.mjs')).size;
    process.stdout.write(
      `cost publisher bundle: ${(bytes / 1024).toFixed(1)} KiB (budget ${(BUNDLE_BUDGET_BYTES / 1e6).toFixed(1)} MB)\n`,
    );
    expect({ bytes, withinBudget: bytes <= BUNDLE_BUDGET_BYTES }).toEqual({ bytes, withinBudget: true });
  });

  it('is an ES module with a source map, taking the AWS SDK (EC2, S3, CloudWatch) from the runtime', () => {
    const dir = publisherBundle();
    const code = readFileSync(join(dir, 'index.mjs'), 'utf8');
    expect(code).toMatch(/\/\/# sourceMappingURL=index\.mjs\.map\s*$/);
    expect(statSync(join(dir, 'index.mjs.map')).size).toBeGreaterThan(0);
    for (const client of ['client-ec2', 'client-s3', 'client-cloudwatch'])
      expect(code).toMatch(new RegExp(`from\\s*"@aws-sdk/${client}"`));
    // The price catalog is compiled in (no file or network access at run time).
    expect(code).toContain('aws-2026-11');
  });
});

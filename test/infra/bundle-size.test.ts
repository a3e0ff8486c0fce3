import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BUNDLE_BUDGET_BYTES, CHOSEN_PACKAGING } from '../../cdk/lib/packaging.js';
import { synthesized } from './helpers/synth.js';

// The bundles are the same in every environment: bundle one (dev) exactly as `cdk synth` does.
const s = synthesized('dev', { bundling: true });

/** Every Strata Lambda of the API, Workflows and Monitoring stacks (not CDK's own helper functions). */
function lambdaBundles(): { fn: string; dir: string }[] {
  return (['api', 'workflows', 'monitoring'] as const).flatMap((stack) => {
    const resources = s.templates[stack].toJSON().Resources as Record<
      string,
      { Type: string; Properties: { Code: { S3Key: string }; Description?: string } }
    >;
    return Object.entries(resources)
      .filter(([, r]) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').startsWith('Strata'))
      .map(([id, r]) => ({
        fn: `${stack}/${id.replace(/Function.*/, '').toLowerCase()}`,
        dir: join(s.outdir, `asset.${r.Properties.Code.S3Key.replace(/\.zip$/, '')}`),
      }));
  });
}

describe('Lambda bundles', () => {
  it('stay within the budget (minified entry file, without the source map)', () => {
    const rows = lambdaBundles().map((b) => ({ ...b, bytes: statSync(join(b.dir, 'index.mjs')).size }));
    // API: keys, batch, transfer, service, admin; workflows: steps, scale trigger; monitoring: the cost publisher.
    expect(rows.map((r) => r.fn.split('/')[0])).toEqual(expect.arrayContaining(['api', 'workflows', 'monitoring']));
    expect(rows.length).toBeGreaterThanOrEqual(7);
    process.stdout.write(
      `Lambda bundles (${CHOSEN_PACKAGING.name}), budget ${(BUNDLE_BUDGET_BYTES / 1e6).toFixed(1)} MB:\n${rows.map((r) => `  ${r.fn.padEnd(24)} ${(r.bytes / 1024).toFixed(1).padStart(7)} KiB`).join('\n')}\n`,
    );
    for (const r of rows)
      expect({ fn: r.fn, bytes: r.bytes, withinBudget: r.bytes <= BUNDLE_BUDGET_BYTES }).toEqual({
        fn: r.fn,
        bytes: r.bytes,
        withinBudget: true,
      });
  });

  it('are ES modules with a source map, loading the AWS SDK from the runtime', () => {
    for (const b of lambdaBundles()) {
      const code = readFileSync(join(b.dir, 'index.mjs'), 'utf8');
      expect(code).toMatch(/\/\/# sourceMappingURL=index\.mjs\.map\s*$/);
      expect(statSync(join(b.dir, 'index.mjs.map')).size).toBeGreaterThan(0);
      expect(code).toMatch(/from\s*"@aws-sdk\/client-s3"/);
      expect(code).toContain('createRequire');
    }
  });

  it('bundles the cache node daemon as main.mjs', () => {
    const fleet = JSON.stringify(s.templates.fleet.toJSON());
    const hash = /([0-9a-f]{64})\.zip/.exec(fleet)![1]!;
    expect(statSync(join(s.outdir, `asset.${hash}`, 'main.mjs')).size).toBeGreaterThan(0);
  });
});

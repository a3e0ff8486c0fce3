/**
 * The layering rule (eslint/layers.js, `strata/layers`): imports point down the layers of core/ and never up, the
 * SDK imports nothing outside itself, and core/ imports no entry point. `npm test` lints the whole repository with
 * it; these cases show what it refuses and allows, and that the repository passes it.
 */
import { ESLint } from 'eslint';
import { layeringViolation } from '../../eslint/layers.js';

describe('layering rule', () => {
  it.each([
    ['core/model/keys.ts', 'core/api/routes.ts', /core\/model is below core\/api/],
    ['core/metrics/sink.ts', 'core/composition/metrics-settings.ts', /core\/metrics is below core\/composition/],
    ['core/cost/model/live-cost.ts', 'core/cost/publisher/usage-reader.ts', /below core\/cost\/publisher/],
    ['core/workflows/admin-service.ts', 'core/workflows/local/asl-runner.ts', /below core\/workflows\/local/],
    ['core/api/openapi.ts', 'core/composition/api-context.ts', /below core\/composition/],
    ['core/tiers/s3-tier.ts', 'lambdas/api/keys.ts', /does not import entry points/],
    ['core/errors.ts', 'sdk/src/errors.ts', /only sdk\/src\/contract\.ts/],
    ['sdk/src/client.ts', 'core/errors.ts', /published package/],
    ['cachenode/src/store.ts', 'core/tiers/tier.ts', /cachenode\/ may import core\/ only up to/],
    ['dashboards/cost.ts', 'core/cost/model/price-catalog.ts', /dashboards\/ may import core\/ only up to/],
    ['core/newfolder/x.ts', 'core/model/keys.ts', /in no layer/],
  ])('refuses %s importing %s', (from, to, why) => {
    expect(layeringViolation(from, to)).toMatch(why);
  });

  it.each([
    ['core/api/routes.ts', 'core/coordinator/coordinator.ts'],
    ['core/composition/api-handler.ts', 'core/api/routes.ts'],
    ['core/cost/publisher/publish-cost.ts', 'core/cost/model/price-catalog.ts'],
    ['core/workflows/local/local-workflows.ts', 'core/workflows/steps/handlers.ts'],
    ['core/errors.ts', 'sdk/src/contract.ts'],
    ['cachenode/src/store.ts', 'core/nodes/wire.ts'],
    ['lambdas/api/keys.ts', 'core/composition/api-handler.ts'],
    ['test/unit/x.test.ts', 'core/composition/api-context.ts'],
    ['scripts/local/server.ts', 'lambdas/api/keys.ts'],
  ])('allows %s importing %s', (from, to) => {
    expect(layeringViolation(from, to)).toBeUndefined();
  });

  it('reports an upward import at its line through ESLint, and the repository has none', async () => {
    // The probe is no file of the TypeScript project: lint it without the type-aware rules, which need one.
    const untyped = new ESLint({
      cwd: process.cwd(),
      overrideConfig: {
        languageOptions: { parserOptions: { projectService: false } },
        rules: { '@typescript-eslint/no-floating-promises': 'off', '@typescript-eslint/no-misused-promises': 'off' },
      },
    });
    const [probe] = await untyped.lintText(
      "import { API_ROUTES } from '../api/routes.js';\nexport const n = API_ROUTES.length;\n",
      {
        filePath: 'core/model/probe.ts',
      },
    );
    expect(probe!.messages.filter((m) => m.ruleId === 'strata/layers')).toEqual([
      expect.objectContaining({ line: 1, message: expect.stringMatching(/core\/model is below core\/api/) }),
    ]);
    // Without type information: this rule needs none, and `npm test`'s lint step already runs the typed rules (a
    // TypeScript program of the whole repository held in a Jest worker slowed every suite after it).
    const results = await untyped.lintFiles(['core', 'sdk/src', 'cachenode/src', 'dashboards', 'lambdas']);
    const up = results.flatMap((r) =>
      r.messages.filter((m) => m.ruleId === 'strata/layers').map((m) => `${r.filePath}:${m.line} ${m.message}`),
    );
    expect(up).toEqual([]);
  }, 120_000);
});

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENVIRONMENT_NAMES } from '../../cdk/config/schema.js';
import { REPO_ROOT } from '../../cdk/lib/packaging.js';
import {
  idleCostOf,
  idleTotal,
  README_MARKERS,
  renderIdleCostTable,
  withTable,
  type IdleCostLine,
} from '../../cdk/lib/idle-cost.js';
import { synthesized } from './helpers/synth.js';

/** Issue 20's budget for an idle environment (USD per month), which later issues must keep. */
const IDLE_BUDGET_USD: Readonly<Record<(typeof ENVIRONMENT_NAMES)[number], number>> = { dev: 15, staging: 30, prod: 30 };

describe('Idle cost', () => {
  const perEnv: Record<string, IdleCostLine[]> = {};
  for (const name of ENVIRONMENT_NAMES) {
    perEnv[name] = idleCostOf(synthesized(name, { nag: false }));
  }

  it.each(ENVIRONMENT_NAMES)('keeps an idle %s environment within its monthly budget', (name) => {
    expect(idleTotal(perEnv[name]!)).toBeLessThanOrEqual(IDLE_BUDGET_USD[name]);
  });

  it('puts nothing in the VPC that bills by the hour while idle (interface endpoints, NAT gateways)', () => {
    for (const name of ENVIRONMENT_NAMES) {
      for (const id of ['endpoints', 'nat'] as const)
        expect([name, id, perEnv[name]!.find((l) => l.id === id)!.usdPerMonth]).toEqual([name, id, 0]);
    }
  });

  it("matches the README's table, recomputed from the synthesized resources", () => {
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme).toContain(README_MARKERS[0]);
    // Fix: bash scripts/run-node.sh scripts/idle-cost.ts --write
    expect(readme).toBe(withTable(readme, renderIdleCostTable(perEnv)));
  });
});

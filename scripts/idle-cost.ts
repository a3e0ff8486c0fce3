/**
 * Prints the idle-cost table of every environment, computed from the synthesized templates (cdk/lib/idle-cost.ts);
 * `--write` puts it into README.md between its idle-cost markers. test/infra/idle-cost.test.ts fails when the
 * README's table and the synthesized stacks disagree.
 *   bash scripts/run-node.sh scripts/idle-cost.ts [--write]
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENVIRONMENT_NAMES } from '../cdk/config/schema.js';
import { idleCost, renderIdleCostTable, type IdleCostLine } from '../cdk/lib/idle-cost.js';
import { REPO_ROOT } from '../cdk/lib/packaging.js';
import { synthEnvironment } from '../test/infra/helpers/synth.js';

export const README_MARKERS = ['<!-- idle-cost:begin (generated: bash scripts/run-node.sh scripts/idle-cost.ts --write) -->', '<!-- idle-cost:end -->'] as const;

/** The table as the synthesized stacks give it. */
export function computedIdleCostTable(): string {
  const perEnv: Record<string, IdleCostLine[]> = {};
  for (const name of ENVIRONMENT_NAMES) {
    const s = synthEnvironment(name, { nag: false });
    try {
      perEnv[name] = idleCost({ templates: Object.values(s.templates).map((t) => t.toJSON() as object), tenants: s.config.tenants.length, region: s.config.region });
    } finally {
      rmSync(s.outdir, { recursive: true, force: true });
    }
  }
  return renderIdleCostTable(perEnv);
}

/** README.md with `table` between the markers. */
export function withTable(readme: string, table: string): string {
  const [begin, end] = README_MARKERS;
  const i = readme.indexOf(begin);
  const j = readme.indexOf(end);
  if (i < 0 || j < i) throw new Error(`README.md lacks the idle-cost markers ${begin} … ${end}`);
  return `${readme.slice(0, i + begin.length)}\n${table}\n${readme.slice(j)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const table = computedIdleCostTable();
  if (process.argv.includes('--write')) {
    const path = join(REPO_ROOT, 'README.md');
    writeFileSync(path, withTable(readFileSync(path, 'utf8'), table));
    console.log('README.md: idle-cost table updated');
  } else {
    console.log(table);
  }
}

/**
 * Prints the idle-cost table of every environment, computed from the synthesized templates (cdk/lib/idle-cost.ts);
 * `--write` puts it into README.md between its idle-cost markers. test/infra/idle-cost.test.ts fails when the
 * README's table and the synthesized stacks disagree.
 *   bash scripts/run-node.sh scripts/idle-cost.ts [--write]
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENVIRONMENT_NAMES } from '../cdk/config/schema.js';
import { idleCostOf, renderIdleCostTable, withTable, type IdleCostLine } from '../cdk/lib/idle-cost.js';
import { REPO_ROOT } from '../cdk/lib/packaging.js';
import { synthEnvironment } from '../test/infra/helpers/synth.js';

/** The table as the synthesized stacks give it. */
function computedIdleCostTable(): string {
  const perEnv: Record<string, IdleCostLine[]> = {};
  for (const name of ENVIRONMENT_NAMES) {
    const s = synthEnvironment(name, { nag: false });
    try {
      perEnv[name] = idleCostOf(s);
    } finally {
      rmSync(s.outdir, { recursive: true, force: true });
    }
  }
  return renderIdleCostTable(perEnv);
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

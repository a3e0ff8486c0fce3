/**
 * `strata cost`: the cost model from the command line (run it with `npm run cost -- <options>`).
 *
 * @example
 *   npm run cost -- --paper-2010 --tables
 *   npm run cost -- --value-size 1MB --keys 500 --requests-per-month 2000 --persistent --region eu-west-1
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { catalogSummaries, DEFAULT_CATALOG_ID, DEFAULT_REGION } from '../cost/model/price-catalog.js';
import { renderCatalogs, renderDiscrepancies, renderPaperTables, renderRecommendations } from '../cost/model/format.js';
import { PAPER_DISCREPANCIES, paperCells } from '../cost/model/paper-2010-tables.js';
import { placementFlag, placementQueryFromFlags, recommendPlacements } from '../cost/model/placement-query.js';

export const COST_USAGE = `usage: strata cost [options]        (in this repository: npm run cost -- [options])

Paper 001 (Chiu & Agrawal, 2010):
  --paper-2010 --tables        recompute Tables III and IV from Table I's prices; the paper's differing cells are marked
  --discrepancies              list the cells of the paper that its own formulas do not give

Rank cache placements for a workload:
  --value-size <size>          value size d: 1KB, 1MB, 50MB (decimal) or 1MiB (binary)
  --keys <n>                   distinct keys held
  --requests-per-month <n>     reads a month R: 2000, 200k, 1.5M
  --writes-per-month <n>       writes a month (default: the expected misses of a cold cache)
  --persistent                 only placements whose data survives a node loss (S3, EBS, S3-backed)
  --latency-target <t>         hit latency target, e.g. 5ms; slower placements rank last
  --service-time <t>           origin time per miss, the speedup baseline (default 1s)
  --in-region                  results stay in the region (no transfer-out charge C_IO)
  --region <region>            default ${DEFAULT_REGION}
  --catalog <id>               price catalog (default ${DEFAULT_CATALOG_ID}); --paper-2010 selects paper-2010
  --rank-by cs|cost            C/S (cost per unit speedup, default) or monthly cost
  --top <n>                    show the best n only
  --json                       machine-readable output

  --catalogs                   list the price catalogs, their regions and dates
  -h, --help`;

export interface CliOutput {
  stdout(text: string): void;
  stderr(text: string): void;
}

const processOutput: CliOutput = {
  stdout: (t) => void process.stdout.write(t),
  stderr: (t) => void process.stderr.write(t),
};

/**
 * Runs the cost command in-process and returns its exit code (0 ok, 2 usage error).
 * @example runCostCli(['--paper-2010', '--tables'], { stdout: console.log, stderr: console.error })
 */
export function runCostCli(argv: readonly string[], out: CliOutput = processOutput): number {
  const args = argv[0] === 'cost' ? argv.slice(1) : [...argv];
  try {
    return run(args, out);
  } catch (e) {
    // Bad flags (TypeError from parseArgs), values (PlacementQueryError) and unknown catalogs or regions (ValidationError).
    out.stderr(`strata cost: ${e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }
}

function run(args: string[], out: CliOutput): number {
  const { values } = parseArgs({
    args,
    allowPositionals: false,
    options: {
      'paper-2010': { type: 'boolean' },
      tables: { type: 'boolean' },
      discrepancies: { type: 'boolean' },
      'value-size': { type: 'string' },
      keys: { type: 'string' },
      'requests-per-month': { type: 'string' },
      'writes-per-month': { type: 'string' },
      persistent: { type: 'boolean' },
      'latency-target': { type: 'string' },
      'service-time': { type: 'string' },
      'in-region': { type: 'boolean' },
      region: { type: 'string' },
      catalog: { type: 'string' },
      'rank-by': { type: 'string' },
      top: { type: 'string' },
      json: { type: 'boolean' },
      catalogs: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    out.stdout(`${COST_USAGE}\n`);
    return 0;
  }
  if (values.catalogs) {
    out.stdout(values.json ? `${JSON.stringify(catalogSummaries(), null, 2)}\n` : `${renderCatalogs()}\n`);
    return 0;
  }
  const workloadGiven =
    values['value-size'] !== undefined || values.keys !== undefined || values['requests-per-month'] !== undefined;
  if (values.tables || values.discrepancies || (values['paper-2010'] && !workloadGiven)) {
    if (values.json) {
      out.stdout(`${JSON.stringify({ cells: paperCells(), discrepancies: PAPER_DISCREPANCIES }, null, 2)}\n`);
      return 0;
    }
    const parts = [...(values.discrepancies && !values.tables ? [] : [renderPaperTables()]), renderDiscrepancies()];
    out.stdout(`${parts.join('\n\n')}\n`);
    return 0;
  }
  if (!workloadGiven) {
    out.stderr(
      `strata cost: give a workload (--value-size, --keys, --requests-per-month) or --paper-2010 --tables\n\n${COST_USAGE}\n`,
    );
    return 2;
  }
  const { report, top, shown } = recommendPlacements(placementQueryFromFlags(values), {
    label: placementFlag,
    defaultCatalog: values['paper-2010'] ? 'paper-2010' : DEFAULT_CATALOG_ID,
  });
  if (values.json) {
    out.stdout(`${JSON.stringify({ ...report, recommendations: shown }, null, 2)}\n`);
  } else {
    out.stdout(`${renderRecommendations(report, top)}\n`);
  }
  return 0;
}

const invokedDirectly = ((): boolean => {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
})();

if (invokedDirectly) process.exitCode = runCostCli(process.argv.slice(2));

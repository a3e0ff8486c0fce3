/**
 * `strata cost`: the cost model of a running Strata (`GET /v1/cost/...`), printed as the server renders it: the
 * same flags and the same text as `npm run cost` prints offline in the Strata repository (core/composition/cost-cli.ts).
 */
import type { StrataClient } from './client.js';
import { UsageError, type CliIo } from './cli-workflow.js';
import type { CostWorkload } from './cost.js';
import { ValidationError } from './errors.js';

/** One flag of `strata cost`: its value placeholder (string flags), the workload field it sets, and its help. */
interface CostFlag {
  readonly flag: string;
  readonly arg?: string;
  readonly param?: keyof CostWorkload;
  readonly help: string;
}

const SECTIONS: readonly { readonly title: string; readonly flags: readonly CostFlag[] }[] = [
  {
    title: 'Chiu & Agrawal, "Evaluating Caching and Storage Options on the Amazon Web Services Cloud" (2010):',
    flags: [
      {
        flag: 'paper-2010',
        help: "with --tables, or alone: the paper's tables; with a workload: price it with the 2010 catalog",
      },
      { flag: 'tables', help: "Tables III and IV recomputed from Table I's prices; the paper's differing cells are marked" },
      { flag: 'discrepancies', help: 'list the cells of the paper that its own formulas do not give' },
    ],
  },
  {
    title: 'Rank cache placements for a workload:',
    flags: [
      { flag: 'value-size', arg: '<size>', param: 'valueSize', help: 'value size d: 1KB, 1MB, 50MB (decimal) or 1MiB (binary)' },
      { flag: 'keys', arg: '<n>', param: 'keys', help: 'distinct keys held' },
      { flag: 'requests-per-month', arg: '<n>', param: 'requestsPerMonth', help: 'reads a month R: 2000, 200k, 1.5M' },
      {
        flag: 'writes-per-month',
        arg: '<n>',
        param: 'writesPerMonth',
        help: 'writes a month (default: the expected misses of a cold cache)',
      },
      { flag: 'persistent', param: 'persistent', help: 'only placements whose data survives a node loss (S3, EBS, S3-backed)' },
      {
        flag: 'latency-target',
        arg: '<t>',
        param: 'latencyTarget',
        help: 'hit latency target, e.g. 5ms; slower placements rank last',
      },
      { flag: 'service-time', arg: '<t>', param: 'serviceTime', help: 'origin time per miss, the speedup baseline (default 1s)' },
      { flag: 'in-region', param: 'inRegion', help: 'results stay in the region (no transfer-out charge C_IO)' },
      { flag: 'region', arg: '<region>', param: 'region', help: "default: the server's (us-east-1)" },
      {
        flag: 'catalog',
        arg: '<id>',
        param: 'catalog',
        help: "price catalog (default: the server's newest); --paper-2010 selects paper-2010",
      },
      { flag: 'rank-by', arg: 'cs|cost', param: 'rankBy', help: 'C/S (cost per unit speedup, default) or monthly cost' },
      { flag: 'top', arg: '<n>', param: 'top', help: 'show the best n only' },
      { flag: 'json', help: "machine-readable output (the server's answer)" },
    ],
  },
  { title: '', flags: [{ flag: 'catalogs', help: 'list the price catalogs, their regions and dates' }] },
];

const FLAGS: readonly CostFlag[] = SECTIONS.flatMap((s) => s.flags);

/** The flags that make a workload; any one of them asks for placements, and then all three are needed. */
const WORKLOAD_FLAGS = ['value-size', 'keys', 'requests-per-month'] as const;

/** `parseArgs` options of the flags only `strata cost` takes (`--json` and `--help` are the CLI's own). */
export const COST_OPTIONS: Readonly<Record<string, { type: 'string' | 'boolean' }>> = Object.fromEntries(
  FLAGS.filter((f) => f.flag !== 'json').map((f) => [f.flag, { type: f.arg === undefined ? 'boolean' : 'string' }]),
);

function usageLine(flag: string, help: string): string {
  return `  ${flag.padEnd(29)}${help}`;
}

/** `strata cost --help`. */
export const COST_USAGE = [
  'usage: strata cost [options]        (offline, in the Strata repository: npm run cost -- [options])',
  '',
  'The cost model of the Strata at --endpoint: what `npm run cost` prints, computed by the server.',
  ...SECTIONS.flatMap((s) => [
    ...(s.title ? ['', s.title] : ['']),
    ...s.flags.map((f) => usageLine(`--${f.flag}${f.arg ? ` ${f.arg}` : ''}`, f.help)),
  ]),
  usageLine('-h, --help', ''),
  '',
  'Connection: --endpoint <url> (default $STRATA_ENDPOINT or http://localhost:8080), --api-key <key> (default',
  '$STRATA_API_KEY), --timeout <ms>. Exit code 2 for a usage error or a value the server rejects.',
]
  .join('\n')
  .replace(/ +$/gm, '');

type Flags = Readonly<Record<string, string | boolean | undefined>>;

/** The server's message with the field it names as a flag: `valueSize: not a size` → `--value-size: not a size`. */
function withFlagNames(err: ValidationError): string {
  const field = err.field;
  const flag = FLAGS.find((f) => f.param !== undefined && f.param === field)?.flag;
  return field && flag && err.message.startsWith(field) ? `--${flag}${err.message.slice(field.length)}` : err.message;
}

/**
 * Runs `strata cost` with the parsed flags and resolves the exit code: 0, or 2 when the server rejects a value
 * (its message is printed with the flag named). Throws {@link UsageError} for a missing workload and the SDK's
 * errors for failed requests (the CLI prints both and exits 2).
 */
export async function costCommand(client: StrataClient, flags: Flags, io: CliIo): Promise<number> {
  const write = (text: string): void => void io.stdout.write(`${text}\n`);
  const print = (v: unknown): void => write(JSON.stringify(v, null, 2));
  try {
    if (flags.catalogs) {
      const r = await client.cost.catalogs();
      if (flags.json) print(r.catalogs);
      else write(r.text);
      return 0;
    }
    const workloadGiven = WORKLOAD_FLAGS.some((f) => flags[f] !== undefined);
    if (flags.tables || flags.discrepancies || (flags['paper-2010'] && !workloadGiven)) {
      const paper = await client.cost.paper2010();
      if (flags.json) print({ cells: paper.cells, discrepancies: paper.discrepancies });
      else write([...(flags.discrepancies && !flags.tables ? [] : [paper.tables]), paper.discrepanciesText].join('\n\n'));
      return 0;
    }
    if (!workloadGiven) {
      // A bare `strata cost` asks what the command does: the usage answers it; other flags alone are a mistake.
      const bare = FLAGS.every((f) => flags[f.flag] === undefined);
      const message = 'cost: give a workload (--value-size, --keys, --requests-per-month) or --paper-2010 --tables';
      throw new UsageError(message, bare ? COST_USAGE : undefined, 'cost');
    }
    const missing = WORKLOAD_FLAGS.find((f) => flags[f] === undefined);
    if (missing) {
      const all = WORKLOAD_FLAGS.map((f) => `--${f}`).join(', ');
      throw new UsageError(`cost: --${missing} is required with a workload (${all})`, undefined, 'cost');
    }
    const workload: Record<string, string | boolean> = {};
    for (const f of FLAGS) {
      const v = flags[f.flag];
      if (f.param && v !== undefined) workload[f.param] = v;
    }
    if (flags['paper-2010'] && workload.catalog === undefined) workload.catalog = 'paper-2010';
    const { text, ...answer } = await client.cost.placements(workload as unknown as CostWorkload);
    if (flags.json) print(answer);
    else write(text);
    return 0;
  } catch (e) {
    if (e instanceof ValidationError && e.status === 400) {
      io.stderr.write(`strata cost: ${withFlagNames(e)}\n`);
      return 2;
    }
    throw e;
  }
}

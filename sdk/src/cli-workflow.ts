/** `strata workflow start|status|list`: the admin API's workflows from the command line. */
import type { StrataClient } from './client.js';
import { ProgressReporter, type ProgressOutput } from './progress.js';
import { WORKFLOW_NAMES, type WorkflowExecution, type WorkflowExecutionDetail, type WorkflowName } from './workflows.js';

export const WORKFLOW_USAGE = `  workflow start <workflow> [--mode incremental|parallel|prune|backfill] [--input JSON] [--name NAME] [--wait]
                       start an execution (${WORKFLOW_NAMES.join(', ')}); prints it as JSON.
                       --mode: incremental|parallel for the scale workflows, prune|backfill for order-markers
  workflow status <execution> [--wait]
                       print an execution with its progress as JSON
  workflow list [--workflow W] [--limit N] [--json]
                       recent executions, newest first

  --wait shows a progress bar (on stderr) until the execution stops, then prints it as JSON; the exit code is 0
  when it SUCCEEDED, 1 when it FAILED, was ABORTED or TIMED_OUT. Ctrl-C stops waiting, not the execution.
  The admin routes need an admin API key in AWS: --api-key or $STRATA_ADMIN_API_KEY (else $STRATA_API_KEY).`;

/** The options `strata workflow` reads. */
export interface WorkflowCliOptions {
  mode?: string | undefined;
  input?: string | undefined;
  name?: string | undefined;
  wait?: boolean | undefined;
  /** Poll interval of --wait, ms. */
  interval?: string | undefined;
  workflow?: string | undefined;
  limit?: string | undefined;
  json?: boolean | undefined;
}

export interface CliIo {
  /** Results: JSON, tables, and the bytes of a value (`strata get`). */
  stdout: { write(chunk: string | Uint8Array): unknown };
  /** Progress and messages; a terminal gets the redrawn progress bar. */
  stderr: ProgressOutput;
}

/**
 * A mistake in the arguments: the CLI prints it as one line ending with `run 'strata help <command>'` and exits 2.
 * With `usage` (a bare `strata workflow` or `strata cost`, which asks what the command does) it prints that usage
 * after the message instead.
 */
export class UsageError extends Error {
  constructor(
    message: string,
    /** The usage text to print after the message; only for a command given without anything to do. */
    readonly usage?: string,
    /** The command at fault, for the `strata help <command>` hint. */
    readonly command?: string,
  ) {
    super(message);
  }
}

/** A usage error of `strata workflow`. */
function usage(message: string): UsageError {
  return new UsageError(message, undefined, 'workflow');
}

function unknownWorkflow(name: string): UsageError {
  return usage(`unknown workflow '${name}'; workflows: ${WORKFLOW_NAMES.join(', ')}`);
}

function print(io: CliIo, v: unknown): void {
  io.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
}

/** `1.2 s`, `4 min 05 s`, `2 h 03 min`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '-';
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** Executions as an aligned table (what `strata workflow list` prints). */
export function formatExecutionTable(rows: readonly WorkflowExecution[], now: Date = new Date()): string {
  if (rows.length === 0) return 'no executions\n';
  const table = [
    ['EXECUTION', 'WORKFLOW', 'STATUS', 'STARTED', 'DURATION'],
    ...rows.map((r) => [
      r.execution,
      r.workflow,
      r.status,
      r.startedAt.toISOString().replace(/\.\d+Z$/, 'Z'),
      formatDuration((r.stoppedAt ?? now).getTime() - r.startedAt.getTime()) + (r.stoppedAt ? '' : ' (running)'),
    ]),
  ];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  return table.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}

function parseInput(raw: string | undefined): Record<string, unknown> {
  if (raw === undefined) return {};
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw usage(`--input is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw usage('--input must be a JSON object, e.g. --input \'{"nodeId":"n3"}\'');
  }
  return v as Record<string, unknown>;
}

function positiveInt(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw usage(`${name} must be a whole number of at least 1`);
  return Number(raw);
}

/**
 * Waits with a progress bar; prints the final detail; 0 when it succeeded, else 1 (after printing its error). Also
 * what `strata node replace --wait` does.
 */
export async function follow(
  client: StrataClient,
  execution: string,
  o: Pick<WorkflowCliOptions, 'interval'>,
  io: CliIo,
): Promise<number> {
  const reporter = new ProgressReporter(io.stderr);
  let final: WorkflowExecutionDetail;
  try {
    final = await client.workflows.wait(execution, {
      intervalMs: positiveInt('--interval', o.interval) ?? 1000,
      onProgress: (d) => reporter.update(d),
    });
  } finally {
    reporter.finish();
  }
  print(io, final);
  const took = formatDuration((final.stoppedAt ?? new Date()).getTime() - final.startedAt.getTime());
  if (final.status === 'SUCCEEDED') {
    io.stderr.write(`${execution} SUCCEEDED in ${took}\n`);
    return 0;
  }
  const why = final.error ? `${final.error.error}${final.error.cause ? `: ${final.error.cause}` : ''}` : 'no error reported';
  io.stderr.write(`strata: ${execution} ${final.status} after ${took}: ${why}\n`);
  return 1;
}

/**
 * Runs `strata workflow <sub> ...` (args after `workflow`) and resolves the exit code. Throws {@link UsageError}
 * for bad arguments and the SDK's errors for failed requests (the CLI prints both and exits 2).
 */
export async function workflowCommand(
  client: StrataClient,
  args: readonly string[],
  o: WorkflowCliOptions,
  io: CliIo,
): Promise<number> {
  const [sub, arg] = args;
  switch (sub) {
    case 'start': {
      if (!arg) throw usage('workflow start needs a workflow name');
      if (!(WORKFLOW_NAMES as readonly string[]).includes(arg)) throw unknownWorkflow(arg);
      const input = parseInput(o.input);
      if (o.mode !== undefined) {
        // order-markers' modes are its upkeep (prune, backfill); the others' are migration modes.
        const modes = arg === 'order-markers' ? ['prune', 'backfill'] : ['incremental', 'parallel'];
        if (!modes.includes(o.mode)) throw usage(`--mode of ${arg} is ${modes.join(' or ')}`);
        input.mode = o.mode;
      }
      const started = await client.workflows.start(arg as WorkflowName, input, o.name === undefined ? {} : { name: o.name });
      if (!o.wait) {
        print(io, started);
        return 0;
      }
      io.stderr.write(`started ${started.execution}\n`);
      return follow(client, started.execution, o, io);
    }
    case 'status': {
      if (!arg) throw usage('workflow status needs an execution name');
      if (o.wait) return follow(client, arg, o, io);
      const d = await client.workflows.get(arg);
      if (!d) {
        io.stderr.write(`strata: no workflow execution named '${arg}'\n`);
        return 1;
      }
      print(io, d);
      return 0;
    }
    case 'list': {
      if (o.workflow !== undefined && !(WORKFLOW_NAMES as readonly string[]).includes(o.workflow))
        throw unknownWorkflow(o.workflow);
      const limit = positiveInt('--limit', o.limit);
      const rows = await client.workflows.list({
        ...(o.workflow ? { workflow: o.workflow as WorkflowName } : {}),
        ...(limit ? { limit } : {}),
      });
      if (o.json) print(io, rows);
      else io.stdout.write(formatExecutionTable(rows));
      return 0;
    }
    default:
      if (sub === undefined) {
        const usageText = `usage: strata workflow start|status|list [options]\n\n${WORKFLOW_USAGE}`;
        throw new UsageError('workflow needs a command: start, status or list', usageText, 'workflow');
      }
      throw usage(`unknown workflow command '${sub}'`);
  }
}

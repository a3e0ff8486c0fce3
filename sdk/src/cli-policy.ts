/** `strata policy get|put|validate|history|rollback|firings`: the admin API's policy from the command line. */
import { readFile } from 'node:fs/promises';
import type { StrataClient } from './client.js';
import { UsageError, type CliIo } from './cli-workflow.js';
import { ValidationError, VersionConflictError } from './errors.js';
import type {
  PolicyDocument,
  PolicyFiring,
  PolicyProblem,
  PolicyValidation,
  PolicyVersionSummary,
  PolicyView,
} from './policies.js';

export const POLICY_USAGE = `  policy get [--json]  the policy in force: its document as JSON on stdout (to edit and put back),
                       its version, author and reason on stderr; --json: all of it as JSON on stdout
  policy put <file|-> [--if-version N] [--reason TEXT]
                       replace the policy with the document in <file> ("-": stdin); prints the new version.
                       --if-version: the version you edited from; the put is refused if the policy changed
                       since. Without it the version in force is read first and replaced, whatever it is
  policy validate <file|->
                       check a document without changing anything: its problems one a line (exit 1), or
                       which background rules would fire now
  policy history [--limit N] [--before N]
                       who changed the policy, when and what, newest first (--limit 1..100, default 20)
  policy rollback <version> [--reason TEXT] [--if-version N]
                       make a version's document current again, as a new version (0: the deployment's
                       configuration)
  policy firings [--limit N]
                       what the background rules did, newest first: when, rule, response, outcome and
                       detail (--limit 1..200, default 50)

  --json prints the server's answer as JSON (every subcommand). Exit code 0; 1 when validate finds the document
  invalid; 2 for a usage error or a failed request, a refused document or a version conflict included.
  The admin routes need an admin API key in AWS: --api-key or $STRATA_ADMIN_API_KEY (else $STRATA_API_KEY).`;

/** The options `strata policy` reads. */
export interface PolicyCliOptions {
  'if-version'?: string | undefined;
  reason?: string | undefined;
  limit?: string | undefined;
  before?: string | undefined;
  json?: boolean | undefined;
}

/** What `strata policy` runs against: the CLI's streams, and stdin for a document given as "-". */
export interface PolicyCliIo extends CliIo {
  stdin?: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string> | undefined;
}

/** The options each subcommand takes: another's is a mistake, not silently ignored. */
const SUB_OPTIONS: Readonly<Record<string, readonly (keyof PolicyCliOptions)[]>> = {
  get: ['json'],
  put: ['if-version', 'reason', 'json'],
  validate: ['json'],
  history: ['limit', 'before', 'json'],
  rollback: ['reason', 'if-version', 'json'],
  firings: ['limit', 'json'],
};

const SUBCOMMANDS = Object.keys(SUB_OPTIONS);

function usage(message: string): UsageError {
  return new UsageError(message, undefined, 'policy');
}

function print(io: CliIo, v: unknown): void {
  io.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
}

/** A --limit: a whole number from 1 to `max`. */
function limitOption(raw: string | undefined, max: number): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
    throw usage(`--limit must be a whole number from 1 to ${max}, not '${raw}'`);
  return Number(raw);
}

/** A version number: 0 is a real one (the deployment's configuration), so unlike --limit it may be 0. */
function versionNumber(what: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw)))
    throw usage(`${what} must be a version number (0, 1, 2, ...), not '${raw}'`);
  return Number(raw);
}

/** `path (rule 'id'): message`, the form `strata policy validate` prints one a line. */
export function formatProblem(p: PolicyProblem): string {
  return `${p.path}${p.rule ? ` (rule '${p.rule}')` : ''}: ${p.message}`;
}

/** The problems of a refused document, one a line; the server's message when it listed none. */
function problemLines(err: ValidationError): string {
  const problems = err.problems;
  return problems && problems.length > 0 ? problems.map((p) => `${formatProblem(p)}\n`).join('') : `${err.message}\n`;
}

function isoSeconds(iso: string | undefined): string {
  return iso ? iso.replace(/\.\d+Z$/, 'Z') : '-';
}

/** What `strata policy get` prints on stderr, one fact a line as `strata get -v` does, so that stdout stays the document. */
export function describePolicy(view: PolicyView): string {
  const lines = [`version  ${view.version} (${view.source})`];
  if (view.updatedAt || view.updatedBy)
    lines.push(`written  ${isoSeconds(view.updatedAt)}${view.updatedBy ? ` by ${view.updatedBy}` : ''}`);
  else if (view.version === 0) lines.push("written  never: the deployment's configuration");
  if (view.reason) lines.push(`reason   ${view.reason}`);
  lines.push(`hash     ${view.hash}`);
  return `${lines.join('\n')}\n`;
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}

/** The CHANGES cell: what a rollback restored, then the first changes of the diff and how many more there are. */
function diffSummary(v: PolicyVersionSummary, shown = 2): string {
  const restored =
    v.restoredFrom === undefined ? [] : [`rollback to ${v.restoredFrom}${v.restoredFrom === 0 ? ' (deployment)' : ''}`];
  const diff = v.diff.length === 0 ? ['no change'] : v.diff.slice(0, shown);
  const more = v.diff.length > shown ? ` (+${v.diff.length - shown} more)` : '';
  return `${[...restored, ...diff].join('; ')}${more}`;
}

/** The audit trail as an aligned table (what `strata policy history` prints). */
export function formatPolicyHistory(rows: readonly PolicyVersionSummary[]): string {
  if (rows.length === 0) return 'no policy versions\n';
  return table([
    ['VERSION', 'WHEN', 'WHO', 'SOURCE', 'REASON', 'CHANGES'],
    ...rows.map((v) => [
      String(v.version),
      isoSeconds(v.updatedAt),
      v.updatedBy || '-',
      v.source,
      v.reason ? (v.reason.length > 40 ? `${v.reason.slice(0, 39)}…` : v.reason) : '-',
      diffSummary(v),
    ]),
  ]);
}

/**
 * The firings of the background rules as an aligned table, newest first (what `strata policy firings` prints). DETAIL
 * is the last column and is printed whole: a failure's reason is what an operator reads it for.
 */
export function formatPolicyFirings(rows: readonly PolicyFiring[]): string {
  if (rows.length === 0) return 'no background rule has fired\n';
  return table([
    ['WHEN', 'RULE', 'RESPONSE', 'OUTCOME', 'DETAIL'],
    ...rows.map((f) => [isoSeconds(f.at), f.rule, f.response, f.outcome, f.detail || '-']),
  ]);
}

/** What `strata policy validate` prints for a valid document: the rules that would fire now, and the warnings. */
export function formatValidation(v: PolicyValidation): string {
  const firing = v.wouldFire.filter((f) => f.fires).map((f) => f.rule);
  const out = [`valid policy document (hash ${v.hash})`];
  if (v.wouldFire.length === 0) out.push('no background rules');
  else {
    out.push(`would fire now: ${firing.length ? firing.join(', ') : 'none'}`);
    const rows = v.wouldFire.map((f) => [f.rule, f.mode, f.fires ? 'yes' : 'no', f.reason]);
    out.push(table([['RULE', 'MODE', 'FIRES', 'WHY'], ...rows]).trimEnd());
  }
  for (const w of v.warnings) out.push(`warning: ${w}`);
  return `${out.join('\n')}\n`;
}

async function readAll(input: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of input) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks).toString('utf8');
}

/** The document in `source` (a file, or stdin for "-"), parsed; a file that cannot be read or parsed is a usage error. */
async function readDocument(sub: string, source: string | undefined, io: PolicyCliIo): Promise<PolicyDocument> {
  if (source === undefined || source === '') throw usage(`policy ${sub} needs a file with the policy document (or - for stdin)`);
  const name = source === '-' ? 'stdin' : source;
  let text: string;
  try {
    text = source === '-' ? await readAll(io.stdin ?? []) : await readFile(source, 'utf8');
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    throw usage(`cannot read ${name}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw usage(`${name} is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw usage(`${name}: a policy document is a JSON object ({ "rules": [...], ... })`);
  return doc as PolicyDocument;
}

/** A conflict says what to do next: read the policy again, and redo the change on top of the version in force. */
function conflictMessage(err: VersionConflictError, sent: number | undefined, sub: 'put' | 'rollback'): string {
  const since = sent === undefined ? '' : ` since version ${sent}`;
  const now = err.current === undefined ? '' : ` (it is at version ${err.current} now)`;
  const next = sub === 'put' ? 'redo your edit and put it with that version' : 'roll back with --if-version set to that version';
  return (
    `strata: ${err.code} (HTTP ${err.status}): ${err.message}\n` +
    `the policy changed${since}${now}: read it with 'strata policy get', ${next}\n`
  );
}

/**
 * Runs `strata policy <sub> ...` (args after `policy`) and resolves the exit code. Throws {@link UsageError} for bad
 * arguments and the SDK's errors for failed requests (the CLI prints both and exits 2).
 */
export async function policyCommand(
  client: StrataClient,
  args: readonly string[],
  o: PolicyCliOptions,
  io: PolicyCliIo,
): Promise<number> {
  const [sub, arg] = args;
  if (sub === undefined) {
    const usageText = `usage: strata policy get|put|validate|history|rollback|firings [options]\n\n${POLICY_USAGE}`;
    throw new UsageError(`policy needs a command: ${SUBCOMMANDS.join(', ')}`, usageText, 'policy');
  }
  const allowed = SUB_OPTIONS[sub];
  if (!allowed) throw usage(`unknown policy command '${sub}'; commands: ${SUBCOMMANDS.join(', ')}`);
  const foreign = (['if-version', 'reason', 'limit', 'before'] as const).find((k) => o[k] !== undefined && !allowed.includes(k));
  if (foreign) throw usage(`--${foreign} is not an option of strata policy ${sub}`);
  // The subcommand, then its one argument for put, validate and rollback.
  const max = sub === 'put' || sub === 'validate' || sub === 'rollback' ? 2 : 1;
  if (args.length > max) throw usage(`policy ${sub}: unexpected argument '${args[max]}'`);

  switch (sub) {
    case 'get': {
      const view = await client.policies.get();
      if (o.json) print(io, view);
      else {
        io.stderr.write(describePolicy(view));
        print(io, view.document);
      }
      return 0;
    }
    case 'put': {
      const document = await readDocument(sub, arg, io);
      let ifVersion = versionNumber('--if-version', o['if-version']);
      const reason = o.reason;
      // Without --if-version the caller asks to replace whatever is in force: read its version to put over it.
      ifVersion ??= (await client.policies.get()).version;
      let view: PolicyView;
      try {
        view = await client.policies.put(document, { ifVersion, ...(reason !== undefined ? { reason } : {}) });
      } catch (e) {
        if (e instanceof ValidationError && e.status === 400) {
          io.stderr.write(`strata: the policy document was refused:\n${problemLines(e)}`);
          return 2;
        }
        if (e instanceof VersionConflictError) {
          io.stderr.write(conflictMessage(e, ifVersion, sub));
          return 2;
        }
        throw e;
      }
      if (o.json) print(io, view);
      else io.stdout.write(`policy version ${view.version} in force (replaced version ${ifVersion}; hash ${view.hash})\n`);
      return 0;
    }
    case 'validate': {
      const document = await readDocument(sub, arg, io);
      let result: PolicyValidation;
      try {
        result = await client.policies.validate(document);
      } catch (e) {
        if (e instanceof ValidationError && e.status === 400) {
          // Invalid is an answer, not a failure to get one: the problems on stdout, exit 1 (2 is for failed requests).
          if (o.json) print(io, { valid: false, problems: e.problems ?? [{ path: '', message: e.message }] });
          else io.stdout.write(problemLines(e));
          const n = e.problems?.length ?? 1;
          io.stderr.write(`strata: invalid policy document (${n} problem${n === 1 ? '' : 's'})\n`);
          return 1;
        }
        throw e;
      }
      if (o.json) print(io, result);
      else io.stdout.write(formatValidation(result));
      return 0;
    }
    case 'history': {
      const limit = limitOption(o.limit, 100);
      const before = versionNumber('--before', o.before);
      const rows = await client.policies.versions({
        ...(limit !== undefined ? { limit } : {}),
        ...(before !== undefined ? { before } : {}),
      });
      if (o.json) print(io, rows);
      else io.stdout.write(formatPolicyHistory(rows));
      return 0;
    }
    case 'rollback': {
      if (arg === undefined) throw usage("policy rollback needs a version (0: the deployment's configuration)");
      const to = versionNumber('the version', arg)!;
      const ifVersion = versionNumber('--if-version', o['if-version']);
      let view: PolicyView;
      try {
        view = await client.policies.rollback(to, {
          ...(ifVersion !== undefined ? { ifVersion } : {}),
          ...(o.reason !== undefined ? { reason: o.reason } : {}),
        });
      } catch (e) {
        if (e instanceof VersionConflictError) {
          io.stderr.write(conflictMessage(e, ifVersion, sub));
          return 2;
        }
        throw e;
      }
      const what = to === 0 ? "the deployment's configuration" : `version ${to}'s document`;
      if (o.json) print(io, view);
      else io.stdout.write(`policy version ${view.version} in force: ${what} restored (hash ${view.hash})\n`);
      return 0;
    }
    case 'firings': {
      const limit = limitOption(o.limit, 200);
      const rows = await client.policies.firings(limit !== undefined ? { limit } : {});
      if (o.json) print(io, rows);
      else io.stdout.write(formatPolicyFirings(rows));
      return 0;
    }
    default:
      throw usage(`unknown policy command '${sub}'`);
  }
}

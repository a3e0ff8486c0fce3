/**
 * The `strata` command: argument parsing, per-command help, and errors that say what to do next. cli.ts runs it
 * on the process; tests run it in-process with their own streams and environment.
 */
import { parseArgs } from 'node:util';
import { COST_OPTIONS, COST_USAGE, costCommand } from './cli-cost.js';
import { getToOutput, putFromFile } from './cli-stream.js';
import { KEYS_OPTIONS, KEYS_USAGE, keysCommand } from './cli-keys.js';
import { POLICY_USAGE, policyCommand } from './cli-policy.js';
import { NODE_OPTIONS, NODE_USAGE, nodeCommand } from './cli-node.js';
import { formatDuration, UsageError, WORKFLOW_USAGE, workflowCommand, type CliIo } from './cli-workflow.js';
import { StrataClient } from './client.js';
import { NetworkError, NotFoundError, StrataError, WorkflowsUnavailableError } from './errors.js';
import type { CacheItem } from './types.js';
import { SDK_VERSION } from './version.js';

const DEFAULT_ENDPOINT = 'http://localhost:8080';

const CONNECTION_LINES = `  --endpoint <url>     default $STRATA_ENDPOINT or ${DEFAULT_ENDPOINT}
  --api-key <key>      default $STRATA_API_KEY (workflow, policy, node: $STRATA_ADMIN_API_KEY first)
  --timeout <ms>       per-attempt timeout (default 5000)`;

const CONNECTION_HELP = `connection options (every command):\n${CONNECTION_LINES}`;

const NS_HELP = '  --ns <namespace>     default $STRATA_NAMESPACE or "default"';

/** `strata help`: the commands in one screen; `strata help <command>` has the details. */
export const USAGE = `usage: strata <command> [args] [options]

commands:
  get <key> [-v]       write the value to stdout (exit 1 when the key does not exist); -v: version, tier, expiry;
                       -o <file>: streamed to a file; --range a-b: those bytes
  has <key>            exit 0 when the key exists, 1 when it does not; prints nothing
  put <key> [value]    store value (read from stdin when omitted or "-"); prints the result as JSON; --file <f>:
                       streamed from a file (or "-": stdin) in parts, for values of any size
  touch <key> --ttl <s> | --no-ttl
                       a new time to live without sending the value again; prints the result as JSON
  delete <key>         delete; prints the tombstone version as JSON
  keys [--prefix <p>]  list keys in key order, one per line (bounds: --start, --end; -l: size, version, tiers)
  invalidate --tags <a,b> | --prefix <p>
                       make every key with any of the tags, or under the prefix, missing for every reader
  flush --confirm <ns> make every key of the namespace missing for every reader
  stats | health       print the service report as JSON
  workflow start <workflow> | status <execution> | list
                       the deployment's workflows (scale-out, scale-in, ...), with a progress bar (--wait)
  policy get | put <file> | validate <file> | history | rollback <version> | firings
                       the deployment's policy: read, check, replace, audit trail, roll back, rule firings
  node list | replace <node> | remove <node> | replacement pause|resume|status
                       the warm tier's cache nodes: list, replace or remove a DOWN one, pause replacement
  cost [options]       the server's cost model: placements ranked for a workload, Chiu & Agrawal's 2010 tables
  help [command]       this text, or one command's options
  --version            print the version of the SDK and CLI

options:
${NS_HELP}
${CONNECTION_LINES}

Run 'strata help <command>' for a command's options.`;

/** `strata help <command>`. */
export const COMMAND_HELP: Readonly<Record<string, string>> = {
  get: `usage: strata get <key> [-v|--verbose] [--if-none-match <version>] [--ns <namespace>]

Writes the value to stdout, byte for byte; exit 1 when the key does not exist (or expired, or was deleted).
  -v, --verbose        also print on stderr, so that stdout stays the value: the version, the tier that served
                       it (l1, hot, warm, cold), its expiry and remaining TTL, its content type and tags
  --if-none-match <v>  the version you hold: while it is still the stored one, nothing is transferred or
                       written to stdout, and the exit status is 3 (not modified)
  -o, --out <file>     stream the value into <file> ("-": stdout) as it arrives, never held in memory whole
  --range <a-b>        only bytes a..b (inclusive; "a-": to the end), streamed; exit 2 with
                       RANGE_NOT_SATISFIABLE when a is past the end
${NS_HELP}

${CONNECTION_HELP}`,
  has: `usage: strata has <key> [--ns <namespace>]

Whether the key exists (HEAD, the value is not transferred): exit 0 when it does, 1 when it does not. Prints
nothing, for use in scripts: strata has report:q3 || build-report.
${NS_HELP}

${CONNECTION_HELP}`,
  put: `usage: strata put <key> [value|-] [options]

Stores the value, or stdin when it is omitted or "-"; prints the write's result (version, expiry, tiers) as JSON.
  --ttl <seconds>      time to live (default: the namespace's)
  --tags <a,b>         tags
  --content-type <t>   content type (default text/plain; application/octet-stream for stdin)
  -f, --file <file>    stream the value from <file> ("-": stdin) in parts of 8 MiB (a multipart upload), for
                       values of any size; instead of [value]
${NS_HELP}

${CONNECTION_HELP}`,
  touch: `usage: strata touch <key> (--ttl <seconds> | --no-ttl) [--if-match <version>] [--ns <namespace>]

Gives the key a new time to live, counted from now, without sending its value again (PATCH); prints the write's
result (its new version and expiry) as JSON. The value, tags and content type stay. Exit 1 when the key does not
exist.
  --ttl <seconds>      the new time to live (1..31536000)
  --no-ttl             no expiry: the key stays until it is deleted
  --if-match <v>       only if the stored version is this one (or * : only if it exists)
${NS_HELP}

${CONNECTION_HELP}`,
  keys: `${KEYS_USAGE}
${NS_HELP}

${CONNECTION_HELP}`,
  invalidate: `usage: strata invalidate (--tags <a,b> | --prefix <prefix>) [--ns <namespace>]

Makes every key carrying any of the tags, or whose name starts with the prefix, missing for every reader; returns
once that holds everywhere (about a second, however many keys it covers). Writes after it are visible as usual.
Prints the invalidation (its audit log id and generation) as JSON.
  --tags <a,b>         tags (at most 64)
  --prefix <prefix>    a key prefix
${NS_HELP}

${CONNECTION_HELP}`,
  flush: `usage: strata flush --confirm <namespace> [--ns <namespace>]

Makes every key of the namespace written before the call missing for every reader, as an invalidation does.
--confirm must repeat the namespace. Prints the invalidation as JSON.
${NS_HELP}

${CONNECTION_HELP}`,
  delete: `usage: strata delete <key> [--ns <namespace>]

Deletes the key; prints the tombstone's version as JSON. A key that does not exist gets a tombstone too (no error).
${NS_HELP}

${CONNECTION_HELP}`,
  stats: `usage: strata stats

Prints GET /v1/stats as JSON: uptime, and per tier its entries, bytes, hits, misses and errors.

${CONNECTION_HELP}`,
  health: `usage: strata health

Prints GET /v1/health as JSON; exit 0 when every tier is up ("ok"), else 1.

${CONNECTION_HELP}`,
  workflow: `usage: strata workflow start|status|list [options]

${WORKFLOW_USAGE}

  --interval <ms>      --wait: poll interval (default 1000)

${CONNECTION_HELP}`,
  policy: `usage: strata policy get|put|validate|history|rollback|firings [options]

${POLICY_USAGE}

${CONNECTION_HELP}`,
  node: `usage: strata node list|replace|remove|replacement [options]

${NODE_USAGE}

  --interval <ms>      --wait: poll interval (default 1000)

${CONNECTION_HELP}`,
  cost: COST_USAGE,
  help: "usage: strata help [command]\n\nPrints the list of commands, or one command's usage and options.",
};

/** The options each command takes besides the connection options (a foreign one is a mistake, not ignored). */
const COMMAND_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  get: ['ns', 'verbose', 'if-none-match', 'out', 'range'],
  has: ['ns'],
  // These print JSON anyway: --json is accepted (as it always was), not needed.
  put: ['ns', 'ttl', 'tags', 'content-type', 'json', 'file'],
  touch: ['ns', 'ttl', 'no-ttl', 'if-match', 'json'],
  delete: ['ns', 'json'],
  keys: KEYS_OPTIONS,
  invalidate: ['ns', 'tags', 'prefix', 'json'],
  flush: ['ns', 'confirm', 'json'],
  stats: ['json'],
  health: ['json'],
  workflow: ['mode', 'input', 'name', 'wait', 'interval', 'workflow', 'limit', 'json'],
  policy: ['if-version', 'reason', 'limit', 'before', 'json'],
  node: NODE_OPTIONS,
  cost: [...Object.keys(COST_OPTIONS), 'json'],
  help: [],
};

/** The positional arguments after the command that each command takes, at most. */
const MAX_ARGS: Readonly<Record<string, number>> = {
  get: 1,
  has: 1,
  put: 2,
  touch: 1,
  delete: 1,
  keys: 0,
  invalidate: 0,
  flush: 0,
  stats: 0,
  health: 0,
  cost: 0,
  help: 1,
};

const CONNECTION_OPTIONS = ['endpoint', 'api-key', 'timeout', 'help'];

/** The commands of the admin API, which take `$STRATA_ADMIN_API_KEY` before `$STRATA_API_KEY`. */
const ADMIN_COMMANDS: ReadonlySet<string> = new Set(['workflow', 'policy', 'node']);

const PARSE_OPTIONS = {
  ...COST_OPTIONS,
  endpoint: { type: 'string' },
  'api-key': { type: 'string' },
  ns: { type: 'string' },
  ttl: { type: 'string' },
  tags: { type: 'string' },
  'content-type': { type: 'string' },
  timeout: { type: 'string' },
  mode: { type: 'string' },
  input: { type: 'string' },
  name: { type: 'string' },
  wait: { type: 'boolean' },
  interval: { type: 'string' },
  workflow: { type: 'string' },
  limit: { type: 'string' },
  'if-version': { type: 'string' },
  'if-none-match': { type: 'string' },
  'if-match': { type: 'string' },
  'no-ttl': { type: 'boolean' },
  prefix: { type: 'string' },
  start: { type: 'string' },
  end: { type: 'string' },
  inclusive: { type: 'string' },
  long: { type: 'boolean', short: 'l' },
  confirm: { type: 'string' },
  reason: { type: 'string' },
  before: { type: 'string' },
  fill: { type: 'string' },
  rate: { type: 'string' },
  'no-terminate': { type: 'boolean' },
  json: { type: 'boolean' },
  out: { type: 'string', short: 'o' },
  range: { type: 'string' },
  file: { type: 'string', short: 'f' },
  verbose: { type: 'boolean', short: 'v' },
  version: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** What the CLI runs against: its streams and environment (the process's, or a test's). */
export interface CliContext extends CliIo {
  env: Readonly<Record<string, string | undefined>>;
  /** Where `put` reads a value given as "-" or not at all. */
  stdin?: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string> | undefined;
  /** The clock `get -v` measures the remaining TTL with. Default: now. */
  now?: (() => number) | undefined;
}

async function readAll(input: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const c of input) chunks.push(typeof c === 'string' ? Buffer.from(c) : Buffer.from(c));
  return Buffer.concat(chunks);
}

function wholeNumber(flag: string, raw: string | undefined, command: string): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    throw new UsageError(`--${flag} must be a whole number of at least 1, not '${raw}'`, undefined, command);
  }
  return Number(raw);
}

/** `get -v`: what the server said about the entry, one fact a line (on stderr). */
export function describeItem(item: CacheItem, now: number): string {
  let expires = 'never (no TTL)';
  if (item.expiresAt !== null) {
    const left = item.expiresAt.getTime() - now;
    expires = `${item.expiresAt.toISOString()} (${left > 0 ? `${formatDuration(left)} left` : 'expired'})`;
  }
  return (
    [
      `version  ${item.version}`,
      `tier     ${item.tier}`,
      `expires  ${expires}`,
      ...(item.contentType ? [`type     ${item.contentType}`] : []),
      ...(item.tags.length ? [`tags     ${item.tags.join(', ')}`] : []),
      `size     ${item.value.byteLength} bytes`,
    ].join('\n') + '\n'
  );
}

function isLocal(endpoint: string): boolean {
  try {
    return ['localhost', '127.0.0.1', '[::1]'].includes(new URL(endpoint).hostname);
  } catch {
    return false;
  }
}

/** A failed request as one line, with what to do next where the cause is a common one. */
export function describeError(err: StrataError, endpoint: string): string {
  if (err instanceof NetworkError && err.connectFailed) {
    const errno = typeof err.details?.errno === 'string' ? ` (${err.details.errno})` : '';
    const next = "is the server running? start it with `npm start`, or set STRATA_ENDPOINT to your deployment's URL";
    return `cannot connect to ${endpoint}${errno}: ${next}`;
  }
  const what = `${err.code}${err.status ? ` (HTTP ${err.status})` : ''}: ${err.message}`;
  // Only the local server's "no workflows in this runtime" (a workflow it lacks names the workflow in details).
  if (err instanceof WorkflowsUnavailableError && isLocal(endpoint) && err.details?.workflow === undefined) {
    return `${what}\nstart the local server with STRATA_LOCAL_NODES=3 to run workflows locally: STRATA_LOCAL_NODES=3 npm start`;
  }
  return what;
}

/** The command a mistake is about, for its `strata help <command>` hint, when parsing failed before knowing it. */
function guessCommand(argv: readonly string[]): string | undefined {
  const first = argv.find((a) => !a.startsWith('-'));
  return first !== undefined && first in COMMAND_HELP ? first : undefined;
}

function helpHint(command: string | undefined): string {
  return command && command in COMMAND_HELP ? `run 'strata help ${command}'` : "run 'strata help'";
}

function parse(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], allowPositionals: true, strict: true, options: PARSE_OPTIONS });
  } catch (e) {
    // Node's messages are long and name `--` tricks; the option and what was wrong is enough.
    const code = (e as { code?: string }).code;
    const raw = (e as Error).message;
    const option = /'(-[^' ]+)/.exec(raw)?.[1];
    const command = guessCommand(argv);
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown option ${option ?? raw}`, undefined, command);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE')
      throw new UsageError(`${option ?? 'an option'} needs a value`, undefined, command);
    throw new UsageError(raw.split('\n')[0]!, undefined, command);
  }
}

async function run(argv: readonly string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parse(argv);
  const [command, ...args] = positionals;
  if (values.version) {
    ctx.stdout.write(`${SDK_VERSION}\n`);
    return 0;
  }
  if (command === 'help' || values.help) {
    const topic = command === 'help' ? (args[0] ?? (values.help ? 'help' : undefined)) : command;
    if (topic === undefined) {
      ctx.stdout.write(`${USAGE}\n`);
      return 0;
    }
    const text = COMMAND_HELP[topic];
    if (text === undefined) throw new UsageError(`unknown command '${topic}'`, undefined, '');
    ctx.stdout.write(`${text}\n`);
    return 0;
  }
  if (command === undefined) {
    // Nothing asked: the list of commands is the answer, but the exit code says nothing ran.
    ctx.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (!(command in COMMAND_OPTIONS)) throw new UsageError(`unknown command '${command}'`);
  const allowed = new Set([...CONNECTION_OPTIONS, ...COMMAND_OPTIONS[command]!]);
  const foreign = Object.keys(values).find((o) => !allowed.has(o));
  if (foreign) {
    const owner = Object.keys(COMMAND_OPTIONS).filter((c) => COMMAND_OPTIONS[c]!.includes(foreign));
    const where = owner.length ? ` (it is an option of strata ${owner.join(', ')})` : '';
    throw new UsageError(`--${foreign} is not an option of strata ${command}${where}`, undefined, command);
  }
  const max = MAX_ARGS[command];
  if (max !== undefined && args.length > max)
    throw new UsageError(`${command}: unexpected argument '${args[max]}'`, undefined, command);
  const timeoutMs = wholeNumber('timeout', values.timeout, command);
  const endpoint = values.endpoint ?? ctx.env.STRATA_ENDPOINT ?? DEFAULT_ENDPOINT;
  let client: StrataClient;
  try {
    client = new StrataClient({
      endpoint,
      apiKey:
        values['api-key'] ?? (ADMIN_COMMANDS.has(command) ? ctx.env.STRATA_ADMIN_API_KEY : undefined) ?? ctx.env.STRATA_API_KEY,
      namespace: values.ns ?? ctx.env.STRATA_NAMESPACE ?? 'default',
      timeoutMs,
    });
  } catch (e) {
    // A bad --endpoint or --ns: the client says which and why.
    if (e instanceof StrataError) throw new UsageError(e.message, undefined, command);
    throw e;
  }
  const print = (v: unknown): void => void ctx.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
  const key = (): string => {
    if (args[0] === undefined || args[0] === '') throw new UsageError(`${command} needs a key`, undefined, command);
    return args[0];
  };
  try {
    switch (command) {
      case 'get': {
        const held = values['if-none-match'];
        if (values.out !== undefined || values.range !== undefined) {
          if (held !== undefined) throw new UsageError('--if-none-match does not go with --out or --range', undefined, command);
          return await getToOutput(client, key(), { out: values.out ?? '-', range: values.range, verbose: values.verbose }, ctx);
        }
        if (held !== undefined && !/^\d{1,16}$/.test(held))
          throw new UsageError(`--if-none-match must be a version (a whole number), not '${held}'`, undefined, command);
        const item = await client.get(key(), held === undefined ? {} : { ifNoneMatch: Number(held) });
        if (!item) {
          ctx.stderr.write(`strata: ${args[0]} not found\n`);
          return 1;
        }
        if ('notModified' in item) {
          ctx.stderr.write(`strata: ${args[0]} not modified (version ${item.version})\n`);
          return 3;
        }
        if (values.verbose) ctx.stderr.write(describeItem(item, (ctx.now ?? Date.now)()));
        ctx.stdout.write(item.value);
        return 0;
      }
      case 'has':
        return (await client.has(key())) ? 0 : 1;
      case 'put': {
        const k = key();
        const value = args[1];
        const ttl = wholeNumber('ttl', values.ttl, command);
        if (values.file !== undefined) {
          if (value !== undefined) throw new UsageError('put takes a value or --file, not both', undefined, command);
          const tags = values.tags?.split(',').filter(Boolean);
          return await putFromFile(client, k, { file: values.file, ttl, tags, contentType: values['content-type'] }, ctx);
        }
        const body = value === undefined || value === '-' ? await readAll(ctx.stdin ?? []) : value;
        print(
          await client.put(k, body, {
            ttl,
            ...(values.tags ? { tags: values.tags.split(',').filter(Boolean) } : {}),
            contentType: values['content-type'],
          }),
        );
        return 0;
      }
      case 'touch': {
        const k = key();
        if ((values.ttl === undefined) === !values['no-ttl'])
          throw new UsageError('touch needs either --ttl <seconds> or --no-ttl', undefined, command);
        const ifMatch = values['if-match'];
        if (ifMatch !== undefined && !/^(\*|\d{1,16})$/.test(ifMatch))
          throw new UsageError(`--if-match must be a version or *, not '${ifMatch}'`, undefined, command);
        const ttl = values['no-ttl'] ? null : wholeNumber('ttl', values.ttl, command)!;
        const at = ifMatch === undefined ? {} : { ifMatch: ifMatch === '*' ? ('*' as const) : Number(ifMatch) };
        try {
          print(await client.touch(k, { ttl, ...at }));
        } catch (e) {
          if (!(e instanceof NotFoundError)) throw e;
          ctx.stderr.write(`strata: ${k} not found\n`);
          return 1;
        }
        return 0;
      }
      case 'delete':
        print(await client.delete(key()));
        return 0;
      case 'keys':
        return await keysCommand(client, { ...values, limit: wholeNumber('limit', values.limit, command) }, ctx);
      case 'invalidate': {
        const tags = values.tags?.split(',').filter(Boolean);
        if ((tags === undefined) === (values.prefix === undefined))
          throw new UsageError('invalidate needs either --tags <a,b> or --prefix <prefix>', undefined, command);
        print(tags ? await client.invalidateTags(tags) : await client.invalidatePrefix(values.prefix!));
        return 0;
      }
      case 'flush':
        if (values.confirm === undefined)
          throw new UsageError('flush needs --confirm <namespace>, the namespace again', undefined, command);
        print(await client.flush({ confirm: values.confirm }));
        return 0;
      case 'stats':
        print(await client.stats());
        return 0;
      case 'health': {
        const h = await client.health();
        print(h);
        return h.status === 'ok' ? 0 : 1;
      }
      case 'workflow':
        return await workflowCommand(client, args, values, ctx);
      case 'cost':
        return await costCommand(client, values, ctx);
      case 'policy':
        return await policyCommand(client, args, values, ctx);
      case 'node':
        return await nodeCommand(client, args, values, ctx);
      default:
        throw new UsageError(`unknown command '${command}'`);
    }
  } catch (e) {
    if (e instanceof StrataError) {
      ctx.stderr.write(`strata: ${describeError(e, client.endpoint)}\n`);
      return 2;
    }
    throw e;
  }
}

/**
 * Runs `strata <argv>` and resolves its exit code: 0, 1 (a miss, a failed execution, a degraded health, an invalid
 * policy document), 2 (a mistake in the arguments, printed as one line with the help command to run, or a failed
 * request), or 3 (`get --if-none-match`: not modified).
 */
export async function runCli(argv: readonly string[], ctx: CliContext): Promise<number> {
  try {
    return await run(argv, ctx);
  } catch (err) {
    if (err instanceof UsageError) {
      // A bare `strata cost`, `strata workflow`, `strata policy` or `strata node` asked what the command does: its usage; any other
      // mistake one line.
      if (err.usage !== undefined) ctx.stderr.write(`strata: ${err.message}\n\n${err.usage}\n`);
      else ctx.stderr.write(`strata: ${err.message}; ${helpHint(err.command ?? guessCommand(argv))}\n`);
      return 2;
    }
    ctx.stderr.write(`strata: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
}

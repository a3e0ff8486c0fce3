#!/usr/bin/env node
/** Minimal CLI over StrataClient: `strata get|put|delete|stats|health|workflow|cost`. */
import { parseArgs } from 'node:util';
import { COST_OPTIONS, COST_USAGE, costCommand } from './cli-cost.js';
import { UsageError, WORKFLOW_USAGE, workflowCommand } from './cli-workflow.js';
import { StrataClient, StrataError } from './index.js';

const USAGE = `usage: strata <command> [args] [options]

  get <key>            write the value to stdout (exit 1 when the key does not exist)
  put <key> [value]    store value (read from stdin when omitted or "-"); prints the result as JSON
  delete <key>         delete; prints the tombstone version as JSON
  stats | health       print the service report as JSON
  cost [options]       the server's cost model: placements ranked for a workload (--value-size 1MB --keys 500
                       --requests-per-month 2000), paper 001's tables (--paper-2010 --tables), the price catalogs
                       (--catalogs); the same flags and text as \`npm run cost\`. strata cost --help lists its options
${WORKFLOW_USAGE}

options:
  --endpoint <url>     default $STRATA_ENDPOINT or http://localhost:8080
  --api-key <key>      default $STRATA_API_KEY
  --ns <namespace>     default $STRATA_NAMESPACE or "default"
  --ttl <seconds>      put: time to live
  --tags <a,b>         put: tags
  --content-type <t>   put: content type (default text/plain; application/octet-stream for stdin)
  --timeout <ms>       per-attempt timeout (default 5000)
  --interval <ms>      workflow --wait: poll interval (default 1000)`;

async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Options every command takes. */
const CONNECTION_OPTIONS: ReadonlySet<string> = new Set(['endpoint', 'api-key', 'timeout', 'json', 'help']);

/** Options of one command used with another: a usage error rather than silently ignored. */
function checkOptions(command: string, given: readonly string[]): void {
  if (command === 'cost') {
    const foreign = given.find((o) => !CONNECTION_OPTIONS.has(o) && !(o in COST_OPTIONS));
    if (foreign) throw new UsageError(`cost: --${foreign} is not an option of strata cost`, COST_USAGE);
    return;
  }
  const cost = given.find((o) => o in COST_OPTIONS);
  if (cost) throw new UsageError(`--${cost} is an option of strata cost, not of strata ${command}`);
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
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
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, key, value] = positionals;
  if (command === 'cost' && values.help) {
    process.stdout.write(`${COST_USAGE}\n`);
    return 0;
  }
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  checkOptions(command, Object.keys(values));
  if (command === 'cost' && positionals.length > 1) throw new UsageError(`cost: unexpected argument '${positionals[1]}'`, COST_USAGE);
  const client = new StrataClient({
    endpoint: values.endpoint ?? process.env.STRATA_ENDPOINT ?? 'http://localhost:8080',
    apiKey: values['api-key'] ?? (command === 'workflow' ? process.env.STRATA_ADMIN_API_KEY : undefined) ?? process.env.STRATA_API_KEY,
    namespace: values.ns ?? process.env.STRATA_NAMESPACE ?? 'default',
    ...(values.timeout ? { timeoutMs: Number(values.timeout) } : {}),
  });
  const print = (v: unknown): void => void process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
  const needKey = (): string => {
    if (!key) throw new Error(`${command} needs a key\n\n${USAGE}`);
    return key;
  };
  switch (command) {
    case 'get': {
      const item = await client.get(needKey());
      if (!item) {
        process.stderr.write(`strata: ${key} not found\n`);
        return 1;
      }
      process.stdout.write(item.value);
      return 0;
    }
    case 'put': {
      const k = needKey();
      const fromStdin = value === undefined || value === '-';
      const body = fromStdin ? await readStdin() : value;
      print(await client.put(k, body, {
        ...(values.ttl ? { ttl: Number(values.ttl) } : {}),
        ...(values.tags ? { tags: values.tags.split(',').filter(Boolean) } : {}),
        ...(values['content-type'] ? { contentType: values['content-type'] } : {}),
      }));
      return 0;
    }
    case 'delete':
      print(await client.delete(needKey()));
      return 0;
    case 'stats':
      print(await client.stats());
      return 0;
    case 'workflow':
      return workflowCommand(client, positionals.slice(1), values, { stdout: process.stdout, stderr: process.stderr });
    case 'cost':
      return costCommand(client, values, { stdout: process.stdout, stderr: process.stderr });
    case 'health': {
      const h = await client.health();
      print(h);
      return h.status === 'ok' ? 0 : 1;
    }
    default:
      process.stderr.write(`strata: unknown command ${command}\n\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`strata: ${err.message}\n\n${err.usage ?? USAGE}\n`);
      process.exitCode = 2;
      return;
    }
    const msg = err instanceof StrataError ? `${err.code}${err.status ? ` (HTTP ${err.status})` : ''}: ${err.message}` : err instanceof Error ? err.message : String(err);
    process.stderr.write(`strata: ${msg}\n`);
    process.exitCode = 2;
  },
);

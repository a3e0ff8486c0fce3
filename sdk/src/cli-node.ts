/** `strata node list|replace|remove|replacement|upgrade`: the warm tier's cache nodes from the command line. */
import type { StrataClient } from './client.js';
import { follow, UsageError, type CliIo } from './cli-workflow.js';
import type { CacheNode, NodeList, NodeRemoval, ReplaceNodeOptions, ReplacementControls, UpgradeOptions } from './nodes.js';

export const NODE_USAGE = `  node list [--json]   the warm tier's cache nodes as the ring has them: state, ranges owned, AZ, instance,
                       and for DOWN nodes when and why they were marked; whether replacement is paused
  node replace <node> [--fill NS1,NS2] [--rate BYTES_PER_SEC] [--no-terminate] [--reason TEXT]
                      [--name NAME] [--wait]
                       replace a DOWN node: start the replace-node workflow (a new node takes its ranges);
                       prints the execution as JSON. --fill: namespaces to fill the new node with from the
                       cold tier (default: none, it fills by read-through); --rate: the fill's bandwidth cap
                       (default 8 MiB/s); --no-terminate: keep the dead node's instance (and its volume)
  node remove <node> [--json]
                       remove a DOWN node without a replacement: its ranges go to the next NORMAL node
  node replacement pause [--reason TEXT] | resume | status [--json]
                       pause or resume automatic replacement of DOWN nodes (for every health checker at
                       once: while paused no node is marked DOWN), or show who paused it, when and why
  node upgrade [<node> ...] [--mode incremental|parallel] [--rate BYTES_PER_SEC] [--reason TEXT]
                      [--name NAME] [--wait]
                       roll a new node version out (on AWS: the launch template's latest version, created
                       first): start the rolling-upgrade workflow, which replaces the nodes named (default:
                       every NORMAL node, or the rest of a stopped upgrade) one at a time, each handing its
                       ranges over to a freshly launched node before it is terminated; prints the execution
                       as JSON. --rate: bytes per second asked of each node handing over (default: its cap)

  --wait shows the replacement's (or upgrade's) progress bar (on stderr) until it stops, then prints it as JSON; the exit code
  is 0 when it SUCCEEDED, 1 when it FAILED, was ABORTED or TIMED_OUT (as strata workflow start --wait).
  Exit code 2 for a usage error or a failed request: a node that is not in the ring, or not DOWN, included.
  The admin routes need an admin API key in AWS: --api-key or $STRATA_ADMIN_API_KEY (else $STRATA_API_KEY).`;

/** The options `strata node` reads. */
export interface NodeCliOptions {
  fill?: string | undefined;
  rate?: string | undefined;
  mode?: string | undefined;
  'no-terminate'?: boolean | undefined;
  reason?: string | undefined;
  name?: string | undefined;
  wait?: boolean | undefined;
  /** Poll interval of --wait, ms. */
  interval?: string | undefined;
  json?: boolean | undefined;
}

type Sub = 'list' | 'replace' | 'remove' | 'replacement' | 'upgrade';

/** The options each subcommand takes: another's is a mistake, not silently ignored. */
const SUB_OPTIONS: Readonly<Record<Sub, readonly (keyof NodeCliOptions)[]>> = {
  list: ['json'],
  replace: ['fill', 'rate', 'no-terminate', 'reason', 'name', 'wait', 'interval', 'json'],
  remove: ['json'],
  replacement: ['reason', 'json'],
  upgrade: ['mode', 'rate', 'reason', 'name', 'wait', 'interval', 'json'],
};

const SUBCOMMANDS = Object.keys(SUB_OPTIONS) as Sub[];
/** Every option of `strata node` (the CLI refuses the other commands' options before this runs). */
export const NODE_OPTIONS: readonly (keyof NodeCliOptions)[] = [
  'fill',
  'rate',
  'mode',
  'no-terminate',
  'reason',
  'name',
  'wait',
  'interval',
  'json',
];
const REPLACEMENT_ACTIONS = ['pause', 'resume', 'status'] as const;

function usage(message: string): UsageError {
  return new UsageError(message, undefined, 'node');
}

function print(io: CliIo, v: unknown): void {
  io.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
}

function isoSeconds(iso: string | undefined): string {
  return iso ? iso.replace(/\.\d+Z$/, 'Z') : '-';
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}

/** One line on the replacement controls: `on`, or `PAUSED by ops at ...: reason`. */
export function describeReplacement(c: ReplacementControls): string {
  if (!c.paused) {
    const since = c.at ? ` (resumed${c.by ? ` by ${c.by}` : ''} at ${isoSeconds(c.at)})` : '';
    return `automatic replacement: on${since}`;
  }
  const by = c.by ? ` by ${c.by}` : '';
  const at = c.at ? ` at ${isoSeconds(c.at)}` : '';
  return `automatic replacement: PAUSED${by}${at}${c.reason ? `: ${c.reason}` : ''}`;
}

function downCell(n: CacheNode): string {
  return n.down ? `${isoSeconds(n.down.at)} ${n.down.reason}` : '-';
}

/** What `strata node list` prints: the ring's version, the replacement controls, and the nodes as a table. */
export function formatNodeList(list: NodeList): string {
  const head =
    list.ringVersion === null
      ? 'no ring yet: the warm tier has no nodes'
      : `ring version ${list.ringVersion}, ${list.nodes.length} node${list.nodes.length === 1 ? '' : 's'}`;
  const lines = [head, describeReplacement(list.replacement)];
  if (list.nodes.length === 0) return `${lines.join('\n')}\n`;
  const rows = list.nodes.map((n) => [n.id, n.state, String(n.ranges), n.az ?? '-', n.instance ?? '-', n.url, downCell(n)]);
  return `${lines.join('\n')}\n\n${table([['NODE', 'STATE', 'RANGES', 'AZ', 'INSTANCE', 'URL', 'DOWN SINCE'], ...rows])}`;
}

/** What `strata node remove` prints: the new ring version and who took the node's ranges. */
export function formatRemoval(node: string, r: NodeRemoval): string {
  const byReceiver = new Map<string, number>();
  for (const m of r.moved) byReceiver.set(m.to, (byReceiver.get(m.to) ?? 0) + 1);
  const to = [...byReceiver].map(([id, n]) => `${id} (${n})`).join(', ');
  const ranges = `${r.moved.length} range${r.moved.length === 1 ? '' : 's'}`;
  return `removed node ${node}: ring version ${r.ringVersion}; its ${ranges} went to ${to || 'no one'}, empty (they fill by read-through)\n`;
}

function nodeArg(sub: string, arg: string | undefined): string {
  if (arg === undefined || arg === '') throw usage(`node ${sub} needs a node id (strata node list shows them)`);
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(arg)) throw usage(`'${arg}' is not a node id: 1-64 characters of A-Z a-z 0-9 _ . : -`);
  return arg;
}

/** --fill: namespaces, comma-separated (spaces around the commas ignored). */
function fillOption(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const namespaces = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (namespaces.length === 0) throw usage('--fill needs namespaces, comma-separated: --fill sessions,carts');
  return namespaces;
}

/** --rate: a whole number of bytes per second. */
function rateOption(raw: string | undefined, what = "the fill's cap"): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < 1)
    throw usage(`--rate is ${what} in bytes per second, a whole number (8388608 = 8 MiB/s), not '${raw}'`);
  return Number(raw);
}

/** --interval: the poll interval of --wait. */
function checkInterval(o: NodeCliOptions): void {
  if (o.interval !== undefined && (!/^\d+$/.test(o.interval) || Number(o.interval) < 1))
    throw usage(`--interval must be a whole number of milliseconds of at least 1, not '${o.interval}'`);
  if (o.interval !== undefined && !o.wait) throw usage('--interval is the poll interval of --wait: add --wait');
}

/**
 * Runs `strata node <sub> ...` (args after `node`) and resolves the exit code. Throws {@link UsageError} for bad
 * arguments and the SDK's errors for failed requests (the CLI prints both and exits 2).
 */
export async function nodeCommand(client: StrataClient, args: readonly string[], o: NodeCliOptions, io: CliIo): Promise<number> {
  const [sub, arg] = args;
  if (sub === undefined) {
    const usageText = `usage: strata node list|replace|remove|replacement|upgrade [options]\n\n${NODE_USAGE}`;
    throw new UsageError(`node needs a command: ${SUBCOMMANDS.join(', ')}`, usageText, 'node');
  }
  if (!(SUBCOMMANDS as string[]).includes(sub)) throw usage(`unknown node command '${sub}'; commands: ${SUBCOMMANDS.join(', ')}`);
  const allowed = SUB_OPTIONS[sub as Sub];
  const foreign = NODE_OPTIONS.find((k) => o[k] !== undefined && !allowed.includes(k));
  if (foreign) throw usage(`--${foreign} is not an option of strata node ${sub}`);
  // upgrade takes any number of node ids.
  const max = sub === 'list' ? 1 : sub === 'upgrade' ? Infinity : 2;
  if (args.length > max) throw usage(`node ${sub}: unexpected argument '${args[max]}'`);

  switch (sub as Sub) {
    case 'list': {
      const list = await client.nodes.list();
      if (o.json) print(io, list);
      else io.stdout.write(formatNodeList(list));
      return 0;
    }
    case 'replace': {
      const node = nodeArg(sub, arg);
      const fill = fillOption(o.fill);
      const rate = rateOption(o.rate);
      checkInterval(o);
      const input: ReplaceNodeOptions = {
        ...(fill ? { fillNamespaces: fill } : {}),
        ...(rate !== undefined ? { rateBytesPerSec: rate } : {}),
        ...(o['no-terminate'] ? { terminate: false } : {}),
        ...(o.reason !== undefined ? { reason: o.reason } : {}),
      };
      const started = await client.nodes.replace(node, input, o.name === undefined ? {} : { name: o.name });
      if (!o.wait) {
        print(io, started);
        return 0;
      }
      io.stderr.write(`started ${started.execution} (replacing node ${node})\n`);
      return follow(client, started.execution, o, io);
    }
    case 'upgrade': {
      const nodes = args.slice(1).map((a) => nodeArg(sub, a));
      if (o.mode !== undefined && o.mode !== 'incremental' && o.mode !== 'parallel')
        throw usage(`--mode is incremental (the new node serves range by range, the default) or parallel, not '${o.mode}'`);
      const rate = rateOption(o.rate, 'what each node handing over is asked for');
      checkInterval(o);
      const input: UpgradeOptions = {
        ...(nodes.length ? { nodes } : {}),
        ...(o.mode !== undefined ? { mode: o.mode } : {}),
        ...(rate !== undefined ? { rateBytesPerSec: rate } : {}),
        ...(o.reason !== undefined ? { reason: o.reason } : {}),
      };
      const started = await client.nodes.upgrade(input, o.name === undefined ? {} : { name: o.name });
      if (!o.wait) {
        print(io, started);
        return 0;
      }
      const which = nodes.length ? `nodes ${nodes.join(', ')}` : 'every node';
      io.stderr.write(`started ${started.execution} (upgrading ${which}, one at a time)\n`);
      return follow(client, started.execution, o, io);
    }
    case 'remove': {
      const node = nodeArg(sub, arg);
      const removed = await client.nodes.remove(node);
      if (o.json) print(io, removed);
      else io.stdout.write(formatRemoval(node, removed));
      return 0;
    }
    case 'replacement': {
      const action = arg;
      if (action === undefined || !(REPLACEMENT_ACTIONS as readonly string[]).includes(action))
        throw usage(
          action === undefined
            ? 'node replacement needs pause, resume or status'
            : `unknown node replacement command '${action}'; commands: ${REPLACEMENT_ACTIONS.join(', ')}`,
        );
      if (o.reason !== undefined && action !== 'pause') throw usage(`--reason goes with node replacement pause, not ${action}`);
      const c =
        action === 'pause'
          ? await client.nodes.replacement.pause(o.reason)
          : action === 'resume'
            ? await client.nodes.replacement.resume()
            : await client.nodes.replacement.get();
      if (o.json) print(io, c);
      else io.stdout.write(`${describeReplacement(c)}\n`);
      return 0;
    }
  }
}

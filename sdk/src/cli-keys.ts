/** `strata keys`: a namespace's keys in key order, streamed a page at a time (StrataClient.keys). */
import { UsageError, type CliIo } from './cli-workflow.js';
import type { StrataClient } from './client.js';
import type { BoundInclusion, ListedKey } from './listing.js';

export const KEYS_USAGE = `usage: strata keys [--prefix <p>] [--start <key>] [--end <key>] [--inclusive start|end|both|none]
                   [--limit <n>] [-l|--long] [--json] [--ns <namespace>]

Prints the namespace's keys in key order (UTF-8 bytes), one per line, fetching a page at a time. Never a deleted,
expired or invalidated key; keys written or deleted while it runs may or may not be printed.
  --prefix <p>         only keys starting with it
  --start <key>        lower bound; --end <key>: upper bound
  --inclusive <which>  bounds in the range: start (default: start <= key < end), end, both or none
  --limit <n>          stop after n keys
  -l, --long           size, version, expiry and the tiers holding each key, tab-separated
  --json               one JSON object per line (with the same facts as --long)`;

export const KEYS_OPTIONS = ['ns', 'prefix', 'start', 'end', 'inclusive', 'limit', 'long', 'json'] as const;

const INCLUSIONS: readonly string[] = ['start', 'end', 'both', 'none'];

export interface KeysValues {
  prefix?: string | undefined;
  start?: string | undefined;
  end?: string | undefined;
  inclusive?: string | undefined;
  limit?: number | undefined;
  long?: boolean | undefined;
  json?: boolean | undefined;
}

function longLine(k: ListedKey): string {
  const expires = k.expiresAt ? k.expiresAt.toISOString() : 'never';
  return [k.key, String(k.size ?? ''), String(k.version ?? ''), expires, (k.tiers ?? []).join(',')].join('\t');
}

export async function keysCommand(client: StrataClient, v: KeysValues, io: CliIo): Promise<number> {
  if (v.inclusive !== undefined && !INCLUSIONS.includes(v.inclusive))
    throw new UsageError(`--inclusive is one of ${INCLUSIONS.join(', ')}, not '${v.inclusive}'`, undefined, 'keys');
  const detailed = v.long === true || v.json === true;
  const opts = {
    prefix: v.prefix,
    start: v.start,
    end: v.end,
    inclusive: v.inclusive as BoundInclusion | undefined,
    // Pages no larger than what is wanted: `--limit 5` reads one page of five.
    limit: v.limit !== undefined ? Math.min(v.limit, 1000) : 1000,
  };
  let n = 0;
  const keys: AsyncIterable<string | ListedKey> = detailed ? client.keys({ ...opts, metadata: true }) : client.keys(opts);
  for await (const k of keys) {
    const item: ListedKey = typeof k === 'string' ? { key: k } : k;
    io.stdout.write(`${v.json ? JSON.stringify(item) : v.long ? longLine(item) : item.key}\n`);
    if (v.limit !== undefined && ++n >= v.limit) break;
  }
  return 0;
}

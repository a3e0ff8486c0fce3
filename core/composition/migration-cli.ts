/**
 * Ring and migration steps from the command line (the same steps Step Functions will call). Output: JSON, one
 * object per line (events while a plan runs).
 *
 *   export STRATA_NODE_SECRET=...                       # the fleet secret (node calls)
 *   node --import tsx core/composition/migration-cli.ts --store file:.strata-data/ring ring init --node n1=http://127.0.0.1:7071 ...
 *   node --import tsx core/composition/migration-cli.ts --store s3://bucket/strata/ring scale-out --id n4 --url http://10.0.1.7:7070 --mode incremental --rate 33554432
 *
 * Commands:
 *   ring show | ring push | ring init --node ID=URL... [--ranges-per-node N]
 *   plan scale-out --id ID --url URL [--mode incremental|parallel] [--sources a,b]
 *   plan scale-in --id ID [--mode incremental|parallel]
 *   run PLAN [--rate BYTES_PER_S] [--grace-ms MS]
 *   scale-out --id ID --url URL [--mode ...] [--rate ...] [--grace-ms ...]     (plan + run)
 *   scale-in --id ID [--mode ...] [--rate ...]                                   (plan + run)
 *   prepare SESSION | stream SESSION [--rate ...] [--max-ms MS] | publish SESSION... | cleanup SESSION [--force]
 *   rollback SESSION | rollback-plan PLAN | finish PLAN | cleanup-due PLAN | status PLAN
 * Any command takes --wait-for-go: print {"event":"ready"}, then run when a line arrives on stdin.
 */
import { initialRing } from '../ring/document.js';
import { casStoreFromUri, RingStore } from '../ring/store.js';
import { Migrator, type MigrationMode } from '../nodes/migration.js';
import { NodeClient } from '../nodes/node-client.js';

interface Args {
  positional: string[];
  flags: Map<string, string[]>;
}

const BOOLEAN_FLAGS = new Set(['wait-for-go', 'force']);

function parseArgs(argv: string[]): Args {
  const positional: string[] = [];
  const flags = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    const value =
      eq > 0 ? a.slice(eq + 1) : !BOOLEAN_FLAGS.has(name) && argv[i + 1] && !argv[i + 1]!.startsWith('--') ? argv[++i]! : 'true';
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { positional, flags };
}

function print(o: unknown): void {
  process.stdout.write(JSON.stringify(o) + '\n');
}

export async function main(argv: string[]): Promise<void> {
  const { positional, flags } = parseArgs(argv);
  const flag = (n: string) => flags.get(n)?.[0];
  const num = (n: string) => (flag(n) === undefined ? undefined : Number(flag(n)));
  const storeUri = flag('store') ?? process.env.STRATA_RING_STORE;
  if (!storeUri) throw new Error('--store (or STRATA_RING_STORE) is required');
  const cas = casStoreFromUri(storeUri, flag('s3-endpoint') ?? process.env.AWS_ENDPOINT_URL_S3);
  const ring = new RingStore(cas);
  const secret = process.env.STRATA_NODE_SECRET ?? '';
  const client = new NodeClient({ secret, timeoutMs: 5000 });
  const migrator = new Migrator({
    ring,
    docs: cas,
    client,
    onEvent: (e) => print({ event: e.type, at: e.at, ...('session' in e ? { session: e.session } : { plan: e.plan }) }),
    onWarning: (m) => print({ warning: m }),
  });
  const mode = (flag('mode') ?? 'incremental') as MigrationMode;
  const runOpts = {
    ...(num('rate') ? { rateBytesPerSec: num('rate')! } : {}),
    ...(num('grace-ms') !== undefined ? { graceMs: num('grace-ms')! } : {}),
  };
  const [cmd, sub, ...rest] = positional;
  if (flag('wait-for-go') === 'true') {
    // Started ahead of time (modules loaded, clients made); the command runs when a line arrives on stdin.
    print({ event: 'ready' });
    await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
    process.stdin.pause();
  }
  try {
    switch (cmd) {
      case 'ring': {
        if (sub === 'show') print(await ring.load());
        else if (sub === 'init') {
          const nodes = (flags.get('node') ?? []).map((s) => {
            const i = s.indexOf('=');
            return { id: s.slice(0, i), url: s.slice(i + 1) };
          });
          const doc = await ring.create(initialRing(nodes, num('ranges-per-node') ?? 1));
          await migrator.push(doc, []);
          print(doc);
        } else if (sub === 'push') {
          const doc = await ring.load();
          if (!doc) throw new Error('no ring document');
          await migrator.push(doc, []);
          print({ pushed: doc.version });
        } else throw new Error('ring show | push | init');
        break;
      }
      case 'plan': {
        const id = flag('id');
        if (!id) throw new Error('--id is required');
        if (sub === 'scale-out')
          print(
            await migrator.planScaleOut({
              target: { id, url: flag('url') ?? '' },
              mode,
              ...(flag('sources') ? { sources: flag('sources')!.split(',') } : {}),
            }),
          );
        else if (sub === 'scale-in') print(await migrator.planScaleIn({ node: id, mode }));
        else throw new Error('plan scale-out | scale-in');
        break;
      }
      case 'scale-out':
      case 'scale-in': {
        const id = flag('id');
        if (!id) throw new Error('--id is required');
        const plan =
          cmd === 'scale-out'
            ? await migrator.planScaleOut({ target: { id, url: flag('url') ?? '' }, mode })
            : await migrator.planScaleIn({ node: id, mode });
        print({ event: 'plan', plan });
        print({ event: 'done', plan: await migrator.run(plan.id, runOpts) });
        break;
      }
      case 'run':
        print({ event: 'done', plan: await migrator.run(need(sub, 'PLAN'), runOpts) });
        break;
      case 'prepare':
        print(await migrator.prepare(need(sub, 'SESSION')));
        break;
      case 'stream':
        print(await migrator.stream(need(sub, 'SESSION'), { ...runOpts, ...(num('max-ms') ? { maxMs: num('max-ms')! } : {}) }));
        break;
      case 'publish':
        print(await migrator.publish([need(sub, 'SESSION'), ...rest], runOpts));
        break;
      case 'cleanup':
        print(await migrator.cleanup(need(sub, 'SESSION'), { force: flag('force') === 'true' }));
        break;
      case 'rollback':
        print(await migrator.rollback(need(sub, 'SESSION')));
        break;
      case 'rollback-plan':
        print(await migrator.rollbackPlan(need(sub, 'PLAN')));
        break;
      case 'finish':
        print(await migrator.finish(need(sub, 'PLAN')));
        break;
      case 'cleanup-due':
        print({ cleaned: await migrator.cleanupDue(need(sub, 'PLAN')) });
        break;
      case 'status': {
        const plan = await migrator.plan(need(sub, 'PLAN'));
        print({ plan, sessions: await Promise.all(plan.sessions.map((s) => migrator.session(s))) });
        break;
      }
      default:
        throw new Error(`unknown command '${cmd ?? ''}' (see the header of core/composition/migration-cli.ts)`);
    }
  } finally {
    await client.close();
    cas.close?.();
  }
}

function need(v: string | undefined, what: string): string {
  if (!v) throw new Error(`${what} is required`);
  return v;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  });
}

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseRingDocument } from '../../core/ring/document.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { ROOT } from '../helpers/services.js';
import { entry, localFleet, SECRET, tempDir } from './warm-fixtures.js';

const run = promisify(execFile);

describe('ring CLI (separate processes sharing a file CAS store)', () => {
  const fleet = localFleet();
  const tmp = tempDir('strata-cli-');
  const store = `file:${join(tmp.dir, 'ring')}`;
  const cli = async (...args: string[]) => {
    const env: NodeJS.ProcessEnv = { ...process.env, STRATA_NODE_SECRET: SECRET };
    delete env.NODE_OPTIONS;
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'core/composition/migration-cli.ts'), '--store', store, ...args],
      { cwd: ROOT, env },
    );
    return stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  /** The command's result: its last line (events come before it). */
  const result = async (...args: string[]) => (await cli(...args)).at(-1)!;

  afterAll(async () => {
    await fleet.closeAll();
    tmp.remove();
  });

  it('creates a ring, scales out with the plan steps, and the data follows', async () => {
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((id) => fleet.launch(id)));
    const doc = await result('ring', 'init', '--node', `a=${a!.url}`, '--node', `b=${b!.url}`, '--ranges-per-node', '2');
    expect(doc).toMatchObject({ version: 1, nodes: [{ id: 'a' }, { id: 'b' }] });
    const ring = new RingStore(new FileCasStore(join(tmp.dir, 'ring')));
    const tier = new WarmTier({ ring: new RingView({ store: ring, refreshIntervalMs: 0 }), secret: SECRET });
    const keys = Array.from({ length: 2000 }, (_, i) => `k${i}`);
    await tier.putMany(
      'cli',
      keys.map((k, i) => ({ key: k, entry: entry(i + 1, `v${i}`) })),
    );

    const planned = await cli('plan', 'scale-out', '--id', 'c', '--url', c!.url, '--mode', 'incremental');
    expect(planned.filter((l) => l.event === 'planned')).toHaveLength(2);
    const plan = planned.at(-1) as { id: string; sessions: string[] };
    expect(plan.sessions).toHaveLength(2);
    // Step by step, as a state machine would call them.
    for (const sid of plan.sessions) {
      await cli('prepare', sid);
      const streamed = await cli('stream', sid, '--rate', '10000000');
      expect(streamed.at(-1)).toMatchObject({ done: true, session: { state: 'streamed' } });
      await cli('publish', sid, '--grace-ms', '0');
    }
    const finished = await result('finish', plan.id);
    expect(finished).toMatchObject({ state: 'done' });
    const cleaned = await result('cleanup-due', plan.id);
    expect(cleaned).toEqual({ cleaned: 2 });
    const status = await result('status', plan.id);
    expect((status as { sessions: { state: string }[] }).sessions.map((s) => s.state)).toEqual(['cleaned', 'cleaned']);

    const final = parseRingDocument(await ring.load());
    expect(final.nodes.find((n) => n.id === 'c')!.state).toBe('NORMAL');
    const got = await tier.getMany('cli', keys);
    expect(got.every((e, i) => e?.value.toString() === `v${i}`)).toBe(true);
    const counts = await Promise.all([a!, b!, c!].map(async (n) => (await tier.client.stats(n.url)).keys));
    expect(counts.reduce((x, y) => x + y, 0)).toBe(2000);
    expect(counts[2]).toBeGreaterThan(300);
    await tier.close();
  }, 300_000);

  it('fails with a message for a bad command', async () => {
    await expect(cli('nonsense')).rejects.toMatchObject({ stderr: expect.stringContaining("unknown command 'nonsense'") });
  });
});

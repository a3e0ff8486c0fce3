/**
 * A cache node loses its data volume while it runs (issue 23, item 8): its data directory is deleted under it. LMDB
 * and the write journal keep their unlinked files open, so without a check the node would go on serving and
 * acknowledging writes into files that no longer exist, and come back empty at its next restart. With the check
 * (cachenode/src/volume-watch.ts) it refuses everything with 503 VOLUME_LOST within a second, reports unhealthy,
 * and exits with status 3, which systemd does not restart: the failure detector marks it DOWN and ReplaceNode puts
 * a node with a fresh volume in its place.
 *
 * First one real node on its own, then `npm start`'s machinery (scripts/start-local.ts: four local nodes, the
 * health checker, ReplaceNode) under read/write load through the HTTP API: zero acknowledged writes lost, zero
 * stale reads, errors only between the loss and the fence, and the fleet back to four NORMAL nodes by itself.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeClient } from '../../core/nodes/node-client.js';
import { PROTOCOL_VERSION } from '../../core/nodes/protocol.js';
import { SECRET_HEADER } from '../../core/nodes/wire.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { StrataClient } from '../../sdk/src/index.js';
import { LocalFleet } from '../../core/nodes/local-fleet.js';
import { entry, eventually, SECRET, singleNodeRing, tempDir } from './warm-fixtures.js';

/** GET `path` with the secret: status and JSON body. */
function rawGet(url: string, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url + path, { headers: { [SECRET_HEADER]: SECRET } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Past the fence, errors may go on for one refresh of the API server's ring (5 s) and a request's time. */
const WINDOW_SLACK_MS = 7_000;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

describe('a cache node whose data volume is lost', () => {
  it('refuses every request with 503 VOLUME_LOST, reports unhealthy, and exits 3 (not restarted by systemd)', async () => {
    const root = tempDir('strata-volume-node-');
    const fleet = new LocalFleet({ rootDir: root.dir, secret: SECRET, env: { STRATA_NODE_VOLUME_CHECK_MS: '100' } });
    const client = new NodeClient({ secret: SECRET });
    try {
      const n = await fleet.launch('v1');
      await client.pushRing(n.url, singleNodeRing('v1', n.url));
      const ringVersion = 1;
      await client.put(n.url, 'ns', 'k', entry(1, 'before the loss'), ringVersion);
      expect((await client.health(n.url)).protocol).toBe(PROTOCOL_VERSION);

      const dir = join(root.dir, 'v1');
      rmSync(dir, { recursive: true, force: true });
      // Within a check: key requests are refused (the value is still readable from the unlinked files, but a write
      // there would be acknowledged and then lost), health says why.
      await eventually(async () => (await rawGet(n.url, '/v1/kv/ns/k')).status === 503, 2000, 'VOLUME_LOST');
      const refused = await rawGet(n.url, '/v1/kv/ns/k');
      expect(refused.body).toMatchObject({ error: { code: 'VOLUME_LOST' } });
      expect((refused.body.error as { message: string }).message).toMatch(/data directory .* is gone/);
      const health = await rawGet(n.url, '/healthz');
      expect(health).toMatchObject({ status: 503, body: { status: 'volume-lost', nodeId: 'v1' } });
      await expect(client.get(n.url, 'ns', 'k', ringVersion)).rejects.toThrow(/503 VOLUME_LOST/);
      // Then it is gone, with the status the systemd units do not restart (RestartPreventExitStatus=2 3).
      await eventually(() => !fleet.running('v1'), 5000, 'the node exiting');
      expect(await fleet.kill('v1')).toBe(3);
      expect(fleet.stderr('v1')).toMatch(/data volume lost/);
    } finally {
      await client.close();
      await fleet.close();
      root.remove();
    }
  }, 300_000);
});

describe('a lost volume in a local fleet under load (npm start, four nodes)', () => {
  let child: ChildProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'strata-lost-volume-'));
  let output = '';

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops the node, marks it DOWN, replaces it: four NORMAL nodes, nothing lost or stale, errors only until the fence', async () => {
    const port = await freePort();
    child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start-local.ts'], {
      env: {
        ...process.env,
        PORT: String(port),
        STRATA_LOCAL_DIR: dir,
        STRATA_LOCAL_NODES: '4',
        REDIS_URL: '',
        STRATA_REDIS_URL: '',
        STRATA_S3_BUCKET: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await eventually(
      () => {
        if (child!.exitCode !== null) throw new Error(`exited ${child!.exitCode}:\n${output}`);
        return output.includes('Strata is serving');
      },
      60_000,
      'npm start serving',
    );
    const strata = new StrataClient({ endpoint: `http://127.0.0.1:${port}`, namespace: 'lost', retries: 0 });
    expect((await strata.nodes.list()).nodes).toHaveLength(4);

    // Closed-loop load: every acknowledged write raises its key's floor; a read below the floor is stale.
    const KEYS = 300;
    const acked = new Map<string, number>();
    for (let i = 0; i < KEYS; i++) acked.set(`k${i}`, (await strata.put(`k${i}`, `v${i} first`)).version);
    const stale: string[] = [];
    const errors: { at: number; message: string }[] = [];
    let ops = 0;
    let running = true;
    const loop = async (w: number) => {
      for (let i = 0; running; i++) {
        const key = `k${(w * 7919 + i * 31) % KEYS}`;
        try {
          if (i % 2 === 0) {
            const { version } = await strata.put(key, `${key} by ${w} #${i}`);
            acked.set(key, Math.max(acked.get(key) ?? 0, version));
          } else {
            const floor = acked.get(key) ?? 0;
            const got = await strata.get(key);
            if ((got?.version ?? 0) < floor) stale.push(`${key}: read ${got?.version} after ${floor} was acknowledged`);
          }
          ops++;
        } catch (e) {
          errors.push({ at: Date.now(), message: e instanceof Error ? e.message : String(e) });
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };
    const loops = Array.from({ length: 6 }, (_, w) => loop(w));
    try {
      await eventually(() => ops > 300, 30_000, 'load before the loss');
      expect(errors).toEqual([]);

      const nodeDir = join(dir, '_warm', 'nodes', 'n2');
      const pid = Number(
        execFileSync('pgrep', ['-f', nodeDir + ' '])
          .toString()
          .trim()
          .split('\n')[0],
      );
      const lostAt = Date.now();
      rmSync(nodeDir, { recursive: true, force: true });

      // The node stops by itself (nobody kills it), within its check period and the second it answers 503.
      await eventually(
        () => {
          try {
            process.kill(pid, 0);
            return false;
          } catch {
            return true;
          }
        },
        10_000,
        'the node exiting',
      );
      await eventually(() => /health check: marked cache node n2 DOWN/.test(output), 60_000, 'n2 marked DOWN');
      // The fence: the DOWN mark's time (the log line carries it, as the ring does until n2 is replaced) plus the
      // ring's lease, after which writers skip n2.
      const mark = JSON.parse(/health check: marked cache node n2 DOWN (\{.*\})/.exec(output)![1]!) as { at: number };
      const leaseMs = (await new RingStore(new FileCasStore(join(dir, '_warm', 'ring'))).load())!.leaseMs ?? 15_000;
      const fenceAt = mark.at + leaseMs;

      // ReplaceNode, started by the detection: four nodes, n2 gone, all NORMAL, without a human.
      let runs = await strata.workflows.list({ workflow: 'replace-node' });
      for (let t = Date.now(); runs[0]?.status !== 'SUCCEEDED' && Date.now() - t < 120_000;) {
        await new Promise((r) => setTimeout(r, 500));
        runs = await strata.workflows.list({ workflow: 'replace-node' });
      }
      expect(runs[0]).toMatchObject({ workflow: 'replace-node', status: 'SUCCEEDED' });
      const nodes = (await strata.nodes.list()).nodes;
      expect(nodes).toHaveLength(4);
      expect(nodes.some((n) => n.id === 'n2')).toBe(false);
      expect(nodes.every((n) => n.state === 'NORMAL')).toBe(true);

      // Load goes on over the replaced fleet without errors once the window below has closed (the replacement may
      // finish before n2's lease has run out).
      while (Date.now() < fenceAt + WINDOW_SLACK_MS) await new Promise((r) => setTimeout(r, 100));
      const errorsBefore = errors.length;
      const opsBefore = ops;
      await eventually(() => ops > opsBefore + 300, 30_000, 'load after the replacement');
      expect(errors.slice(errorsBefore)).toEqual([]);

      // Errors only inside the detection window: from the loss until writers skip the node (the fence).
      const late = errors.filter((e) => e.at < lostAt || e.at > fenceAt + WINDOW_SLACK_MS);
      expect(late).toEqual([]);
    } finally {
      running = false;
      await Promise.all(loops);
    }
    expect(stale).toEqual([]);
    // Every acknowledged write reads back at its version or newer.
    const lost: string[] = [];
    for (const [key, version] of acked) {
      const got = await strata.get(key);
      if ((got?.version ?? 0) < version) lost.push(`${key}: ${got?.version} < ${version}`);
    }
    expect(lost).toEqual([]);
  }, 300_000);
});

/**
 * What cache nodes share through the ring store instead of an HTTP call or Secrets Manager (ring/node-reports.ts),
 * with real daemon processes on both stores: a folder (`file:`) and S3 (LocalStack):
 *  - each node writes its /stats body to nodes/<id>/stats.json soon after start, again every interval, and once
 *    more when it stops; an unreachable store never stops the node;
 *  - the report is the daemon's heartbeat: one paused with SIGSTOP fails the AWS detector's probe once it is stale;
 *  - with STRATA_NODE_SECRET_FROM_RING a node waits (saying so) until the fleet secret exists, then serves with
 *    it; concurrent creators of that secret end with one.
 * LocalStack checks no IAM: the per-instance key rule is tested on the synthesized policy
 * (test/infra/fleet-ring-access.test.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { ensureFleetSecret } from '../../core/ring/fleet-secret.js';
import { withReportHeartbeat } from '../../core/nodes/heartbeat-probe.js';
import type { RingNode } from '../../core/ring/document.js';
import { readNodeReport } from '../../core/ring/node-report-reader.js';
import { FLEET_SECRET_KEY, nodeStatsKey, type NodeStatsReport } from '../../core/ring/node-reports.js';
import { casStoreFromUri, type CasStore } from '../../core/ring/store.js';
import { NodeClient, NodeRequestError } from '../../core/nodes/node-client.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';
import { entry, eventually, localFleet, SECRET, singleNodeRing, tempDir } from './warm-fixtures.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface StoreKind {
  name: 'file' | 's3';
  /** STRATA_NODE_RING_STORE and the node settings that reach it. */
  nodeEnv(): Record<string, string>;
  /** The same store, as the test reads it. */
  cas(): CasStore;
}

const s3Bucket = uniqueName('strata-ring-reports').toLowerCase();
let s3: S3Client;
const folder = tempDir('strata-ring-reports-');

const KINDS: StoreKind[] = [
  {
    name: 'file',
    nodeEnv: () => ({ STRATA_NODE_RING_STORE: `file:${folder.dir}` }),
    cas: () => casStoreFromUri(`file:${folder.dir}`),
  },
  {
    name: 's3',
    nodeEnv: () => ({ STRATA_NODE_RING_STORE: `s3://${s3Bucket}/strata-ring`, STRATA_NODE_S3_ENDPOINT: testS3Endpoint() }),
    cas: () => casStoreFromUri(`s3://${s3Bucket}/strata-ring`, testS3Endpoint()),
  },
];

beforeAll(async () => {
  s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
  await s3.send(new CreateBucketCommand({ Bucket: s3Bucket }));
});

afterAll(async () => {
  for (;;) {
    const list = await s3.send(new ListObjectsV2Command({ Bucket: s3Bucket }));
    const keys = (list.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length === 0) break;
    await s3.send(new DeleteObjectsCommand({ Bucket: s3Bucket, Delete: { Objects: keys } }));
  }
  await s3.send(new DeleteBucketCommand({ Bucket: s3Bucket }));
  s3.destroy();
  folder.remove();
});

async function readReport(cas: CasStore, reportId: string): Promise<NodeStatsReport | undefined> {
  const got = await cas.get(nodeStatsKey(reportId));
  return got ? (JSON.parse(got.body) as NodeStatsReport) : undefined;
}

describe.each(KINDS)('statistics reports in the ring store ($name, real processes)', (kind) => {
  const client = new NodeClient({ secret: SECRET });
  afterAll(() => client.close());

  it('writes the /stats body soon after start, refreshes it every interval, and a last one on a graceful stop', async () => {
    // On S3 the report is keyed like on EC2: by the node role session's aws:userid (`<role id>:<node id>`).
    const prefix = kind.name === 's3' ? 'AROAEXAMPLEROLEID0001:' : '';
    const reportId = `${prefix}reporter`;
    const statsId: Record<string, string> = kind.name === 's3' ? { STRATA_NODE_STATS_ID: reportId } : {};
    const fleet = localFleet({
      env: { ...kind.nodeEnv(), STRATA_NODE_STATS_INTERVAL_MS: '250', STRATA_NODE_WARMUP_MS: '0', ...statsId },
    });
    const cas = kind.cas();
    try {
      const n = await fleet.launch('reporter');
      let first: NodeStatsReport | undefined;
      await eventually(async () => !!(first = await readReport(cas, reportId)), 3000, 'the first report');
      expect(first).toMatchObject({
        nodeId: 'reporter',
        intervalMs: 250,
        stats: { nodeId: 'reporter', keys: 0, ringVersion: 0 },
      });
      expect(Math.abs(first!.at - Date.now())).toBeLessThan(5000);
      // The report is the node's /stats body (its own counters included), and the readers find it fresh.
      expect(Object.keys(first!.stats).sort()).toEqual(Object.keys(await client.stats(n.url)).sort());
      await expect(readNodeReport(cas, 'reporter', Date.now(), prefix)).resolves.toMatchObject({ node: 'reporter', fresh: true });

      await client.pushRing(n.url, singleNodeRing('reporter', n.url));
      await client.put(n.url, 'r', 'k', entry(1, 'reported'), 1);
      let later: NodeStatsReport | undefined;
      const countsTheKey = async () => ((later = await readReport(cas, reportId))?.stats.keys ?? 0) === 1;
      await eventually(countsTheKey, 3000, 'a report counting the new key');
      expect(later!.at).toBeGreaterThan(first!.at);
      expect(later!.stats).toMatchObject({ ringVersion: 1, statsReports: { failed: 0 } });
      // Counted before this one was written: the reports before it.
      expect((later!.stats.statsReports as { written: number }).written).toBeGreaterThanOrEqual(1);

      await expect(fleet.stop('reporter')).resolves.toBe(0);
      const last = (await readReport(cas, reportId))!;
      expect(last.at).toBeGreaterThanOrEqual(later!.at);
      expect(last.stats).toMatchObject({ stopped: true, keys: 1 });
    } finally {
      cas.close?.();
      await fleet.closeAll();
    }
  });
});

describe('statistics reports when the store is unreachable (real process)', () => {
  it('keeps serving; failures are counted in /stats and logged once per series, not per attempt', async () => {
    const unreachable = { STRATA_NODE_RING_STORE: 's3://nowhere/strata-ring', STRATA_NODE_S3_ENDPOINT: 'http://127.0.0.1:1' };
    const fast = { STRATA_NODE_STATS_INTERVAL_MS: '100', STRATA_NODE_RING_POLL_MS: '0', STRATA_NODE_WARMUP_MS: '0' };
    const fleet = localFleet({ env: { ...unreachable, ...fast } });
    const client = new NodeClient({ secret: SECRET });
    try {
      const n = await fleet.launch('cut-off');
      let counters: { written: number; failed: number; failingInARow: number; lastError: string | null } | undefined;
      const failedTwelve = async () =>
        ((counters = (await client.stats(n.url)).statsReports as typeof counters)?.failed ?? 0) >= 12;
      await eventually(failedTwelve, 10_000, '12 failed reports');
      expect(counters).toMatchObject({ written: 0, lastError: expect.any(String) });
      await client.pushRing(n.url, singleNodeRing('cut-off', n.url));
      await client.put(n.url, 'r', 'k', entry(1, 'still serving'), 1);
      await expect(client.get(n.url, 'r', 'k', 1)).resolves.toMatchObject({ header: { version: 1 } });
      const lines = fleet
        .stderr('cut-off')
        .split('\n')
        .filter((l) => l.includes('could not write the stats report'));
      // The first failure, then one line per 10 more: 12 or more failures make 2 lines, not 12.
      expect(lines.length).toBeGreaterThanOrEqual(1);
      expect(lines.length).toBeLessThanOrEqual(Math.ceil(counters!.failed / 10) + 1);
      expect(fleet.running('cut-off')).toBe(true);
    } finally {
      await client.close();
      await fleet.closeAll();
    }
  });
});

describe("the reports as the daemon's heartbeat (real process, core/nodes/heartbeat-probe.ts)", () => {
  it('a daemon paused with SIGSTOP on an instance EC2 still calls healthy fails the probe once its report is stale', async () => {
    const dir = tempDir('strata-heartbeat-');
    const fleet = localFleet({
      env: { STRATA_NODE_RING_STORE: `file:${dir.dir}`, STRATA_NODE_STATS_INTERVAL_MS: '200', STRATA_NODE_WARMUP_MS: '0' },
    });
    const cas = casStoreFromUri(`file:${dir.dir}`);
    // What EC2 answers for the instance: running, both checks ok (EC2 cannot see the process).
    const ec2 = { many: async (nodes: readonly RingNode[]) => new Map(nodes.map((n) => [n.id, 'ok' as const])) };
    const probe = withReportHeartbeat(ec2, { cas });
    const node = (id: string): RingNode => ({ id, url: 'http://127.0.0.1:1', state: 'NORMAL', addedAt: '2026-01-01' });
    try {
      await fleet.launch('hb');
      await eventually(async () => (await readNodeReport(cas, 'hb', Date.now())).fresh, 5000, 'the first report');
      expect((await probe.many([node('hb')])).get('hb')).toBe('ok');

      process.kill(fleet.pid('hb')!, 'SIGSTOP');
      try {
        // Three intervals (600 ms) without a report: the probe says down, naming the silence.
        let answer: unknown;
        const down = async () => {
          answer = (await probe.many([node('hb')])).get('hb');
          return typeof answer === 'object' && (answer as { result: string }).result === 'down';
        };
        await eventually(down, 10_000, 'the paused daemon found');
        expect((answer as { detail: string }).detail).toMatch(/healthy by EC2, but the daemon is silent: stats report .* old/);
        // A node that never wrote a report (reports turned off) is no evidence: EC2's answer stands.
        expect((await probe.many([node('never-reported')])).get('never-reported')).toBe('ok');
      } finally {
        process.kill(fleet.pid('hb')!, 'SIGCONT');
      }
      // Resumed, it reports again, and the probe passes.
      await eventually(async () => (await probe.many([node('hb')])).get('hb') === 'ok', 10_000, 'the resumed daemon passing');
    } finally {
      cas.close?.();
      await fleet.closeAll();
      dir.remove();
    }
  });
});

/** A daemon started by hand: LocalFleet always hands its nodes a secret, these must find theirs in the ring store. */
interface StartedNode {
  child: ChildProcess;
  stderr: () => string;
  listening: Promise<number>;
  exited: Promise<number | null>;
}

function startNode(env: Record<string, string>, nodeId: string): StartedNode {
  const data = tempDir(`strata-secret-node-${nodeId}-`);
  const inherited: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '' };
  delete inherited.STRATA_NODE_SECRET;
  const args = ['--import', 'tsx', 'cachenode/src/main.ts', '--data-dir', data.dir, '--port', '0', '--host', '127.0.0.1'];
  args.push('--node-id', nodeId);
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: { ...inherited, STRATA_NODE_WARMUP_MS: '0', STRATA_NODE_STATS_INTERVAL_MS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  void exited.then(() => data.remove());
  const listening = new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const ev = JSON.parse(line) as { event: string; port?: number };
      if (ev.event === 'listening') resolve(ev.port!);
    });
    void exited.then((code) => reject(new Error(`exited ${code} before listening: ${stderr}`)));
  });
  listening.catch(() => undefined);
  return { child, stderr: () => stderr, listening, exited };
}

describe.each(KINDS)('fleet secret from the ring store ($name, real processes)', (kind) => {
  it("a node waits, saying where and why, until the secret exists; concurrent creators end with one secret, the node's", async () => {
    const prefix = uniqueName('secret');
    const uri = kind.name === 'file' ? `file:${join(folder.dir, prefix)}` : `s3://${s3Bucket}/${prefix}`;
    const endpoint: Record<string, string> = kind.name === 's3' ? { STRATA_NODE_S3_ENDPOINT: testS3Endpoint() } : {};
    const node = startNode({ STRATA_NODE_RING_STORE: uri, STRATA_NODE_SECRET_FROM_RING: '1', ...endpoint }, 'waiting');
    let listening = false;
    void node.listening.then(
      () => (listening = true),
      () => undefined,
    );
    try {
      await eventually(
        () => node.stderr().includes('waiting for the fleet secret in the ring store'),
        15_000,
        'the waiting line',
      );
      const waitingLine = node
        .stderr()
        .split('\n')
        .find((l) => l.includes('waiting for the fleet secret'))!;
      const line = JSON.parse(waitingLine) as Record<string, unknown>;
      expect(line).toMatchObject({ store: uri, key: FLEET_SECRET_KEY, reason: expect.stringMatching(/does not exist yet/) });
      await new Promise((r) => setTimeout(r, 700));
      expect(listening).toBe(false);

      // Two step containers and an API container starting together: each on its own store client.
      const stores = Array.from({ length: 6 }, () => casStoreFromUri(uri, kind.name === 's3' ? testS3Endpoint() : undefined));
      const outcomes = await Promise.all(stores.map((cas) => ensureFleetSecret(cas)));
      for (const cas of stores) cas.close?.();
      expect(outcomes.filter((o) => o.created)).toHaveLength(1);
      const secret = outcomes[0]!.secret;
      expect(outcomes.every((o) => o.secret === secret)).toBe(true);

      const port = await node.listening;
      const url = `http://127.0.0.1:${port}`;
      const right = new NodeClient({ secret });
      const wrong = new NodeClient({ secret: SECRET });
      try {
        await expect(right.stats(url)).resolves.toMatchObject({ nodeId: 'waiting' });
        await expect(wrong.stats(url)).rejects.toBeInstanceOf(NodeRequestError);
        await expect(wrong.stats(url)).rejects.toMatchObject({ status: 401 });
      } finally {
        await Promise.all([right.close(), wrong.close()]);
      }
      expect(node.stderr()).toContain('fleet secret found in the ring store');
    } finally {
      node.child.kill('SIGTERM');
      await node.exited;
    }
  });
});

describe('fleet secret from the ring store, refused', () => {
  it('exits 2 (no restart) on a stored secret nobody could use, and on a secret given two ways', async () => {
    const dir = tempDir('strata-bad-secret-');
    try {
      await casStoreFromUri(`file:${dir.dir}`).put(FLEET_SECRET_KEY, 'short', null);
      const bad = startNode({ STRATA_NODE_RING_STORE: `file:${dir.dir}`, STRATA_NODE_SECRET_FROM_RING: '1' }, 'bad');
      await expect(bad.exited).resolves.toBe(2);
      expect(bad.stderr()).toContain('is unusable: it must be at least 16 visible ASCII characters');
      const twiceEnv = {
        STRATA_NODE_RING_STORE: `file:${dir.dir}`,
        STRATA_NODE_SECRET_FROM_RING: '1',
        STRATA_NODE_SECRET: SECRET,
      };
      const twice = startNode(twiceEnv, 'twice');
      await expect(twice.exited).resolves.toBe(2);
      expect(twice.stderr()).toContain('STRATA_NODE_SECRET_FROM_RING excludes STRATA_NODE_SECRET');
    } finally {
      dir.remove();
    }
  });
});

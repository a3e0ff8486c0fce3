/**
 * A fleet in the middle of a rolling upgrade (issue 23, item 7): cache nodes of the previous release running its
 * real code (`git archive` of OLD_BUILD, protocol version 1: no protocol header either way) beside nodes of this
 * working tree (version 2), under concurrent reads and writes from coordinators of this working tree. Reads and
 * writes work, ranges migrate from old nodes to new ones and from new ones to old ones, a ring document carrying a
 * field and a node state neither build knows is followed by every node and by the coordinators, and nothing
 * acknowledged is lost or read stale. Then the version check itself: a node told to accept only this version
 * refuses a caller of the previous one with PROTOCOL_UNSUPPORTED, and a client that accepts only this version
 * refuses an old node the same way.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalFleet } from '../../core/nodes/local-fleet.js';
import { Migrator } from '../../core/nodes/migration.js';
import { NodeClient, ProtocolUnsupportedError } from '../../core/nodes/node-client.js';
import { PROTOCOL_HEADER, PROTOCOL_VERSION } from '../../core/nodes/protocol.js';
import { SECRET_HEADER } from '../../core/nodes/wire.js';
import { initialRing, type RingDocument } from '../../core/ring/document.js';
import { FileCasStore, RING_KEY, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { eventually, localFleet, SECRET, tempDir } from './warm-fixtures.js';
import { summary, Workload } from './warm-workload.js';

/** The previous release's commit (before protocol versions; after lenient ring parsing, df2f06c). */
const OLD_BUILD = process.env.STRATA_OLD_NODE_COMMIT ?? '0a8393e';
const REPO = process.cwd();
const POLL_MS = '200';

/** The old build's files, extracted for real (its own cachenode and core), sharing this checkout's node_modules. */
function extractOldBuild(): { entry: string; remove(): void } | { missing: string } {
  try {
    execFileSync('git', ['cat-file', '-e', `${OLD_BUILD}^{commit}`], { cwd: REPO, stdio: 'ignore' });
  } catch {
    return { missing: `commit ${OLD_BUILD} is not in this checkout (a shallow clone?)` };
  }
  const dir = mkdtempSync(join(tmpdir(), 'strata-old-build-'));
  const paths = ['cachenode', 'core', 'sdk/src/contract.ts', 'package.json', 'tsconfig.base.json', 'tsconfig.json'];
  const tar = execFileSync('git', ['archive', OLD_BUILD, ...paths], { cwd: REPO, maxBuffer: 256 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  return { entry: join(dir, 'cachenode', 'src', 'main.ts'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** GET `path` on a node with the secret and, when given, a protocol header: status and JSON body. */
function rawGet(url: string, path: string, protocol?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { [SECRET_HEADER]: SECRET };
    if (protocol !== undefined) headers[PROTOCOL_HEADER] = protocol;
    const req = request(url + path, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    req.on('error', reject);
    req.end();
  });
}

const old = extractOldBuild();
const missing = 'missing' in old ? old.missing : undefined;
if (missing) console.warn(`warm-mixed-versions: skipped, ${missing}`);
const describeOld = missing ? describe.skip : describe;

describeOld(`a fleet of mixed builds: ${OLD_BUILD} (protocol 1) and this tree (protocol ${PROTOCOL_VERSION})`, () => {
  const oldEntry = 'entry' in old ? old.entry : '';
  const ringDir = tempDir('strata-mixed-ring-');
  const oldRoot = tempDir('strata-mixed-old-');
  const env = { STRATA_NODE_RING_STORE: `file:${ringDir.dir}`, STRATA_NODE_RING_POLL_MS: POLL_MS };
  const oldFleet = new LocalFleet({ rootDir: oldRoot.dir, secret: SECRET, entry: oldEntry, env });
  const newFleet = localFleet({ env });
  const cas = new FileCasStore(ringDir.dir);
  const ringStore = new RingStore(cas);
  const client = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  const urls: Record<string, string> = {};

  afterAll(async () => {
    await client.close();
    await oldFleet.close();
    await newFleet.closeAll();
    oldRoot.remove();
    ringDir.remove();
    if ('remove' in old) old.remove();
  });

  it('serves reads and writes, migrates ranges both ways, and follows a ring of a newer version: nothing lost or stale', async () => {
    const launched = [...(await Promise.all(['n1', 'n2'].map((id) => oldFleet.launch(id)))), await newFleet.launch('n3')];
    for (const n of launched) urls[n.nodeId] = n.url;
    const ring = await ringStore.create(
      initialRing(
        launched.map((n) => ({ id: n.nodeId, url: n.url })),
        2,
      ),
    );
    await Promise.all(launched.map((n) => client.pushRing(n.url, ring)));

    // Each side as the other sees it: the old nodes name no version (read as 1, build unknown).
    expect(await client.health(urls.n1!)).toMatchObject({ status: 'ok', protocol: 1, build: 'unknown' });
    expect(client.protocolOf(urls.n1!)).toBe(1);
    expect(await client.health(urls.n3!)).toMatchObject({ status: 'ok', protocol: PROTOCOL_VERSION, minProtocol: 1 });
    expect((await client.health(urls.n3!)).build).toMatch(/^strata@\d/);

    const w = new Workload(ringStore);
    const migrator = new Migrator({ ring: ringStore, docs: cas, client });
    try {
      await w.load();
      w.start(4);
      await eventually(() => w.ops > 500, 20_000, 'load on the mixed fleet');

      // Old nodes hand ranges to a new one...
      const n4 = await newFleet.launch('n4');
      urls.n4 = n4.url;
      const out = await migrator.planScaleOut({ target: { id: 'n4', url: n4.url }, mode: 'incremental' });
      expect(out.sessions).toHaveLength(3); // one per source: n1 and n2 (old), n3 (new)
      await migrator.run(out.id, { rateBytesPerSec: 4_000_000, graceMs: 200 });
      expect((await client.stats(urls.n4)).keys).toBeGreaterThan(0);

      // ... and a new node drains into old ones (and the other new one).
      const n3Starts = (await ringStore.load())!.ranges.filter((r) => r.owner === 'n3').map((r) => r.start);
      const drain = await migrator.planScaleIn({ node: 'n3', mode: 'incremental' });
      await migrator.run(drain.id, { rateBytesPerSec: 4_000_000, graceMs: 200 });
      const after = (await ringStore.load())!;
      expect(after.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n4']);
      expect(after.ranges.some((r) => r.pending)).toBe(false);
      const view = new RingView({ initial: after, refreshIntervalMs: 0 });
      const heirs = new Set(n3Starts.map((p) => view.current()!.route(p).owner.id));
      view.close();
      expect([...heirs].filter((id) => id === 'n1' || id === 'n2').length).toBeGreaterThan(0);

      // A writer of a newer version adds a field and a node state no build here knows. Written raw: this build's
      // writers refuse both (strict schema), its readers keep them.
      const cur = (await cas.get(RING_KEY))!;
      const doc = JSON.parse(cur.body) as RingDocument & Record<string, unknown>;
      const future = {
        ...doc,
        version: doc.version + 1,
        updatedAt: new Date().toISOString(),
        placement: { spreadBy: 'rack' },
        nodes: [
          ...doc.nodes,
          { id: 'n9', url: 'http://127.0.0.1:9', state: 'WARMING', addedAt: new Date().toISOString(), rack: 'r2' },
        ],
      };
      await cas.put(RING_KEY, JSON.stringify(future), cur.etag);
      const coordinatorView = new RingView({ store: ringStore, refreshIntervalMs: 100 });
      try {
        for (const id of ['n1', 'n2', 'n4']) {
          await eventually(
            async () => (await client.getRing(urls[id]!))?.version === future.version,
            10_000,
            `${id} installing the ring with an unknown state`,
          );
        }
        await eventually(() => coordinatorView.current()?.doc.version === future.version, 10_000, 'a coordinator following it');
        const n9 = coordinatorView.current()!.doc.nodes.find((n) => n.id === 'n9');
        expect(n9).toMatchObject({ state: 'WARMING', rack: 'r2' });
      } finally {
        coordinatorView.close();
      }
      const opsBefore = w.ops;
      // The workload's coordinators refresh every second: let them route by the new document for a while.
      await eventually(() => w.ops > opsBefore + 500, 20_000, 'load under the newer ring');
      await new Promise((r) => setTimeout(r, 1500));
      await w.stop();
      expect(summary(w)).toBe(summary({ ...w, errors: [], staleReads: [] } as unknown as Workload));
      expect(w.ops).toBeGreaterThan(1000);
      const v = await w.verify(ringStore);
      expect(v.missing).toEqual([]);
    } finally {
      await w.stop();
      await w.close();
    }
  }, 300_000);

  it('a node that accepts only this version refuses a caller of the previous one, and a strict client an old node', async () => {
    const strictFleet = localFleet({ env: { STRATA_NODE_MIN_PROTOCOL: String(PROTOCOL_VERSION) } });
    try {
      const strict = await strictFleet.launch('s1');
      // A caller of before versioning sends no header: refused, with what the node speaks and what to do.
      const refused = await rawGet(strict.url, '/v1/ownership');
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject({
        error: { code: 'PROTOCOL_UNSUPPORTED' },
        protocol: PROTOCOL_VERSION,
        minProtocol: PROTOCOL_VERSION,
      });
      expect((refused.body.error as { message: string }).message).toMatch(
        /the caller speaks protocol version 1; .* accepts versions 2 and newer: upgrade the caller/,
      );
      expect((await rawGet(strict.url, '/v1/ownership', '1')).status).toBe(400);
      expect((await rawGet(strict.url, '/v1/ownership', 'x')).status).toBe(400);
      // Health answers every caller, so an older one can still learn the node's version.
      expect(await rawGet(strict.url, '/healthz')).toMatchObject({
        status: 200,
        body: { status: 'ok', protocol: PROTOCOL_VERSION, minProtocol: PROTOCOL_VERSION },
      });
      // This build's client is welcome.
      expect((await client.ownership(strict.url)).nodeId).toBe('s1');

      // A client that accepts only this version, facing a node of the previous build (n1, still running).
      const strictClient = new NodeClient({ secret: SECRET, minPeerProtocol: PROTOCOL_VERSION });
      try {
        const e = await strictClient.stats(urls.n1!).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(ProtocolUnsupportedError);
        expect((e as Error).message).toMatch(/the cache node speaks protocol version 1/);
        expect((await strictClient.stats(strict.url)).nodeId).toBe('s1');
      } finally {
        await strictClient.close();
      }
    } finally {
      await strictFleet.closeAll();
    }
  }, 300_000);
});

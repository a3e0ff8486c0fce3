/**
 * The warm tier wired into the running service: the local server (same Lambda handlers) configured with a ring
 * store routes writes and reads through a real cache-node process between the hot and cold tiers.
 */
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { buildApiContext } from '../../core/composition/api-context.js';
import { StrataClient } from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { localFleet, SECRET, singleNodeRing, tempDir } from './warm-fixtures.js';

describe('API with a warm tier of cache nodes', () => {
  const fleet = localFleet();
  const ringDir = tempDir('strata-ring-');
  let api: TestApi;
  let client: StrataClient;

  beforeAll(async () => {
    const node = await fleet.launch('n1');
    await new RingStore(new FileCasStore(ringDir.dir)).create(singleNodeRing('n1', node.url));
    api = await startTestApi('embedded', {
      STRATA_WARM_RING_DIR: ringDir.dir,
      STRATA_WARM_SECRET: SECRET,
      STRATA_NAMESPACES: JSON.stringify({ namespaces: { app: { promoteOnRead: false } } }),
    });
    client = new StrataClient({ endpoint: api.url, namespace: 'app', retries: 0 });
  });

  afterAll(async () => {
    await api?.close();
    await fleet.closeAll();
    ringDir.remove();
  });

  it('writes through hot, warm and cold, and serves from warm when hot has lost the key', async () => {
    expect(api.ctx.coordinator.tierList().map((t) => t.name)).toEqual(['hot', 'warm', 'cold']);
    const w = await client.put('k', 'via-warm');
    expect(w.tiers).toEqual(['hot', 'warm', 'cold']);
    await api.ctx.coordinator.tierList()[0]!.delete('app', 'k'); // as if evicted from hot
    const got = (await client.get('k'))!;
    expect({ tier: got.tier, value: got.text(), version: got.version }).toEqual({
      tier: 'warm',
      value: 'via-warm',
      version: w.version,
    });
  });

  it('falls through to cold when the cache node is down', async () => {
    await client.put('k2', 'survives');
    await api.ctx.coordinator.tierList()[0]!.delete('app', 'k2');
    await fleet.kill('n1');
    const got = (await client.get('k2'))!;
    expect({ tier: got.tier, value: got.text() }).toEqual({ tier: 'cold', value: 'survives' });
  });

  it('fails clearly in a runtime built without the warm tier (the API Lambdas) instead of ignoring the config', () => {
    expect(() => buildApiContext(loadRuntimeEnv({ STRATA_WARM_RING_DIR: ringDir.dir, STRATA_WARM_SECRET: SECRET }))).toThrow(
      /built without the warm tier/,
    );
  });

  it('refuses to start with a warm tier but no fleet secret', async () => {
    await expect(startTestApi('embedded', { STRATA_WARM_RING_DIR: ringDir.dir })).rejects.toThrow(/STRATA_WARM_SECRET/);
  });
});

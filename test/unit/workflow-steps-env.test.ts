import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { workflowDepsFromEnv } from '../../core/composition/step-lambda.js';

describe("the step Lambda's dependencies from the environment", () => {
  const dir = mkdtempSync(join(tmpdir(), 'strata-steps-env-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reach launched nodes on STRATA_NODE_PORT and build the tiers once, when a step first asks for them', async () => {
    const env = loadRuntimeEnv({
      STRATA_WARM_RING_DIR: join(dir, 'ring'),
      STRATA_WARM_SECRET: 'a-fleet-secret-of-16+',
      STRATA_LOCAL_DIR: join(dir, 'cold'),
      STRATA_NODE_PORT: '7171',
    });
    const d = await workflowDepsFromEnv(env);
    expect(await d.nodeUrl({ nodeId: 'i-1', instanceId: 'i-1', privateIp: '10.0.0.7' })).toBe('http://10.0.0.7:7171');
    expect(await d.nodeUrl({ nodeId: 'i-1', instanceId: 'i-1' })).toBeUndefined();
    const hot = d.tiers.hot;
    expect([hot?.name, d.tiers.warm?.name, d.tiers.cold?.name]).toEqual(['hot', 'warm', 'cold']);
    expect(d.tiers.hot).toBe(hot); // one context, not one per access
    expect({ ...d.tiers }.cold).toBe(d.tiers.cold);
    await Promise.all([hot?.close(), d.tiers.warm?.close(), d.tiers.cold?.close(), d.nodes.close()]);
  });

  it('launch into the subnets of STRATA_FLEET_SUBNETS, and a malformed list stops start-up naming the variable', async () => {
    const subnets = [
      { subnetId: 'subnet-1', availabilityZone: 'us-east-1a' },
      { subnetId: 'subnet-2', availabilityZone: 'us-east-1b' },
    ];
    const base = { STRATA_WARM_RING_DIR: join(dir, 'ring'), STRATA_WARM_SECRET: 'a-fleet-secret-of-16+' };
    const d = await workflowDepsFromEnv(loadRuntimeEnv({ ...base, STRATA_FLEET_SUBNETS: JSON.stringify(subnets) }));
    expect(d.fleetSubnets).toEqual(subnets);
    await d.nodes.close();
    for (const bad of ['subnet-1', '[]', '[{"subnetId":"subnet-1"}]', JSON.stringify([subnets[0], subnets[0]])]) {
      expect(() => loadRuntimeEnv({ ...base, STRATA_FLEET_SUBNETS: bad })).toThrow(/STRATA_FLEET_SUBNETS/);
    }
  });

  it('refuses to start without the ring store, naming the variables', async () => {
    await expect(workflowDepsFromEnv(loadRuntimeEnv({}))).rejects.toThrow(/STRATA_WARM_RING_BUCKET/);
  });
});

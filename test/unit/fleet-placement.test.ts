import { addNode, initialRing, parseRingDocument, type NodeState, type RingNode } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import type { Migrator } from '../../core/nodes/migration.js';
import type { NodeClient } from '../../core/nodes/node-client.js';
import {
  chooseLaunchSubnet,
  launchClientToken,
  leastLoaded,
  LOCAL_FLEET_SUBNETS,
  scaleInCandidates,
  type FleetSubnet,
} from '../../core/workflows/steps/fleet-placement.js';
import { ProgressStore, ScaleLocks } from '../../core/workflows/progress.js';
import { scaleSteps, type ScaleDeps } from '../../core/workflows/steps/scale-steps.js';

const SUBNETS: FleetSubnet[] = [
  { subnetId: 'subnet-a', availabilityZone: 'eu-west-1a' },
  { subnetId: 'subnet-b', availabilityZone: 'eu-west-1b' },
  { subnetId: 'subnet-c', availabilityZone: 'eu-west-1c' },
];

function node(id: string, az: string | undefined, state: NodeState = 'NORMAL'): Pick<RingNode, 'id' | 'state' | 'az'> {
  return { id, state, ...(az ? { az } : {}) };
}

/** NORMAL nodes named after their AZ: `normalIn('aab')` = a1, a2 in eu-west-1a and b1 in eu-west-1b. */
function normalIn(azs: string): Pick<RingNode, 'id' | 'state' | 'az'>[] {
  return [...azs].map((z, i) => node(`${z}${[...azs].slice(0, i + 1).filter((x) => x === z).length}`, `eu-west-1${z}`));
}

describe('choosing the subnet of a new node', () => {
  it('takes the AZ with the fewest NORMAL nodes', () => {
    expect(chooseLaunchSubnet(SUBNETS, normalIn('aabcc')).subnetId).toBe('subnet-b');
  });

  it('counts only NORMAL nodes: a leaving node does not hold its AZ', () => {
    const nodes = [
      node('n1', 'eu-west-1a'),
      node('n2', 'eu-west-1b'),
      node('n3', 'eu-west-1c'),
      node('n4', 'eu-west-1c', 'LEAVING'),
    ];
    expect(chooseLaunchSubnet(SUBNETS, [...nodes, node('n5', 'eu-west-1a')]).subnetId).toBe('subnet-b');
    expect(chooseLaunchSubnet(SUBNETS, [...nodes, node('n5', 'eu-west-1a'), node('n6', 'eu-west-1b')]).subnetId).toBe('subnet-c');
  });

  it('breaks a tie towards the AZ with fewer nodes already joining, then by configuration order', () => {
    const normal = [node('n1', 'eu-west-1a'), node('n2', 'eu-west-1b'), node('n3', 'eu-west-1c')];
    expect(chooseLaunchSubnet(SUBNETS, normal).subnetId).toBe('subnet-a');
    expect(chooseLaunchSubnet(SUBNETS, [...normal, node('j1', 'eu-west-1a', 'JOINING')]).subnetId).toBe('subnet-b');
    const joining = [node('j1', 'eu-west-1a', 'JOINING'), node('j2', 'eu-west-1b', 'PARTIAL')];
    expect(chooseLaunchSubnet(SUBNETS, [...normal, ...joining]).subnetId).toBe('subnet-c');
    expect(chooseLaunchSubnet([...SUBNETS].reverse(), normal).subnetId).toBe('subnet-c');
  });

  it('does not count nodes whose AZ the ring does not know (or that run outside the configured AZs) for any AZ', () => {
    const nodes = [node('old1', undefined), node('old2', undefined), node('n1', 'eu-west-1a'), node('x', 'eu-west-1z')];
    expect(chooseLaunchSubnet(SUBNETS, nodes).subnetId).toBe('subnet-b');
  });

  it('spreads successive launches over every AZ before doubling one', () => {
    const nodes: Pick<RingNode, 'id' | 'state' | 'az'>[] = [];
    const picks = Array.from({ length: 6 }, (_, i) => {
      const s = chooseLaunchSubnet(SUBNETS, nodes);
      nodes.push(node(`n${i}`, s.availabilityZone));
      return s.subnetId;
    });
    expect(picks).toEqual(['subnet-a', 'subnet-b', 'subnet-c', 'subnet-a', 'subnet-b', 'subnet-c']);
  });
});

describe('choosing the node a scale-in drains', () => {
  const loads = (bytes: Record<string, number>) => Object.entries(bytes).map(([id, b]) => ({ id, bytes: b }));

  it('prefers the AZ with the most NORMAL nodes, then the least loaded node there', () => {
    const candidates = scaleInCandidates(normalIn('aabc')).map((n) => n.id);
    expect(candidates).toEqual(['a1', 'a2']);
    // b1 is the emptiest node, but draining it would leave AZ b with none while AZ a keeps two.
    expect(leastLoaded(loads({ a1: 500, a2: 300, b1: 10, c1: 20 }).filter((l) => candidates.includes(l.id)))).toBe('a2');
  });

  it('on a tie between AZs takes the least loaded node of all of them', () => {
    const candidates = scaleInCandidates(normalIn('aabbc')).map((n) => n.id);
    expect(candidates).toEqual(['a1', 'a2', 'b1', 'b2']);
    expect(leastLoaded(loads({ a1: 50, a2: 40, b1: 30, b2: 45 }))).toBe('b1');
  });

  it('ignores nodes that are not NORMAL, and breaks equal loads by id', () => {
    const nodes = [...normalIn('abb'), node('a2', 'eu-west-1a', 'LEAVING'), node('a3', 'eu-west-1a', 'JOINING')];
    expect(scaleInCandidates(nodes).map((n) => n.id)).toEqual(['b1', 'b2']);
    expect(leastLoaded(loads({ b2: 7, b1: 7 }))).toBe('b1');
  });

  it('treats nodes without a recorded AZ as one AZ (a ring from before AZs were recorded keeps the old choice)', () => {
    const nodes = [node('n1', undefined), node('n2', undefined), node('n3', undefined)];
    expect(scaleInCandidates(nodes).map((n) => n.id)).toEqual(['n1', 'n2', 'n3']);
  });
});

describe('the ClientToken of a launch', () => {
  // EC2's RunInstances ClientToken: "Constraints: Maximum 64 ASCII characters".
  // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html
  const longest = `scale-out-${'x'.repeat(70)}`; // Step Functions execution names go up to 80 characters

  it('fits EC2: at most 64 ASCII characters, even for an 80-character execution name', () => {
    expect(longest).toHaveLength(80);
    const token = launchClientToken(longest, 0);
    expect(token.length).toBeLessThanOrEqual(64);
    expect(token).toMatch(/^[\x21-\x7e]+$/);
  });

  it('is the same on every retry of a launch and differs between launches and executions', () => {
    expect(launchClientToken('exec-1', 0)).toBe(launchClientToken('exec-1', 0));
    const launches: [string, number][] = [
      ['exec-1', 0],
      ['exec-1', 1],
      ['exec-2', 0],
      ['exec-10', 0],
    ];
    const tokens = launches.map(([execution, ordinal]) => launchClientToken(execution, ordinal));
    expect(new Set(tokens).size).toBe(4);
  });

  it('refuses an ordinal that is not a whole number', () => {
    expect(() => launchClientToken('exec-1', -1)).toThrow(/ordinal/);
    expect(() => launchClientToken('exec-1', 1.5)).toThrow(/ordinal/);
  });
});

describe('ring nodes record their AZ', () => {
  it('parses a document written before nodes had an AZ (deployments upgrade in place)', () => {
    const at = '2026-01-01T00:00:00.000Z';
    const old = {
      format: 1,
      version: 3,
      updatedAt: at,
      nodes: [{ id: 'n1', url: 'http://10.0.0.1:7070', state: 'NORMAL', instance: 'i-1', addedAt: at }],
      ranges: [{ start: '0000000000000000', owner: 'n1', epoch: 1 }],
    };
    expect(parseRingDocument(old).nodes[0]).not.toHaveProperty('az');
  });

  it('keeps the AZ a node joins with', () => {
    const doc = initialRing([{ id: 'n1', url: 'http://10.0.0.1:7070' }]);
    addNode(doc, { id: 'n2', url: 'http://10.0.0.2:7070', instance: 'i-2', az: 'eu-west-1b' });
    expect(parseRingDocument(JSON.parse(JSON.stringify(doc))).nodes.find((n) => n.id === 'n2')?.az).toBe('eu-west-1b');
  });
});

describe('the scale steps place nodes by AZ', () => {
  async function deps(nodes: { id: string; az?: string; bytes: number }[], fleetSubnets: readonly FleetSubnet[] = SUBNETS) {
    const cas = new InMemoryCasStore();
    const ring = new RingStore(cas);
    const doc = initialRing(nodes.map((n) => ({ id: n.id, url: `http://${n.id}:7070`, instance: `i-${n.id}` })));
    for (const n of doc.nodes) {
      const az = nodes.find((x) => x.id === n.id)?.az;
      if (az) n.az = az;
    }
    await ring.create(doc);
    const planned: string[] = [];
    const stats = async (url: string) => ({ bytes: nodes.find((n) => url === `http://${n.id}:7070`)!.bytes });
    const d: ScaleDeps = {
      ring,
      nodes: { stats } as unknown as NodeClient,
      migrator: {
        planScaleIn: async (o: { node: string }) => (planned.push(o.node), { id: 'p-1', sessions: [] }),
      } as unknown as Migrator,
      progress: new ProgressStore(cas),
      locks: new ScaleLocks(cas),
      nodeUrl: async () => undefined,
      metric: () => {},
      now: () => 1000,
      fleetSubnets,
    };
    return { d, planned, progress: d.progress };
  }

  it('scale-out begin returns the subnet, AZ and ClientToken of the launch, in the AZ with the fewest NORMAL nodes', async () => {
    const { d, progress } = await deps([
      { id: 'a1', az: 'eu-west-1a', bytes: 0 },
      { id: 'c1', az: 'eu-west-1c', bytes: 0 },
    ]);
    const out = await scaleSteps(d).scaleOutBegin({ execution: 'exec-1', workflow: 'scale-out' });
    const clientToken = launchClientToken('exec-1', 0);
    expect(out.launch).toEqual({ ordinal: 0, subnetId: 'subnet-b', availabilityZone: 'eu-west-1b', clientToken });
    expect((await progress.get('exec-1'))?.facts.availabilityZone).toBe('eu-west-1b');
  });

  it('scale-out begin without subnets fails before taking the lock of the node it was started for', async () => {
    const { d } = await deps([{ id: 'a1', az: 'eu-west-1a', bytes: 0 }], []);
    await expect(scaleSteps(d).scaleOutBegin({ execution: 'exec-1', forNode: 'a1' })).rejects.toMatchObject({
      name: 'ValidationError',
      message: expect.stringMatching(/STRATA_FLEET_SUBNETS/),
    });
    expect(await d.locks.acquire('a1', 'exec-2')).toBe(true);
  });

  it('a local run has stand-in subnets in distinct AZs', () => {
    expect(new Set(LOCAL_FLEET_SUBNETS.map((s) => s.availabilityZone)).size).toBe(LOCAL_FLEET_SUBNETS.length);
  });

  it('scale-in begin drains the least loaded node of the AZ with the most NORMAL nodes', async () => {
    const { d, planned } = await deps([
      { id: 'a1', az: 'eu-west-1a', bytes: 900 },
      { id: 'a2', az: 'eu-west-1a', bytes: 800 },
      { id: 'b1', az: 'eu-west-1b', bytes: 1 },
    ]);
    const out = await scaleSteps(d).scaleInBegin({ execution: 'exec-1', workflow: 'scale-in' });
    expect([out.nodeId, out.instanceId, planned]).toEqual(['a2', 'i-a2', ['a2']]);
  });
});

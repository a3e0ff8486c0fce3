/**
 * How long a policy change takes to reach every API function in AWS (issue 22: "≤ 60 s in AWS, measured"). A Lambda
 * container cannot poll on a timer (it is frozen between invocations), so each request checks its copy
 * (core/policy/live.ts `refreshIfStale`): past STRATA_POLICY_REFRESH_MS (15 s, the deployed default) it re-reads the
 * store in the background, and past four times that (60 s) the request waits for the read. Twenty containers with
 * their own request rhythms (from several a second to one every two minutes, seeded) read the policy store in S3
 * (LocalStack) while the policy changes; time is simulated (each container's clock is the simulation's), each read is
 * real. It must hold that every request beginning 60 s after the change is served under it, whatever the rhythm; the
 * lag each container showed is printed.
 */
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { PolicyAdministration } from '../../core/policy/admin.js';
import { compilePolicy, documentFromNamespaceConfig } from '../../core/policy/compile.js';
import { LivePolicy } from '../../core/policy/live.js';
import { S3CasStore } from '../../core/ring/store.js';
import { prng } from '../../bench/lib/rounds.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';

const CONTAINERS = 20;
const CHANGE_AT_MS = 30_000;
const END_MS = 240_000;

describe('policy pick-up with the deployed settings (Lambda containers, the policy store in S3)', () => {
  const bucket = uniqueName('strata-pickup').toLowerCase();
  const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
  afterAll(() => s3.destroy());

  it('serves every request that begins 60 s after a change under the new policy, whatever the request rhythm', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const cas = new S3CasStore({ bucket, prefix: 'strata-ring', client: s3 });
    const deployment = compilePolicy(documentFromNamespaceConfig({}));
    const admin = new PolicyAdministration({ cas, deployment: deployment.document });
    // The API functions' settings: the runtime environment's defaults, as deployed.
    const { STRATA_POLICY_REFRESH_MS: refreshMs } = loadRuntimeEnv({});
    expect(refreshMs).toBe(15_000);
    let now = 0;
    const containers = Array.from({ length: CONTAINERS }, () =>
      LivePolicy.fromDeployment({ admin, refreshMs, now: () => now, onChange: () => {} }, deployment),
    );
    // Each container's requests: exponential gaps with its own mean, from 0.2 s to 120 s.
    const random = prng(20261126);
    const means = containers.map((_, i) => 200 * Math.pow(600, i / (CONTAINERS - 1)));
    const arrivals: { at: number; c: number }[] = [];
    for (let c = 0; c < CONTAINERS; c++)
      for (let t = random() * means[c]!; t < END_MS; t += -Math.log(1 - random()) * means[c]!) arrivals.push({ at: t, c });
    arrivals.sort((a, b) => a.at - b.at);
    let changed = false;
    let served = 0;
    const readMs: number[] = [];
    const lastOld = new Array<number>(CONTAINERS).fill(-1);
    for (const { at, c } of arrivals) {
      if (!changed && at >= CHANGE_AT_MS) {
        now = CHANGE_AT_MS;
        await admin.put({ namespaces: { sessions: { preset: 'low-latency' } } }, { ifVersion: 0, author: 'ops' });
        changed = true;
      }
      now = at;
      const live = containers[c]!;
      // A request: it waits for the read only when its copy is stale; a background read completes before the
      // simulation's clock moves on (its real duration is measured, and added to the bound below).
      const started = performance.now();
      await live.refreshIfStale();
      const version = live.current.view.version;
      await live.settled();
      readMs.push(performance.now() - started);
      served++;
      if (at >= CHANGE_AT_MS && version === 0) lastOld[c] = at;
      if (at >= CHANGE_AT_MS + 4 * refreshMs)
        expect({ c, at: Math.round(at), version }).toEqual({ c, at: Math.round(at), version: 1 });
    }
    const lags = lastOld.map((t) => (t < 0 ? 0 : (t - CHANGE_AT_MS) / 1000));
    readMs.sort((a, b) => a - b);
    // What was measured (printed, not asserted: the assertion above is the bound).
    console.log(
      `policy pick-up over ${served} requests in ${CONTAINERS} containers: the last request served under the old policy ` +
        `came ${Math.max(...lags).toFixed(1)} s after the change (per container: ${lags.map((l) => l.toFixed(0)).join(', ')} s); ` +
        `a request's check took ${readMs[Math.floor(readMs.length * 0.99)]!.toFixed(1)} ms at p99 (LocalStack S3)`,
    );
    expect(Math.max(...lags)).toBeLessThan(60);
    expect(served).toBeGreaterThan(1000);
  });
});

/**
 * The fleet's shared secret in the ring store (ring/fleet-secret.ts, composition/warm-tier-env.ts readFleetSecret): created
 * once by a conditional create, whoever gets there first; read by the coordinators with STRATA_WARM_SECRET_FROM_RING;
 * local runs keep passing STRATA_WARM_SECRET. The S3 side (If-None-Match on LocalStack, and the nodes waiting for
 * the secret) is in test/integration/cachenode-ring-reports.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureFleetSecret, FleetSecretInvalidError, readStoredFleetSecret } from '../../core/ring/fleet-secret.js';
import { FLEET_SECRET_KEY } from '../../core/ring/node-reports.js';
import {
  CasConflictError,
  CasStoreUnavailableError,
  FileCasStore,
  InMemoryCasStore,
  type CasStore,
} from '../../core/ring/store.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { ConfigError } from '../../core/errors.js';
import { getApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnvWithSecrets } from '../../core/composition/secrets.js';
import { FleetSecretMissingError, readFleetSecret } from '../../core/composition/warm-tier-env.js';
import { workflowDepsFromEnv } from '../../core/composition/step-lambda.js';
import { resetApiRuntime } from '../helpers/api-runtime.js';

/** The secret a node client sends on every request (NodeConnections holds it; private, read for the test). */
const secretOf = (client: unknown): string => (client as { connections: { secret: string } }).connections.secret;

const GIVEN = 'a-fleet-secret-of-16+';

describe('fleet secret in the ring store', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'strata-fleet-secret-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('creates a 64-character header-safe secret once; later calls read that one', async () => {
    const cas = new FileCasStore(dir);
    const first = await ensureFleetSecret(cas);
    expect(first.created).toBe(true);
    expect(first.secret).toMatch(/^[A-Za-z0-9_-]{64}$/);
    await expect(ensureFleetSecret(cas)).resolves.toEqual({ secret: first.secret, created: false });
    await expect(readStoredFleetSecret(cas)).resolves.toBe(first.secret);
    await expect(cas.get(FLEET_SECRET_KEY)).resolves.toMatchObject({ body: first.secret });
  });

  it("gives concurrent creators (separate processes' stores on one folder) one secret, written by exactly one", async () => {
    const candidate = (i: number) => () => `candidate-secret-number-${String(i).padStart(2, '0')}`;
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => ensureFleetSecret(new FileCasStore(dir), candidate(i))),
    );
    expect(outcomes.filter((o) => o.created)).toHaveLength(1);
    const winner = outcomes.find((o) => o.created)!.secret;
    expect(new Set(outcomes.map((o) => o.secret))).toEqual(new Set([winner]));
    await expect(readStoredFleetSecret(new FileCasStore(dir))).resolves.toBe(winner);
  });

  it("reads the winner's secret after losing the conditional create", async () => {
    const store = new InMemoryCasStore();
    // Another creator's put lands between this caller's read (nothing there) and its own put.
    const racing: CasStore = {
      get: (k) => store.get(k),
      put: async (k, body, etag) => {
        await store.put(k, 'the-other-creators-secret-0123', null);
        return store.put(k, body, etag);
      },
    };
    await expect(ensureFleetSecret(racing)).resolves.toEqual({ secret: 'the-other-creators-secret-0123', created: false });
  });

  it('tries the create when S3 hides a missing secret behind 403 (no s3:ListBucket), and reports a refused create', async () => {
    const sdkError = () => Object.assign(new Error('Access Denied'), { $metadata: { httpStatusCode: 403 } });
    const denied = () => new CasStoreUnavailableError(FLEET_SECRET_KEY, sdkError());
    const store = new InMemoryCasStore();
    const noList: CasStore = {
      get: async (k) => (await store.get(k)) ?? Promise.reject(denied()),
      put: (k, b, e) => store.put(k, b, e),
    };
    const behind403 = 'created-behind-a-403-0123';
    await expect(ensureFleetSecret(noList, () => behind403)).resolves.toEqual({ secret: behind403, created: true });
    const readOnly: CasStore = { get: () => Promise.reject(denied()), put: () => Promise.reject(denied()) };
    await expect(ensureFleetSecret(readOnly)).rejects.toThrow(/Access Denied/);
    // Other read failures are not guessed at.
    const down: CasStore = {
      get: () => Promise.reject(new CasStoreUnavailableError(FLEET_SECRET_KEY, new Error('connect ECONNREFUSED'))),
      put: () => Promise.reject(new CasConflictError('x')),
    };
    await expect(ensureFleetSecret(down)).rejects.toThrow(/ECONNREFUSED/);
  });

  it('refuses a stored secret nobody can use rather than handing it out', async () => {
    const cas = new FileCasStore(dir);
    await cas.put(FLEET_SECRET_KEY, 'short', null);
    await expect(readStoredFleetSecret(cas)).rejects.toThrow(FleetSecretInvalidError);
    await expect(ensureFleetSecret(cas)).rejects.toThrow(/unusable: it must be at least 16 visible ASCII characters/);
  });
});

describe('STRATA_WARM_SECRET_FROM_RING (coordinators)', () => {
  let dir: string;
  const saved = { ...process.env };
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'strata-fleet-secret-'))));
  afterEach(async () => {
    await resetApiRuntime(saved);
    rmSync(dir, { recursive: true, force: true });
  });

  it('is a way to give a warm tier its secret, and needs the ring store it names', () => {
    const fromRing = { STRATA_WARM_RING_DIR: dir, STRATA_WARM_SECRET_FROM_RING: '1' };
    expect(loadRuntimeEnv(fromRing)).toMatchObject({ STRATA_WARM_SECRET_FROM_RING: true });
    expect(() => loadRuntimeEnv({ STRATA_WARM_SECRET_FROM_RING: '1' })).toThrow(
      /STRATA_WARM_SECRET_FROM_RING needs the ring store/,
    );
    expect(() => loadRuntimeEnv({ STRATA_WARM_RING_DIR: dir })).toThrow(
      /STRATA_WARM_SECRET \(or STRATA_WARM_SECRET_FROM_RING=1, or .*\)/,
    );
  });

  it("reads the ring's secret; a read-only caller is told it does not exist yet; STRATA_WARM_SECRET still wins", async () => {
    const env = loadRuntimeEnv({ STRATA_WARM_RING_DIR: dir, STRATA_WARM_SECRET_FROM_RING: '1' });
    await expect(readFleetSecret(env)).rejects.toThrow(FleetSecretMissingError);
    await expect(readFleetSecret(env)).rejects.toThrow(new RegExp(`does not exist yet at ${dir}/fleet/secret`));
    const created = await readFleetSecret(env, { create: true });
    await expect(readFleetSecret(env)).resolves.toBe(created);
    await expect(readFleetSecret({ ...env, STRATA_WARM_SECRET: GIVEN })).resolves.toBe(GIVEN);
    expect(new FleetSecretMissingError('x')).toBeInstanceOf(ConfigError);
  });

  it('lets the step Lambda create the secret before its first step, and use it for the nodes', async () => {
    const env = loadRuntimeEnv({ STRATA_WARM_RING_DIR: dir, STRATA_WARM_SECRET_FROM_RING: '1' });
    const deps = await workflowDepsFromEnv(env);
    const stored = await readStoredFleetSecret(new FileCasStore(dir));
    expect(stored).toMatch(/^[A-Za-z0-9_-]{64}$/);
    // The node client carries it (its header on every node request).
    expect(secretOf(deps.nodes)).toBe(stored);
    await deps.nodes.close();
  });

  it('gives an API container the same secret as the steps, whichever starts first', async () => {
    Object.assign(process.env, { STRATA_WARM_RING_DIR: dir, STRATA_WARM_SECRET_FROM_RING: '1' });
    delete process.env.STRATA_WARM_SECRET;
    delete process.env.STRATA_WARM_SECRET_ARN;
    const apiEnv = await loadRuntimeEnvWithSecrets();
    const ctx = (await getApiContext()) as BuiltContext;
    expect(ctx.tiers.map((t) => t.name)).toEqual(['hot', 'warm']);
    const steps = await workflowDepsFromEnv(loadRuntimeEnv({ STRATA_WARM_RING_DIR: dir, STRATA_WARM_SECRET_FROM_RING: '1' }));
    expect(secretOf(steps.nodes)).toBe(apiEnv.STRATA_WARM_SECRET);
    await steps.nodes.close();
  });
});

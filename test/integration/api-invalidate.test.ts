/**
 * Invalidation by tag and prefix and namespace flushes through the API (issue 24, items 1, 3 and 7): the real local
 * server over real HTTP, driven by the SDK and the CLI, with tenant keys mapped to namespaces (x-api-key as the key
 * id, as STRATA_TENANT_ACCESS documents for local runs); and their sweeps, started directly or (deployed) by their
 * request objects' S3 events.
 */
import {
  NamespaceForbiddenError,
  RateLimitedError,
  StrataClient,
  ValidationError,
  type InvalidationResult,
} from '../../sdk/src/index.js';
import { ExecutionExistsError, type WorkflowService } from '../../core/workflows/admin-service.js';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { s3SweepRequestKey } from '../../core/tiers/storage-key.js';
import { localWorkflows, type LocalWorkflows } from '../../core/workflows/local/local-workflows.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { testS3Endpoint } from '../helpers/env.js';
import { runStrataCli } from '../helpers/strata-cli.js';
import { localFleet, SECRET } from './warm-fixtures.js';
import { definitions } from '../workflows/harness.js';

describe('invalidation and flush (local server, SDK, CLI)', () => {
  let api: TestApi;
  const client = (apiKey: string | undefined, namespace: string) =>
    new StrataClient({ endpoint: api.url, apiKey, namespace, retries: 0 });

  beforeAll(async () => {
    api = await startTestApi('embedded', {
      STRATA_TENANT_ACCESS: JSON.stringify([
        { keyId: 'web-key', tenant: 'web', namespaces: ['web-*'] },
        { keyId: 'reports-key', tenant: 'analytics', namespaces: ['reports'] },
        { keyId: 'ops-key', tenant: 'ops', admin: true },
      ]),
    });
  }, 300_000);

  afterAll(async () => {
    await api?.close();
  });

  it('invalidates by tag and by prefix: covered keys are gone, others stay, writes after are visible', async () => {
    const web = client('web-key', 'web-pages');
    await web.put('page/1', 'one', { tags: ['product:1', 'catalog'] });
    await web.put('page/2', 'two', { tags: ['product:2'] });
    await web.put('user/1', 'u1');
    const r: InvalidationResult = await web.invalidateTags(['catalog']);
    expect(r).toMatchObject({ ns: 'web-pages', kind: 'tags' });
    expect(await web.get('page/1')).toBeUndefined();
    expect(await (await web.get('page/2'))!.text()).toBe('two');
    await web.put('page/1', 'one again', { tags: ['catalog'] });
    expect(await (await web.get('page/1'))!.text()).toBe('one again');
    await web.invalidatePrefix('page/');
    expect(await web.getMany(['page/1', 'page/2', 'user/1'])).toEqual(new Map([['user/1', expect.anything()]]));
  });

  it('flushes a namespace with its name repeated, and refuses a flush that does not confirm it', async () => {
    const web = client('web-key', 'web-flush');
    await web.put('a', '1');
    await expect(web.flush({ confirm: 'web-other' })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      status: 400,
      details: { field: 'confirm' },
    });
    expect(await web.get('a')).toBeDefined();
    expect(await web.flush({ confirm: 'web-flush' })).toMatchObject({ kind: 'flush', ns: 'web-flush' });
    expect(await web.get('a')).toBeUndefined();
  });

  it('refuses bad input with typed 400s before anything is recorded', async () => {
    const web = client('web-key', 'web-pages');
    await expect(web.invalidateTags([])).rejects.toBeInstanceOf(ValidationError);
    await expect(web.invalidateTags(['no spaces'])).rejects.toBeInstanceOf(ValidationError);
    for (const body of [{}, { tags: ['a'], prefix: 'p' }, { prefix: '' }, { tags: 'a' }, { tags: ['a'], extra: 1 }]) {
      const res = await fetch(`${api.url}/v1/ns/web-pages/invalidate`, {
        method: 'POST',
        headers: { 'x-api-key': 'web-key', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect([JSON.stringify(body), res.status, ((await res.json()) as { error: { code: string } }).error.code]).toEqual([
        JSON.stringify(body),
        400,
        'VALIDATION_FAILED',
      ]);
    }
  });

  it("never lets a tenant invalidate or flush another tenant's namespace, nor read the audit log", async () => {
    const reports = client('reports-key', 'reports');
    await reports.put('kept', 'v', { tags: ['t'] });
    const intruder = client('web-key', 'reports');
    await expect(intruder.invalidateTags(['t'])).rejects.toBeInstanceOf(NamespaceForbiddenError);
    await expect(intruder.invalidatePrefix('k')).rejects.toBeInstanceOf(NamespaceForbiddenError);
    await expect(intruder.flush({ confirm: 'reports' })).rejects.toBeInstanceOf(NamespaceForbiddenError);
    await expect(intruder.namespaces.flush('reports', { confirm: 'reports' })).rejects.toMatchObject({
      code: 'NAMESPACE_FORBIDDEN',
      details: { scope: 'admin' },
    });
    await expect(intruder.namespaces.invalidations()).rejects.toBeInstanceOf(NamespaceForbiddenError);
    expect(await (await reports.get('kept'))!.text()).toBe('v');
  });

  it('lets the admin key flush any namespace and read the audit log, newest first, with who asked', async () => {
    const reports = client('reports-key', 'reports');
    await reports.put('gone', 'v');
    const ops = new StrataClient({ endpoint: api.url, apiKey: 'ops-key', retries: 0 });
    expect(await ops.namespaces.flush('reports', { confirm: 'reports' })).toMatchObject({ kind: 'flush' });
    expect(await reports.get('gone')).toBeUndefined();
    const log = await ops.namespaces.invalidations({ ns: 'reports' });
    expect(log[0]).toMatchObject({ ns: 'reports', kind: 'flush', by: 'admin' });
    const all = await ops.namespaces.invalidations();
    expect(all.some((r) => r.ns === 'web-pages' && r.kind === 'tags' && r.by === 'tenant:web')).toBe(true);
  });

  it('answers 429 RATE_LIMITED above the per-namespace rate', async () => {
    const web = client('web-key', 'web-rate');
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        web.invalidateTags([`t${i}`]).then(
          () => 'ok',
          (e: unknown) => e,
        ),
      ),
    );
    expect(outcomes.some((o) => o instanceof RateLimitedError)).toBe(true);
  });

  it('the CLI invalidates and flushes', async () => {
    const web = client('web-key', 'web-cli');
    await web.put('k', 'v', { tags: ['x'] });
    const as = ['--api-key', 'web-key', '--ns', 'web-cli'];
    const inv = await runStrataCli(api.url, ['invalidate', '--tags', 'x', ...as]);
    expect([inv.code, JSON.parse(inv.stdout)]).toEqual([0, expect.objectContaining({ kind: 'tags', ns: 'web-cli' })]);
    expect(await web.get('k')).toBeUndefined();
    const bad = await runStrataCli(api.url, ['invalidate', ...as]);
    expect(bad.code).toBe(2);
    const flush = await runStrataCli(api.url, ['flush', '--confirm', 'web-cli', ...as]);
    expect([flush.code, JSON.parse(flush.stdout).kind]).toEqual([0, 'flush']);
  });
});

describe('the sweep an invalidation starts (local server, SDK)', () => {
  let api: TestApi;
  const started: { workflow: string; input: Record<string, unknown>; name?: string }[] = [];
  // A stand-in for the workflows: what matters here is what the routes ask them to start (the sweep itself runs in
  // test/workflows/invalidation-sweep.test.ts). Like the local runner, it refuses a name it has seen.
  const workflows: WorkflowService = {
    start: async (workflow, input, name) => {
      if (name && started.some((s) => s.name === name)) throw new ExecutionExistsError(name);
      started.push({ workflow, input, ...(name ? { name } : {}) });
      return { execution: name ?? 'x', workflow, status: 'RUNNING', startedAt: '2026-01-01T00:00Z' };
    },
    describe: async () => undefined,
    list: async () => [],
  };

  beforeAll(async () => {
    api = await startTestApi('embedded', { STRATA_TAG_SWEEP_WINDOW_MINUTES: '30' }, { workflows });
  }, 300_000);

  afterAll(async () => {
    await api?.close();
  });

  beforeEach(() => {
    started.length = 0;
  });

  it('starts a sweep of the namespace for a flush, and of the prefix for a prefix', async () => {
    const c = new StrataClient({ endpoint: api.url, namespace: 'swept', retries: 0 });
    const flush = await c.flush({ confirm: 'swept' });
    expect(flush.sweep).toEqual({ execution: `sweep-swept-${flush.id}` });
    const prefix = await c.invalidatePrefix('user/');
    expect(prefix.sweep).toEqual({ execution: `sweep-swept-${prefix.id}` });
    expect(started).toEqual([
      { workflow: 'invalidation-sweep', input: { ns: 'swept' }, name: `sweep-swept-${flush.id}` },
      { workflow: 'invalidation-sweep', input: { ns: 'swept', prefix: 'user/' }, name: `sweep-swept-${prefix.id}` },
    ]);
  });

  it("shares one sweep of the whole namespace among a window's tag invalidations, starting after the window", async () => {
    const c = new StrataClient({ endpoint: api.url, namespace: 'tagged', retries: 0 });
    const before = Date.now();
    const first = await c.invalidateTags(['a']);
    const second = await c.invalidateTags(['b', 'c']);
    const windowMs = 30 * 60_000;
    const windowEnd = (Math.floor(before / windowMs) + 1) * windowMs;
    if (Date.now() >= windowEnd) return; // the two calls straddled a window's end: nothing to compare
    const name = `sweep-tagged-tags-30m-${((windowEnd - windowMs) / 60_000).toString(36)}`;
    const notBefore = new Date(windowEnd + 60_000).toISOString().replace('.000Z', 'Z');
    expect(first.sweep).toEqual({ execution: name, notBefore });
    // The second call's start was refused (the name exists), and its answer still names the sweep that covers it.
    expect(second.sweep).toEqual({ execution: name, notBefore });
    expect(started).toEqual([{ workflow: 'invalidation-sweep', input: { ns: 'tagged', notBefore }, name }]);
  });

  it("names a long namespace's tag sweep within the 80 characters Step Functions allows", async () => {
    const ns = `n${'x'.repeat(62)}`;
    const r = await new StrataClient({ endpoint: api.url, namespace: ns, retries: 0 }).invalidateTags(['a']);
    const { execution } = r.sweep as { execution: string };
    expect(execution).toMatch(/^sweep-[0-9a-f]{24}-tags-30m-[0-9a-z]+$/);
    expect(execution.length).toBeLessThanOrEqual(80);
    expect(started[0]!.input).toEqual({ ns, notBefore: r.sweep!.notBefore });
  });

  it('starts none for tags when tag sweeps are off', async () => {
    // The server's own context, switched here as STRATA_TAG_SWEEP_WINDOW_MINUTES=0 would.
    api.ctx.tagSweepWindowMinutes = 0;
    try {
      const c = new StrataClient({ endpoint: api.url, namespace: 'swept', retries: 0 });
      expect((await c.invalidateTags(['t'])).sweep).toBeNull();
      expect(started).toEqual([]);
    } finally {
      api.ctx.tagSweepWindowMinutes = 30;
    }
  });
});

/**
 * Deployed, the data functions run in a VPC without a route to Step Functions: a flush or an invalidation writes its
 * sweep request into the S3 tier, and the Workflows stack's EventBridge rule starts the invalidation-sweep workflow
 * with the request's key (cdk/stacks/workflows-stack.ts, SweepRequestTrigger). Here: the data API as deployed
 * (STRATA_SWEEP_TRIGGER=s3-event, no workflow service) over Redis and a LocalStack bucket, and the synthesized state
 * machine under the local runner, started with the input the rule gives it. LocalStack does not deliver the event.
 */
describe('sweeps started by their request objects (the data API as deployed)', () => {
  let api: TestApi;
  let local: LocalWorkflows;
  let s3: S3Client;
  const fleet = localFleet(); // no node is launched: the sweep needs none

  beforeAll(async () => {
    api = await startTestApi('redis+s3', { STRATA_SWEEP_TRIGGER: 's3-event', STRATA_TAG_SWEEP_WINDOW_MINUTES: '30' });
    const tier = (name: string) => api.ctx.tiers.find((t) => t.name === name);
    local = localWorkflows({
      definitions: definitions(),
      cas: new InMemoryCasStore(),
      fleet,
      secret: SECRET,
      tiers: { hot: tier('hot'), cold: tier('cold') },
      retryIntervalMs: 20,
    });
    s3 = new S3Client({
      endpoint: testS3Endpoint(),
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
  }, 300_000);

  afterAll(async () => {
    await local?.close();
    await api?.close();
    s3?.destroy();
    await fleet.closeAll();
  });

  const requestOf = async (name: string) => {
    const res = await s3
      .send(new GetObjectCommand({ Bucket: api.bucket!, Key: s3SweepRequestKey('v1', name) }))
      .catch((e: unknown) => e as Error);
    return res instanceof Error ? undefined : (JSON.parse(await res.Body!.transformToString()) as unknown);
  };

  it('writes the sweep request, whose event starts the sweep once; a repeated event finds it gone', async () => {
    const c = new StrataClient({ endpoint: api.url, namespace: 'evented', retries: 0 });
    for (let i = 0; i < 6; i++) await c.put(`user/${i}`, `v${i}`);
    await c.put('org/1', 'kept');
    const r = await c.invalidatePrefix('user/');
    const name = `sweep-evented-${r.id}`;
    expect(r.sweep).toEqual({ request: name });
    expect(await requestOf(name)).toEqual({ ns: 'evented', prefix: 'user/' });
    await c.put('user/3', 'after'); // written after the invalidation: the sweep keeps it

    // What the rule does with the Object Created event: the request's key as the input.
    const object = s3SweepRequestKey('v1', name);
    const done = await local.runner.wait(local.runner.start('invalidation-sweep', { object }).name);
    expect([done.status, done.error]).toEqual(['SUCCEEDED', undefined]);
    const cold = api.ctx.tiers.find((t) => t.name === 'cold')!;
    const inCold = await Promise.all(
      [0, 1, 2, 3, 4, 5].map(async (i) => (await cold.head('evented', `user/${i}`)) !== undefined),
    );
    expect(inCold).toEqual([false, false, false, true, false, false]);
    expect((await c.get('user/3'))?.text()).toBe('after');
    expect((await c.get('org/1'))?.text()).toBe('kept');
    expect(await requestOf(name)).toBeUndefined(); // done with: removed

    // EventBridge delivers at least once: a second execution for the same event ends at once.
    const again = await local.runner.wait(local.runner.start('invalidation-sweep', { object }).name);
    expect([again.status, again.error]).toEqual(['SUCCEEDED', undefined]);
  });

  it("creates one request for a window's tag invalidations (one event, one sweep), and answers each with it", async () => {
    const c = new StrataClient({ endpoint: api.url, namespace: 'evented-tags', retries: 0 });
    const before = Date.now();
    const first = await c.invalidateTags(['a']);
    const second = await c.invalidateTags(['b']);
    const windowMs = 30 * 60_000;
    const windowEnd = (Math.floor(before / windowMs) + 1) * windowMs;
    if (Date.now() >= windowEnd) return; // the two calls straddled a window's end: nothing to compare
    const name = `sweep-evented-tags-tags-30m-${((windowEnd - windowMs) / 60_000).toString(36)}`;
    const notBefore = new Date(windowEnd + 60_000).toISOString().replace('.000Z', 'Z');
    expect([first.sweep, second.sweep]).toEqual([
      { request: name, notBefore },
      { request: name, notBefore },
    ]);
    expect(await requestOf(name)).toEqual({ ns: 'evented-tags', notBefore });
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: api.bucket!, Prefix: 'v1/_sweeps/sweep-evented-tags' }));
    expect(listed.KeyCount).toBe(1);
  });

  it('refuses to read an object that is not one of its sweep requests', async () => {
    const done = await local.runner.wait(local.runner.start('invalidation-sweep', { object: 'v1/_uploads/x.json' }).name);
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ Error: 'ValidationError', Cause: expect.stringMatching(/not a sweep request/) });
  });
});

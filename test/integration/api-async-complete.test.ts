/**
 * Asynchronous upload completion end to end (core/api/async-complete.ts): the real local server over redis-server and
 * a LocalStack bucket, with a small STRATA_ASYNC_COMPLETE_BYTES, and the synthesized upload-commit state machine run
 * by the local runner with the real step handlers. The job commits through a second API context over the same Redis
 * and bucket, as the step Lambda does in AWS (another process: no shared locks, no shared near cache).
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { buildApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { warmTierFromEnv } from '../../core/composition/warm-tier-env.js';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { s3CommitRequestKey, s3StagingKey, s3UploadRecordKey } from '../../core/tiers/storage-key.js';
import type { Presigning, Tier } from '../../core/tiers/tier.js';
import { localWorkflows, type LocalWorkflows } from '../../core/workflows/local/local-workflows.js';
import { StrataClient, UploadCompletionTimeoutError } from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { SchemaKit, type OpenApiDoc, type Schema } from '../helpers/openapi-arbitraries.js';
import { testRedisUrl, testS3Endpoint } from '../helpers/env.js';
import { definitions } from '../workflows/harness.js';
import { localFleet, SECRET } from './warm-fixtures.js';

const MiB = 1024 * 1024;
const THRESHOLD = 100_000;
const INLINE_LIMIT = 64 * 1024;
const NS = 'shared';
const TENANTS = JSON.stringify([
  { keyId: 'a-key', tenant: 'a', namespaces: [NS] },
  { keyId: 'b-key', tenant: 'b', namespaces: [NS] },
]);

/** A gate the job's tier commit waits at (to act while the asynchronous commit runs). */
class Gate {
  private open: (() => void) | undefined;
  private opened: Promise<void> | undefined;
  entered!: Promise<void>;
  private enter!: () => void;

  arm(): void {
    this.entered = new Promise((r) => (this.enter = r));
    this.opened = new Promise((r) => (this.open = r));
  }

  async pass(): Promise<void> {
    if (!this.opened) return;
    this.enter();
    await this.opened;
  }

  release(): void {
    this.open?.();
    this.opened = undefined;
  }
}

describe('asynchronous upload completion (redis + LocalStack S3, upload-commit under the local runner)', () => {
  let api: TestApi;
  let job: BuiltContext;
  let local: LocalWorkflows;
  let s3: S3Client;
  const fleet = localFleet(); // no node is launched: the job needs none
  const gate = new Gate();

  beforeAll(async () => {
    local = localWorkflows({
      definitions: definitions(),
      cas: new InMemoryCasStore(),
      fleet,
      secret: SECRET,
      retryIntervalMs: 20,
      uploads: () => ({ coordinator: job.coordinator, ...(job.presigner ? { presigner: job.presigner } : {}) }),
    });
    const env = {
      STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT),
      STRATA_ASYNC_COMPLETE_BYTES: String(THRESHOLD),
      STRATA_TENANT_ACCESS: TENANTS,
    };
    api = await startTestApi('redis+s3', env, { workflows: local.service });
    job = buildApiContext(
      loadRuntimeEnv({
        ...env,
        STRATA_PUBLIC_URL: api.url,
        STRATA_REDIS_URL: testRedisUrl(),
        STRATA_S3_BUCKET: api.bucket!,
        STRATA_S3_ENDPOINT: testS3Endpoint(),
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
      }),
      { warmTier: warmTierFromEnv, flushTimer: false },
    );
    // The job's tier commit waits at the gate when it is armed.
    const presigner = job.presigner as Tier & Presigning;
    const commit = presigner.commitUpload.bind(presigner);
    presigner.commitUpload = async (...args) => {
      await gate.pass();
      return commit(...args);
    };
    s3 = new S3Client({
      endpoint: testS3Endpoint(),
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
  });

  afterEach(() => gate.release());

  afterAll(async () => {
    await local?.close();
    await api?.close();
    await job?.coordinator.close();
    s3?.destroy();
    await fleet.closeAll();
  });

  const post = (apiKey: string, key: string, path: string, body: unknown) =>
    fetch(`${api.url}/v1/ns/${NS}/uploads/${key}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify(body),
    });
  const client = (apiKey: string) =>
    new StrataClient({ endpoint: api.url, apiKey, namespace: NS, retries: 0, inlineLimitBytes: INLINE_LIMIT });

  /** A single-PUT upload of `value` by `apiKey`, staged and not completed yet. */
  async function staged(apiKey: string, key: string, value: Buffer): Promise<string> {
    const ticket = (await (await post(apiKey, key, '', { contentType: 'application/x-test' })).json()) as {
      uploadId: string;
      url: string;
      headers: Record<string, string>;
    };
    const put = await fetch(ticket.url, { method: 'PUT', headers: ticket.headers, body: value });
    expect(put.status).toBe(200);
    return ticket.uploadId;
  }

  async function record(uploadId: string): Promise<Record<string, unknown>> {
    const res = await s3.send(new GetObjectCommand({ Bucket: api.bucket!, Key: s3UploadRecordKey('v1', uploadId) }));
    return JSON.parse(await res.Body!.transformToString()) as Record<string, unknown>;
  }

  /** Polls the owner's completion until it answers something else than 202. */
  async function settle(apiKey: string, key: string, uploadId: string): Promise<Response> {
    for (let i = 0; i < 200; i++) {
      const res = await post(apiKey, key, '/complete', { uploadId });
      if (res.status !== 202) return res;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the completion stayed 202');
  }

  it('answers 202 with Retry-After, then 202 while the job runs, then 200 exactly like a synchronous completion', async () => {
    const value = randomBytes(THRESHOLD + 5000);
    const uploadId = await staged('a-key', 'big', value);
    gate.arm();
    const first = await post('a-key', 'big', '/complete', { uploadId, ttl: 600, tags: ['async'] });
    expect(first.status).toBe(202);
    expect(first.headers.get('retry-after')).toBe('1');
    const accepted = await first.json();
    expect(accepted).toEqual({ uploadId, status: 'completing', retryAfterSeconds: 1 });
    // As the OpenAPI document the server serves describes it.
    const doc = (await (await fetch(`${api.url}/v1/openapi.json`)).json()) as OpenApiDoc;
    const kit = new SchemaKit(doc);
    type Documented = { content: { 'application/json': { schema: Schema } }; headers?: Record<string, { schema: Schema }> };
    const responses = (
      doc.paths['/v1/ns/{ns}/uploads/{key}/complete'] as unknown as { post: { responses: Record<string, Documented> } }
    ).post.responses;
    const schemaOf = (status: string) => responses[status]!.content['application/json'].schema;
    expect(kit.check(schemaOf('202'), accepted)).toBeUndefined();
    expect(
      kit.checkWire({ name: 'retry-after', in: 'header', schema: responses['202']!.headers!['retry-after']!.schema }, '1'),
    ).toBeUndefined();
    await gate.entered; // the job is committing
    const again = await post('a-key', 'big', '/complete', { uploadId });
    expect([again.status, again.headers.get('retry-after')]).toEqual([202, '1']);
    expect(await client('a-key').get('big')).toBeUndefined(); // not committed yet
    gate.release();
    const done = await settle('a-key', 'big', uploadId);
    expect(done.status).toBe(200);
    const answer = (await done.json()) as Record<string, unknown>;

    // The synchronous path, below the threshold, answers the same fields.
    const small = await staged('a-key', 'small', randomBytes(THRESHOLD - 1));
    const sync = await post('a-key', 'small', '/complete', { uploadId: small, ttl: 600, tags: ['async'] });
    expect(sync.status).toBe(200);
    const syncAnswer = (await sync.json()) as Record<string, unknown>;
    expect(Object.keys(answer).sort()).toEqual(Object.keys(syncAnswer).sort());
    expect(answer).toMatchObject({ ns: NS, key: 'big', size: value.length, tiers: syncAnswer.tiers, durable: true });
    expect(kit.check(schemaOf('200'), answer)).toBeUndefined();

    // The value reads back whole, at the version answered, with the metadata asked for.
    const item = await client('a-key').get('big');
    expect(Buffer.from(item!.value).equals(value)).toBe(true);
    expect(item!.version).toBe(answer.version);
    expect(item!.tags).toEqual(['async']);
    expect(item!.expiresAt).not.toBeNull();
    // Polling again repeats the answer (any API container can, from the record); the upload is not claimable again.
    const repeat = await post('a-key', 'big', '/complete', { uploadId });
    expect([repeat.status, await repeat.json()]).toEqual([200, answer]);
    expect(await record(uploadId)).toMatchObject({ state: 'completed' });
    // The job's input carried the upload's identity, nothing more (no parts, no metadata).
    const [execution] = local.runner.list('upload-commit').filter((e) => (e.input as { uploadId: string }).uploadId === uploadId);
    expect(Object.keys(execution!.input as object).sort()).toEqual(['claimId', 'key', 'ns', 'owner', 'uploadId']);
  });

  it('never lets the commit go back in time: a PUT acknowledged while it runs is only ever followed by newer versions', async () => {
    const value = randomBytes(THRESHOLD + 1);
    const uploadId = await staged('a-key', 'raced', value);
    gate.arm();
    expect((await post('a-key', 'raced', '/complete', { uploadId })).status).toBe(202);
    await gate.entered; // stamped, now copying
    const a = client('a-key');
    const put = await a.put('raced', 'written meanwhile');
    const seen: number[] = [];
    const read = async () => {
      const it = await a.get('raced');
      seen.push(it!.version);
      return it!;
    };
    expect((await read()).text()).toBe('written meanwhile');
    gate.release();
    const done = await settle('a-key', 'raced', uploadId);
    expect(done.status).toBe(200);
    const answer = (await done.json()) as { version: number };
    for (let i = 0; i < 5; i++) await read();
    // The commit stamped before the PUT lost its precondition and was stamped again, after the PUT: ordered after it.
    expect(answer.version).toBeGreaterThan(put.version);
    expect(seen.every((v, i) => v >= put.version && (i === 0 || v >= seen[i - 1]!))).toBe(true);
    const last = await read();
    expect([last.version, Buffer.from(last.value).equals(value)]).toEqual([answer.version, true]);
  });

  it("another tenant's poll is 404 and changes nothing; the owner's poll then still works", async () => {
    const value = randomBytes(THRESHOLD + 2);
    const uploadId = await staged('a-key', 'mine', value);
    gate.arm();
    expect((await post('a-key', 'mine', '/complete', { uploadId })).status).toBe(202);
    await gate.entered;
    const before = await record(uploadId);
    const stranger = await post('b-key', 'mine', '/complete', { uploadId });
    expect(stranger.status).toBe(404);
    expect(((await stranger.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    expect((await post('a-key', 'other-key', '/complete', { uploadId })).status).toBe(404);
    expect(await record(uploadId)).toEqual(before);
    expect((await post('a-key', 'mine', '/complete', { uploadId })).status).toBe(202);
    gate.release();
    expect((await settle('a-key', 'mine', uploadId)).status).toBe(200);
    // Once committed, the stranger still learns nothing.
    expect((await post('b-key', 'mine', '/complete', { uploadId })).status).toBe(404);
    expect(Buffer.from((await client('a-key').get('mine'))!.value).equals(value)).toBe(true);
  });

  it('a failed job gives the upload back and the next poll answers its failure once, typed', async () => {
    const uploadId = await staged('a-key', 'lost', randomBytes(THRESHOLD + 3));
    gate.arm();
    expect((await post('a-key', 'lost', '/complete', { uploadId })).status).toBe(202);
    await gate.entered;
    // The staged bytes vanish under the job (as the bucket's lifecycle rule or an operator could remove them).
    await s3.send(new DeleteObjectCommand({ Bucket: api.bucket!, Key: s3StagingKey('v1', uploadId) }));
    gate.release();
    const failed = await settle('a-key', 'lost', uploadId);
    expect(failed.status).toBe(404);
    const body = (await failed.json()) as { error: { code: string; details: Record<string, unknown> } };
    expect(body.error).toMatchObject({ code: 'NOT_FOUND', details: { uploadId, completion: 'failed' } });
    const [execution] = local.runner.list('upload-commit').filter((e) => (e.input as { uploadId: string }).uploadId === uploadId);
    expect(execution!.status).toBe('FAILED');
    // Given back (open), the failure told: the next completion starts over, here finding nothing staged.
    expect(await record(uploadId)).toMatchObject({ state: 'open' });
    expect((await record(uploadId)).completion).toBeUndefined();
    const next = await post('a-key', 'lost', '/complete', { uploadId });
    expect([next.status, ((await next.json()) as { error: { details?: object } }).error.details]).toEqual([404, { uploadId }]);
    expect(await client('a-key').get('lost')).toBeUndefined();
  });

  it("the SDK's putStream and put poll a 202 to the write's result; a bounded wait ends in a typed error", async () => {
    const a = client('a-key');
    const streamed = Buffer.alloc(6 * MiB, 7);
    const put = await a.putStream('streamed', Readable.from([streamed]), { partSize: 5 * MiB });
    expect(put).toMatchObject({ ns: NS, key: 'streamed', size: streamed.length });
    expect((await a.get('streamed'))!.version).toBe(put.version);
    const whole = randomBytes(THRESHOLD + 7);
    const put2 = await a.put('whole', whole);
    expect(Buffer.from((await a.get('whole'))!.value).equals(whole)).toBe(true);
    expect((await a.get('whole'))!.version).toBe(put2.version);

    gate.arm();
    const err = await a.put('slow', randomBytes(THRESHOLD + 9), { completeTimeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UploadCompletionTimeoutError);
    expect(err).toMatchObject({ code: 'COMPLETION_TIMEOUT', retryable: false });
    const uploadId = (err as UploadCompletionTimeoutError).uploadId!;
    gate.release();
    // Not lost: completing it again follows it to the write.
    expect((await settle('a-key', 'slow', uploadId)).status).toBe(200);
  });
  it('deployed: the completion writes its commit request, whose S3 event starts the job once', async () => {
    // The transfer function as deployed (STRATA_UPLOAD_COMMIT_TRIGGER=s3-event, no workflow service: its VPC has no
    // route to Step Functions), over the same Redis and bucket.
    const deployed = await startTestApi('redis+s3', {
      STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT),
      STRATA_ASYNC_COMPLETE_BYTES: String(THRESHOLD),
      STRATA_TENANT_ACCESS: TENANTS,
      STRATA_UPLOAD_COMMIT_TRIGGER: 's3-event',
      STRATA_S3_BUCKET: api.bucket!,
    });
    try {
      const at = (path: string, body: unknown) =>
        fetch(`${deployed.url}/v1/ns/${NS}/uploads/evented${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': 'a-key' },
          body: JSON.stringify(body),
        });
      const ticket = (await (await at('', {})).json()) as { uploadId: string; url: string; headers: Record<string, string> };
      const value = randomBytes(THRESHOLD + 11);
      expect((await fetch(ticket.url, { method: 'PUT', headers: ticket.headers, body: value })).status).toBe(200);
      const uploadId = ticket.uploadId;
      expect((await at('/complete', { uploadId })).status).toBe(202);
      // The commit request: the job's identity, nothing more.
      const key = s3CommitRequestKey('v1', uploadId);
      const req = await s3.send(new GetObjectCommand({ Bucket: api.bucket!, Key: key }));
      expect(Object.keys(JSON.parse(await req.Body!.transformToString()) as object).sort()).toEqual([
        'claimId',
        'key',
        'ns',
        'owner',
        'uploadId',
      ]);
      expect(local.runner.list('upload-commit').filter((e) => (e.input as { uploadId?: string }).uploadId === uploadId)).toEqual(
        [],
      );
      expect((await at('/complete', { uploadId })).status).toBe(202); // nothing started yet: still completing
      // What the EventBridge rule does with the Object Created event (its input: the key), delivered twice.
      const runs = [local.runner.start('upload-commit', { object: key }), local.runner.start('upload-commit', { object: key })];
      const outputs = await Promise.all(
        runs.map(async (r) => (await local.runner.wait(r.name)).output as { committed: boolean }),
      );
      expect(outputs.map((o) => o.committed).sort()).toEqual([false, true]);
      let done: Response | undefined;
      for (let i = 0; i < 100 && (done = await at('/complete', { uploadId })).status === 202; i++)
        await new Promise((r) => setTimeout(r, 50));
      expect(done!.status).toBe(200);
      const answer = (await done!.json()) as { version: number };
      const item = await client('a-key').get('evented');
      expect([item!.version, Buffer.from(item!.value).equals(value)]).toEqual([answer.version, true]);
      // A commit request for an upload with no job (a stray object under the pattern) starts nothing harmful.
      const stray = await local.runner.wait(
        local.runner.start('upload-commit', { object: 'v1/_uploads/no-such-upload-1.commit' }).name,
      );
      expect([stray.status, stray.output]).toEqual(['SUCCEEDED', { committed: false }]);
    } finally {
      await deployed.close();
    }
  });
});

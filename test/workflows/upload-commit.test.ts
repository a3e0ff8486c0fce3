/**
 * The upload-commit workflow under the local runner over `npm start`'s embedded tiers (memory + the local folder,
 * whose upload records it keeps under a lock), as a local run with workflows runs it: in-process, with the API's own
 * coordinator. What the LocalStack test (test/integration/api-async-complete.test.ts) cannot provoke: a step cut off
 * without a word (as by Lambda's 15-minute timeout), which the state machine's catch turns into a given-back upload,
 * and an execution for a claim no longer current, which commits nothing.
 */
import { randomBytes } from 'node:crypto';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { localWorkflows, type LocalWorkflows } from '../../core/workflows/local/local-workflows.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { localFleet, SECRET } from '../integration/warm-fixtures.js';
import { definitions } from './harness.js';

const THRESHOLD = 50_000;
const NS = 'files';

describe('UploadCommit state machine (local runner, local folder tier)', () => {
  let api: TestApi;
  let local: LocalWorkflows;
  const fleet = localFleet(); // no node is launched
  /** `cutOff`: the commit step dies before it does anything, as a Lambda stopped at its timeout. */
  let cutOff = false;

  beforeAll(async () => {
    local = localWorkflows({
      definitions: definitions(),
      cas: new InMemoryCasStore(),
      fleet,
      secret: SECRET,
      retryIntervalMs: 20,
      uploads: () => ({ coordinator: api.ctx.coordinator, ...(api.ctx.presigner ? { presigner: api.ctx.presigner } : {}) }),
      wrapSteps: (steps) => ({
        ...steps,
        'upload-commit.commit': async (input) => {
          if (cutOff) throw Object.assign(new Error('Task timed out after 900.00 seconds'), { name: 'Sandbox.Timedout' });
          return steps['upload-commit.commit'](input);
        },
      }),
    });
    api = await startTestApi(
      'embedded',
      { STRATA_INLINE_LIMIT_BYTES: String(16 * 1024), STRATA_ASYNC_COMPLETE_BYTES: String(THRESHOLD) },
      { workflows: local.service },
    );
  });

  afterEach(() => {
    cutOff = false;
  });

  afterAll(async () => {
    await local?.close();
    await api?.close();
    await fleet.closeAll();
  });

  const post = (key: string, path: string, body: unknown) =>
    fetch(`${api.url}/v1/ns/${NS}/uploads/${key}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  async function staged(key: string, value: Buffer): Promise<string> {
    const ticket = (await (await post(key, '', {})).json()) as { uploadId: string; url: string; headers: Record<string, string> };
    expect((await fetch(ticket.url, { method: 'PUT', headers: ticket.headers, body: value })).ok).toBe(true);
    return ticket.uploadId;
  }

  async function settle(key: string, uploadId: string): Promise<Response> {
    for (let i = 0; i < 200; i++) {
      const res = await post(key, '/complete', { uploadId });
      if (res.status !== 202) return res;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('the completion stayed 202');
  }

  const executionOf = async (uploadId: string) => {
    const [e] = local.runner.list('upload-commit').filter((x) => (x.input as { uploadId: string }).uploadId === uploadId);
    return e ? local.runner.wait(e.name) : undefined;
  };

  it('commits a large upload asynchronously on the folder tier too: 202, then the write', async () => {
    const value = randomBytes(THRESHOLD + 10);
    const uploadId = await staged('big', value);
    expect((await post('big', '/complete', { uploadId })).status).toBe(202);
    const done = await settle('big', uploadId);
    expect(done.status).toBe(200);
    const answer = (await done.json()) as { version: number; size: number };
    expect(answer.size).toBe(value.length);
    const read = await fetch(`${api.url}/v1/ns/${NS}/keys/big`);
    expect(Buffer.from(await read.arrayBuffer()).equals(value)).toBe(true);
    expect(read.headers.get('x-strata-version')).toBe(String(answer.version));
    expect((await executionOf(uploadId))!.status).toBe('SUCCEEDED');
  });

  it('a commit step cut off without a word: the catch gives the upload back, the poll tells it once', async () => {
    const value = randomBytes(THRESHOLD + 20);
    const uploadId = await staged('cut', value);
    cutOff = true;
    expect((await post('cut', '/complete', { uploadId })).status).toBe(202);
    const e = await executionOf(uploadId);
    expect(e!.status).toBe('FAILED');
    expect(e!.states).toEqual(['Commit', 'GiveBack', 'NotCommitted']);
    const failed = await settle('cut', uploadId);
    expect(failed.status).toBe(503);
    const body = (await failed.json()) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(body.error.code).toBe('TIER_UNAVAILABLE');
    expect(body.error.message).toContain('Task timed out');
    expect(body.error.details).toMatchObject({ uploadId, completion: 'failed' });
    // Given back: completing again starts over, and this time the job commits it.
    cutOff = false;
    expect((await post('cut', '/complete', { uploadId })).status).toBe(202);
    expect((await settle('cut', uploadId)).status).toBe(200);
    const read = await fetch(`${api.url}/v1/ns/${NS}/keys/cut`);
    expect(Buffer.from(await read.arrayBuffer()).equals(value)).toBe(true);
  });

  it('an execution for a claim that is not current commits nothing', async () => {
    const uploadId = await staged('stale', randomBytes(THRESHOLD + 30));
    const run = local.runner.start('upload-commit', { ns: NS, key: 'stale', uploadId, owner: null, claimId: 'not-the-claim' });
    const done = await local.runner.wait(run.name);
    expect([done.status, done.output]).toEqual(['SUCCEEDED', { uploadId, committed: false }]);
    expect((await fetch(`${api.url}/v1/ns/${NS}/keys/stale`)).status).toBe(404);
    // The owner's completion is unaffected.
    expect((await post('stale', '/complete', { uploadId })).status).toBe(202);
    expect((await settle('stale', uploadId)).status).toBe(200);
  });
});

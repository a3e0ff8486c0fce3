/**
 * Asynchronous upload completion, the parts that need no services: the upload record's rules for a completion the
 * upload-commit workflow runs (core/tiers/upload-record.ts), the STRATA_ASYNC_COMPLETE_BYTES setting, and the SDK's
 * polling of a 202 completion against a scripted HTTP server (test/integration/api-async-complete.test.ts runs the
 * whole path over redis-server and LocalStack).
 */
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { retryAfterSeconds } from '../../core/api/async-complete.js';
import { UPLOAD_CLAIM_LEASE_MS } from '../../core/tiers/tier.js';
import {
  ASYNC_COMPLETION_LEASE_MS,
  asyncPoll,
  claimed,
  failureTold,
  handedToJob,
  jobCommitted,
  jobFailed,
  jobNotStarted,
  jobStarted,
  openUpload,
  recordOf,
  type StoredUpload,
} from '../../core/tiers/upload-record.js';
import { StrataClient, UploadCompletionTimeoutError } from '../../sdk/src/index.js';
import { scriptedServerForSuite, sendError, sendJson } from '../../sdk/test/scripted-server.js';

const T = 1_800_000_000_000;
const mine = () => true;

function claimedUpload(): StoredUpload {
  const u = openUpload({ uploadId: 'upload-0001', owner: 'tenant:a', ns: 'ns', key: 'k' }, T, 900);
  return claimed(u, mine, T)!;
}

describe('upload record: a completion handed to the upload-commit workflow', () => {
  it('is running while its claim holds, then committed with the stored answer, which polls repeat', () => {
    const c = claimedUpload();
    expect(handedToJob(c, 'another-claim', {}, T)).toBeUndefined();
    const running = handedToJob(c, c.claimId!, { ttlSeconds: null, tags: ['t'], bytes: 5 }, T + 1)!;
    expect(asyncPoll(running, T + 2)).toEqual({ state: 'running', startedAt: T + 1 });
    // The metadata stays in the record, not in what callers see of it (nor in the job's input).
    expect(running.completion).toMatchObject({ ttlSeconds: null, tags: ['t'], bytes: 5, claimId: c.claimId });
    expect(recordOf(running)).not.toHaveProperty('completion');
    // Another completion of the owner while it runs: 409 as for any completion in progress, past the request lease too.
    expect(() => claimed(running, mine, T + UPLOAD_CLAIM_LEASE_MS + 1)).toThrow(/being completed by another request/);
    const done = jobCommitted({ ...running, state: 'completed' }, c.claimId!, { version: 7 })!;
    expect(asyncPoll(done, T + 3)).toEqual({ state: 'committed', result: { version: 7 } });
    expect(asyncPoll(done, T + 10 * ASYNC_COMPLETION_LEASE_MS)).toEqual({ state: 'committed', result: { version: 7 } });
    expect(claimed(done, mine, T + 4)).toBeUndefined(); // completed: never claimable again
  });

  it('a failure gives the upload back, is told once, and the next completion starts afresh', () => {
    const c = claimedUpload();
    const running = handedToJob(c, c.claimId!, {}, T)!;
    const failure = { code: 'NOT_FOUND', message: 'gone' };
    expect(jobFailed(running, 'stale-claim', failure)).toBeUndefined();
    const failed = jobFailed(running, c.claimId!, failure)!;
    expect([failed.state, failed.claimId]).toEqual(['open', undefined]);
    expect(asyncPoll(failed, T + 1)).toEqual({ state: 'failed', failure });
    expect(jobFailed(failed, c.claimId!, failure)).toBeUndefined(); // the catch after the step recorded it: no-op
    const told = failureTold(failed)!;
    expect(told.completion).toBeUndefined();
    expect(failureTold(told)).toBeUndefined(); // once
    expect(asyncPoll(told, T + 2)).toEqual({ state: 'none' });
    expect(claimed(told, mine, T + 3)).toMatchObject({ state: 'claimed' });
  });

  it('a failure after the commit is told, and the completed upload stays completed', () => {
    const c = claimedUpload();
    const running = handedToJob(c, c.claimId!, {}, T)!;
    const failed = jobFailed({ ...running, state: 'completed' }, c.claimId!, { code: 'TIER_UNAVAILABLE', message: 'x' })!;
    expect(failed.state).toBe('completed');
    expect(asyncPoll(failed, T).state).toBe('failed');
    expect(claimed(failureTold(failed)!, mine, T)).toBeUndefined();
  });

  it('a job lost without a word is taken for lost after its lease; a job never started leaves no trace', () => {
    const c = claimedUpload();
    const running = handedToJob(c, c.claimId!, {}, T)!;
    expect(asyncPoll(running, T + ASYNC_COMPLETION_LEASE_MS - 1).state).toBe('running');
    expect(asyncPoll(running, T + ASYNC_COMPLETION_LEASE_MS).state).toBe('none');
    // ... and a new completion may then take it over (the lost job's claim no longer holds).
    const retaken = claimed(running, mine, T + ASYNC_COMPLETION_LEASE_MS)!;
    expect([retaken.claimId === c.claimId, retaken.completion]).toEqual([false, undefined]);
    const back = jobNotStarted(running, c.claimId!)!;
    expect([back.state, back.claimId, back.completion]).toEqual(['open', undefined, undefined]);
  });
});

describe('upload record: one execution per claim', () => {
  it('the first execution to take the job keeps it; a second (an event delivered twice) and a stale claim do not', () => {
    const c = claimedUpload();
    const running = handedToJob(c, c.claimId!, {}, T)!;
    const taken = jobStarted(running, c.claimId!, 'exec-1')!;
    expect(taken.completion!.execution).toBe('exec-1');
    expect(jobStarted(taken, c.claimId!, 'exec-1')).toBeDefined(); // the same execution, retried
    expect(jobStarted(taken, c.claimId!, 'exec-2')).toBeUndefined();
    expect(jobStarted(running, 'old-claim', 'exec-3')).toBeUndefined();
    expect(jobStarted(c, c.claimId!, 'exec-4')).toBeUndefined(); // not handed to a job
  });
});

describe('STRATA_ASYNC_COMPLETE_BYTES', () => {
  it('defaults to 1 GiB, takes 0 (never) and whole byte counts, and names what is wrong otherwise', () => {
    expect(loadRuntimeEnv({}).STRATA_ASYNC_COMPLETE_BYTES).toBe(1024 ** 3);
    expect(loadRuntimeEnv({ STRATA_ASYNC_COMPLETE_BYTES: '0' }).STRATA_ASYNC_COMPLETE_BYTES).toBe(0);
    expect(loadRuntimeEnv({ STRATA_ASYNC_COMPLETE_BYTES: '5368709120' }).STRATA_ASYNC_COMPLETE_BYTES).toBe(5 * 1024 ** 3);
    expect(() => loadRuntimeEnv({ STRATA_ASYNC_COMPLETE_BYTES: '1GiB' })).toThrow(
      /STRATA_ASYNC_COMPLETE_BYTES must be a number of bytes \(e\.g\. 1073741824 for 1 GiB\), or 0 for never/,
    );
    expect(() => loadRuntimeEnv({ STRATA_ASYNC_COMPLETE_BYTES: '1.5' })).toThrow(/must be a whole number of bytes/);
    expect(() => loadRuntimeEnv({ STRATA_ASYNC_COMPLETE_BYTES: '100' })).toThrow(/0 \(never asynchronous\) or from 1024 bytes/);
  });

  it('suggests polling a second per GiB staged, 1 to 30 s', () => {
    expect([retryAfterSeconds(1), retryAfterSeconds(1024 ** 3), retryAfterSeconds(3.5 * 1024 ** 3)]).toEqual([1, 1, 4]);
    expect(retryAfterSeconds(1024 ** 4)).toBe(30);
  });
});

describe("the SDK's completion polls a 202 (scripted server)", () => {
  const suite = scriptedServerForSuite();
  const client = () =>
    new StrataClient({ endpoint: suite.server.url, namespace: 'ns', retries: 0, inlineLimitBytes: 1024, timeoutMs: 2000 });
  const ticket = (res: Parameters<typeof sendJson>[0]) =>
    sendJson(res, 200, { uploadId: 'upload-0001', url: `${suite.server.url}/blob`, method: 'PUT', headers: {} });

  it('sends the same completion again after Retry-After until the write answers', async () => {
    let polls = 0;
    const at: number[] = [];
    suite.server.script((req, res) => {
      if (req.path === '/v1/ns/ns/uploads/big') return ticket(res);
      if (req.path === '/blob') return sendJson(res, 200, {});
      at.push(Date.now());
      if (++polls < 3)
        return sendJson(
          res,
          202,
          { uploadId: 'upload-0001', status: 'completing', retryAfterSeconds: 1 },
          { 'retry-after': '0.3' },
        );
      sendJson(res, 200, { ns: 'ns', key: 'big', version: 42, expiresAt: null, size: 2048, tiers: ['cold'], durable: true });
    });
    const put = await client().put('big', new Uint8Array(2048));
    expect(put).toMatchObject({ version: 42, size: 2048 });
    const completions = suite.server.requests.filter((r) => r.path.endsWith('/complete'));
    expect(completions).toHaveLength(3);
    expect(new Set(completions.map((r) => r.body.toString())).size).toBe(1); // the same request each time
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(250); // Retry-After honoured
  });

  it('gives up after completeTimeoutMs with UploadCompletionTimeoutError naming the upload (not retried)', async () => {
    suite.server.script((req, res) => {
      if (req.path === '/v1/ns/ns/uploads/slow') return ticket(res);
      if (req.path === '/blob') return sendJson(res, 200, {});
      sendJson(res, 202, { uploadId: 'upload-0001', status: 'completing', retryAfterSeconds: 1 }, { 'retry-after': '1' });
    });
    const err = await client()
      .put('slow', new Uint8Array(2048), { completeTimeoutMs: 400 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UploadCompletionTimeoutError);
    expect(err).toMatchObject({ code: 'COMPLETION_TIMEOUT', status: 0, uploadId: 'upload-0001', retryable: false });
    // One ticket: a completion still running is not a reason to upload again.
    expect(suite.server.requests.filter((r) => r.path === '/v1/ns/ns/uploads/slow')).toHaveLength(1);
  });

  it("passes the poll's failure on as the completion's typed error", async () => {
    suite.server.script((req, res) => {
      if (req.path === '/v1/ns/ns/uploads/bad') return ticket(res);
      if (req.path === '/blob') return sendJson(res, 200, {});
      sendError(res, 404, 'NOT_FOUND', 'upload not found');
    });
    await expect(client().put('bad', new Uint8Array(2048))).rejects.toMatchObject({ code: 'NOT_FOUND', status: 404 });
  });
});

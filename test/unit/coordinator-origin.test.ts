import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import type { LambdaInvoke, LambdaInvokeRequest } from '../../core/coordinator/lambda-origin.js';
import { StrataError } from '../../core/errors.js';
import { PolicyRegistry, type NamespacePolicyInput } from '../../core/policy/namespace-settings.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { SwitchableTier, entry } from '../helpers/tiers.js';

/**
 * Read-through (coordinator/origin.ts): negative caching of origin 404s and stale-while-revalidate, over real tiers
 * and a real HTTP origin on localhost.
 */

interface Origin {
  url: string;
  /** Requests per key. */
  asked: Map<string, number>;
  /** What the origin holds (absent: 404). */
  values: Map<string, string>;
  /** While set, answers wait for it (a slow origin). */
  gate?: Promise<void>;
  server: Server;
}

async function startOrigin(): Promise<Origin> {
  const asked = new Map<string, number>();
  const values = new Map<string, string>();
  const o = { asked, values } as Origin;
  const server = createServer(async (req, res) => {
    const key = decodeURIComponent(req.url!.slice('/items/'.length));
    asked.set(key, (asked.get(key) ?? 0) + 1);
    await o.gate;
    const v = values.get(key);
    if (v === undefined) res.writeHead(404).end();
    else res.writeHead(200, { 'content-type': 'text/plain' }).end(v);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(o, { url: `http://127.0.0.1:${port}/items/{key}`, server });
}

let origin: Origin;
beforeAll(async () => {
  origin = await startOrigin();
});
afterAll(async () => {
  await new Promise((resolve) => origin.server.close(resolve));
});
beforeEach(() => {
  origin.asked.clear();
  origin.values.clear();
  origin.gate = undefined;
});

type OriginInput = Partial<NonNullable<NamespacePolicyInput['origin']>>;
type SetupOptions = { l1?: boolean; invokeLambda?: LambdaInvoke; settings?: NamespacePolicyInput };

function setup(o: OriginInput = {}, opts: SetupOptions = {}) {
  const hot = new SwitchableTier('hot');
  const cold = new SwitchableTier('cold');
  const c = new Coordinator({
    tiers: [hot, cold],
    ...(opts.l1 ? { nearCache: new MemoryTier({ name: 'l1', maxBytes: 1024 * 1024 }) } : {}),
    policies: new PolicyRegistry({
      defaults: { ...opts.settings, origin: { url: origin.url, ...o } as NamespacePolicyInput['origin'] },
    }),
    flushTimer: false,
    onBackgroundError: () => {},
    hotFence: false,
    ...(opts.invokeLambda ? { invokeLambda: opts.invokeLambda } : {}),
  });
  return { c, hot, cold };
}

const text = (r: { entry: { value: Buffer } } | undefined) => r?.entry.value.toString();

describe('negative caching of origin 404s', () => {
  it('asks the origin again on every miss when negativeTtlSeconds is 0 (the default)', async () => {
    const { c } = setup();
    expect(await c.get('ns', 'gone')).toBeUndefined();
    expect(await c.get('ns', 'gone')).toBeUndefined();
    expect(origin.asked.get('gone')).toBe(2);
  });

  it('remembers a 404 in the tiers, so repeated reads of a missing key do not reach the origin', async () => {
    const { c, cold } = setup({ negativeTtlSeconds: 60 });
    expect(await c.get('ns', 'gone')).toBeUndefined();
    expect(await c.get('ns', 'gone')).toBeUndefined();
    expect(await c.getMany('ns', ['gone'])).toEqual([undefined]);
    expect(origin.asked.get('gone')).toBe(1);
    // A tombstone in the durable tier: every coordinator shares it.
    const tomb = await cold.get('ns', 'gone');
    expect(tomb?.header.flags.tombstone).toBe(true);
    expect(tomb!.header.expiresAt! - Date.now()).toBeLessThanOrEqual(60_000);
  });

  it('shares the negative entry with a second coordinator over the same tiers', async () => {
    const a = setup({ negativeTtlSeconds: 60 });
    const b = new Coordinator({
      tiers: [a.hot, a.cold],
      policies: new PolicyRegistry({ defaults: { origin: { url: origin.url, negativeTtlSeconds: 60 } } }),
      flushTimer: false,
      hotFence: false,
    });
    expect(await a.c.get('ns', 'gone')).toBeUndefined();
    expect(await b.get('ns', 'gone')).toBeUndefined();
    expect(origin.asked.get('gone')).toBe(1);
  });

  it('lets a write of the key after a negative entry be read at once', async () => {
    const { c } = setup({ negativeTtlSeconds: 60 }, { l1: true });
    expect(await c.get('ns', 'k')).toBeUndefined();
    await c.put('ns', 'k', Buffer.from('written'));
    expect(text(await c.get('ns', 'k'))).toBe('written');
    expect(origin.asked.get('k')).toBe(1);
  });

  it('asks the origin again once an invalidation covers the negative entry', async () => {
    const { c } = setup({ negativeTtlSeconds: 60 }, { l1: true });
    expect(await c.get('ns', 'k')).toBeUndefined();
    origin.values.set('k', 'arrived');
    await c.invalidate('ns', { prefix: 'k' }, 'test');
    expect(text(await c.get('ns', 'k'))).toBe('arrived');
    expect(origin.asked.get('k')).toBe(2);
  });

  it('answers the 404 even when the negative entry cannot be written', async () => {
    const { c, hot } = setup({ negativeTtlSeconds: 60 }, { settings: { writeMode: 'write-back' } });
    hot.down = true;
    expect(await c.get('ns', 'k')).toBeUndefined();
  });

  it('still asks the origin after a delete (only an origin 404 is remembered)', async () => {
    const { c } = setup({ negativeTtlSeconds: 60 });
    origin.values.set('k', 'v');
    await c.put('ns', 'k', Buffer.from('written'));
    await c.delete('ns', 'k');
    expect(text(await c.get('ns', 'k'))).toBe('v');
  });
});

describe('stale-while-revalidate', () => {
  /** An origin value as the loader writes it, already `pastTtlMs` past its TTL, within a 60 s grace. */
  const staleEntry = (version: number, value: string, pastTtlMs = 1000) =>
    entry(version, value, { staleAt: Date.now() - pastTtlMs, expiresAt: Date.now() - pastTtlMs + 60_000 });

  it('keeps a loaded value in the tiers for the grace period past its TTL', async () => {
    const { c, cold } = setup({ ttlSeconds: 30, staleWhileRevalidateSeconds: 60 });
    origin.values.set('k', 'v1');
    const r = await c.get('ns', 'k');
    const h = r!.entry.header;
    expect(h.expiresAt! - h.staleAt!).toBe(60_000);
    expect((await cold.head('ns', 'k'))!.staleAt).toBe(h.staleAt);
  });

  it('serves a value within its grace marked stale, and one background refresh replaces it', async () => {
    const { c, cold } = setup({ staleWhileRevalidateSeconds: 60 });
    await cold.put('ns', 'k', staleEntry(10, 'old'));
    origin.values.set('k', 'new');
    const [a, b] = await Promise.all([c.get('ns', 'k'), c.get('ns', 'k')]);
    expect([text(a), text(b)]).toEqual(['old', 'old']);
    expect(a!.entry.header.staleAt).toBeLessThanOrEqual(Date.now());
    await c.drain();
    // Concurrent stale reads started one refresh.
    expect(origin.asked.get('k')).toBe(1);
    const fresh = await c.get('ns', 'k');
    expect(text(fresh)).toBe('new');
    expect(fresh!.entry.header.version).toBe(11);
    expect(fresh!.entry.header.staleAt).toBeGreaterThan(Date.now());
  });

  it('treats a value past its TTL as a miss when the namespace has no grace', async () => {
    const { c, cold } = setup({});
    await cold.put('ns', 'k', staleEntry(10, 'old'));
    origin.values.set('k', 'new');
    expect(text(await c.get('ns', 'k'))).toBe('new');
  });

  it('never lets a refresh replace a write acknowledged after the stale read', async () => {
    const { c, cold } = setup({ staleWhileRevalidateSeconds: 60 });
    await cold.put('ns', 'k', staleEntry(10, 'old'));
    origin.values.set('k', 'from-origin');
    let release!: () => void;
    origin.gate = new Promise((resolve) => (release = resolve));
    // The stale read starts the refresh, which waits at the origin while a write is acknowledged.
    expect(text(await c.get('ns', 'k'))).toBe('old');
    await c.put('ns', 'k', Buffer.from('written'));
    release();
    await c.drain();
    expect(origin.asked.get('k')).toBe(1);
    expect(text(await c.get('ns', 'k'))).toBe('written');
  });

  it('stops serving the stale value once the refresh finds the key gone at the origin', async () => {
    const { c, cold } = setup({ staleWhileRevalidateSeconds: 60 });
    await cold.put('ns', 'k', staleEntry(10, 'old'));
    expect(text(await c.get('ns', 'k'))).toBe('old');
    await c.drain();
    expect(await c.get('ns', 'k')).toBeUndefined();
  });

  it('never serves an invalidated entry stale', async () => {
    const { c, cold } = setup({ staleWhileRevalidateSeconds: 60 });
    await cold.put('ns', 'k', staleEntry(10, 'old'));
    await c.invalidate('ns', { prefix: 'k' }, 'test');
    origin.values.set('k', 'new');
    expect(text(await c.get('ns', 'k'))).toBe('new');
  });
});

describe('Lambda origins (a stand-in for the Invoke call)', () => {
  // LocalStack cannot run Lambda functions on these machines (no Docker), so the invoker is replaced at the
  // composition boundary (CoordinatorOptions.invokeLambda) by a stand-in that records each request; the request
  // shape is checked against the Invoke API (https://docs.aws.amazon.com/lambda/latest/dg/API_Invoke.html).
  const ARN = 'arn:aws:lambda:us-east-1:123456789012:function:catalog:live';
  const answer = (body: unknown, extra: { FunctionError?: string } = {}): LambdaInvoke => {
    const fn: LambdaInvoke = async (req) => {
      requests.push(req);
      return { StatusCode: 200, Payload: Buffer.from(JSON.stringify(body)), ...extra };
    };
    return fn;
  };
  let requests: LambdaInvokeRequest[] = [];
  beforeEach(() => {
    requests = [];
  });
  const lambda = (invokeLambda: LambdaInvoke, o: Record<string, unknown> = {}) =>
    setup({ url: undefined, lambda: ARN, ...o }, { invokeLambda }).c;

  it('invokes the declared ARN synchronously with the JSON payload {ns, key} and stores the decoded value', async () => {
    const c = lambda(answer({ found: true, value: Buffer.from('héllo').toString('base64'), contentType: 'text/plain' }));
    const r = await c.get('ns', 'a/b');
    expect(text(r)).toBe('héllo');
    expect(r!.tier).toBe('origin');
    expect(r!.entry.header.contentType).toBe('text/plain');
    // The qualifier travels inside the ARN (FunctionName), the form the IAM grant names exactly.
    expect(requests).toHaveLength(1);
    expect(requests[0]!.FunctionName).toBe(ARN);
    expect(requests[0]!.InvocationType).toBe('RequestResponse');
    expect(JSON.parse(Buffer.from(requests[0]!.Payload).toString())).toEqual({ ns: 'ns', key: 'a/b' });
    expect(text(await c.get('ns', 'a/b'))).toBe('héllo');
    expect(requests).toHaveLength(1);
  });

  it("uses the function's own ttlSeconds for the value it answers", async () => {
    const c = lambda(answer({ found: true, value: '', ttlSeconds: 5 }));
    const r = await c.get('ns', 'k');
    expect(r!.entry.header.expiresAt! - Date.now()).toBeLessThanOrEqual(5000);
  });

  it('answers a miss for {found: false}, and remembers it with negative caching', async () => {
    const c = lambda(answer({ found: false }), { negativeTtlSeconds: 30 });
    expect(await c.get('ns', 'k')).toBeUndefined();
    expect(await c.get('ns', 'k')).toBeUndefined();
    expect(requests).toHaveLength(1);
  });

  it('fails ORIGIN_FAILED with the error type when the function reports a FunctionError', async () => {
    const c = lambda(answer({ errorType: 'TypeError', errorMessage: 'boom' }, { FunctionError: 'Unhandled' }));
    const e = (await c.get('ns', 'k').catch((x: unknown) => x)) as StrataError;
    expect(e.code).toBe('ORIGIN_FAILED');
    expect(e.status).toBe(502);
    expect(e.details).toMatchObject({ function: ARN, functionError: 'Unhandled', errorType: 'TypeError', errorMessage: 'boom' });
  });

  it.each([
    ['a JSON array', []],
    ['no found field', { value: 'aGk=' }],
    ['a value that is not base64', { found: true, value: 'not base64!' }],
    ['a bad ttlSeconds', { found: true, value: '', ttlSeconds: 0 }],
  ])('fails ORIGIN_FAILED naming the contract for an answer with %s', async (_what, body) => {
    const c = lambda(answer(body));
    const e = (await c.get('ns', 'k').catch((x: unknown) => x)) as StrataError;
    expect(e.code).toBe('ORIGIN_FAILED');
    expect(e.message).toContain('"found": true');
  });

  it('fails ORIGIN_FAILED when the function does not answer within timeoutMs', async () => {
    const hang: LambdaInvoke = (_req, signal) =>
      new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    const c = lambda(hang, { timeoutMs: 20 });
    const e = (await c.get('ns', 'k').catch((x: unknown) => x)) as StrataError;
    expect(e.code).toBe('ORIGIN_FAILED');
    expect(e.message).toBe('origin did not answer within 20 ms');
  });

  it('says which declaration is missing when IAM denies the invocation', async () => {
    const denied: LambdaInvoke = async () => {
      throw Object.assign(new Error('not authorized'), { name: 'AccessDeniedException' });
    };
    const e = (await lambda(denied)
      .get('ns', 'k')
      .catch((x: unknown) => x)) as StrataError;
    expect(e.code).toBe('ORIGIN_FAILED');
    expect(e.message).toContain('api.lambdaOrigins');
  });
});

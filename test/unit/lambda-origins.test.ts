import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { lambdaOriginInvoker } from '../../core/composition/lambda-origins.js';
import { policyPartsFromEnv } from '../../core/composition/policy-env.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { lambdaOriginRequest } from '../../core/coordinator/lambda-origin.js';
import { StrataError } from '../../core/errors.js';
import { PolicyAdministration } from '../../core/policy/admin.js';
import { compilePolicyInput, documentFromNamespaceConfig } from '../../core/policy/compile.js';
import { namespacePolicySchema } from '../../core/policy/namespace-settings.js';
import { InMemoryCasStore } from '../../core/ring/store.js';

/**
 * Lambda origins outside the coordinator: the origin setting's shape, the declared-origins rule of policy validation,
 * and the SDK invoker the composition root builds.
 */

const DECLARED = 'arn:aws:lambda:us-east-1:123456789012:function:catalog';
const OTHER = 'arn:aws:lambda:us-east-1:123456789012:function:other';

const readThrough = (lambda: string) => ({
  rules: [{ id: 'rt', scope: { namespace: 'shop' }, on: { action: 'get' }, do: [{ retrieve: { origin: { lambda } } }] }],
});

describe('the origin setting', () => {
  // ARN formats of the Invoke API's FunctionName (https://docs.aws.amazon.com/lambda/latest/dg/API_Invoke.html):
  // full ARNs only, unqualified or with a version, an alias or $LATEST.
  it.each([
    DECLARED,
    `${DECLARED}:7`,
    `${DECLARED}:live`,
    `${DECLARED}:$LATEST`,
    'arn:aws-cn:lambda:cn-north-1:123456789012:function:f',
  ])('accepts the function ARN %s', (lambda) =>
    expect(namespacePolicySchema.shape.origin.parse({ lambda })?.lambda).toBe(lambda),
  );

  it.each(['catalog', '123456789012:function:catalog', 'arn:aws:lambda:us-east-1:123456789012:catalog', `${DECLARED}:a:b`])(
    'refuses %s, which is not a full function ARN',
    (lambda) => expect(namespacePolicySchema.shape.origin.safeParse({ lambda }).success).toBe(false),
  );

  it('names exactly one of url and lambda', () => {
    const both = namespacePolicySchema.shape.origin.safeParse({ lambda: DECLARED, url: 'http://o/{key}' });
    expect(both.error?.issues[0]?.message).toMatch(/exactly one of url .* or lambda/);
    expect(namespacePolicySchema.shape.origin.safeParse({ timeoutMs: 100 }).success).toBe(false);
  });

  it('defaults negative caching and stale-while-revalidate to off', () => {
    expect(namespacePolicySchema.shape.origin.parse({ url: 'http://o/{key}' })).toMatchObject({
      negativeTtlSeconds: 0,
      staleWhileRevalidateSeconds: 0,
    });
  });
});

describe('declared Lambda origins', () => {
  it('refuses a policy naming an undeclared function, listing the declared ones', () => {
    expect(() => compilePolicyInput(readThrough(OTHER), { lambdaOrigins: [DECLARED] })).toThrow(
      new RegExp(`'${OTHER}' is not a Lambda origin this deployment declares \\(declared: ${DECLARED}\\)`),
    );
    expect(() => compilePolicyInput(readThrough(DECLARED))).toThrow(/declared: none/);
  });

  it('accepts a policy naming a declared function', () => {
    const compiled = compilePolicyInput(readThrough(DECLARED), { lambdaOrigins: [DECLARED] });
    expect(compiled.registry.for('shop').origin?.lambda).toBe(DECLARED);
  });

  it('refuses a policy document put through the admin API with a 400 naming the declared functions', async () => {
    const admin = new PolicyAdministration({
      cas: new InMemoryCasStore(),
      deployment: documentFromNamespaceConfig({}),
      compile: { lambdaOrigins: [DECLARED] },
    });
    const e = (await admin.put(readThrough(OTHER), { ifVersion: 0, author: 'ops' }).catch((x: unknown) => x)) as StrataError;
    expect(e.status).toBe(400);
    expect(e.code).toBe('VALIDATION_FAILED');
    expect(e.message).toContain(`declared: ${DECLARED}`);
    await expect(admin.put(readThrough(DECLARED), { ifVersion: 0, author: 'ops' })).resolves.toMatchObject({ version: 1 });
  });

  it('refuses at start-up a deployment config (STRATA_NAMESPACES) naming an undeclared function', () => {
    const namespaces = JSON.stringify({ namespaces: { shop: { origin: { lambda: OTHER } } } });
    const env = (extra: Record<string, string>) => loadRuntimeEnv({ STRATA_NAMESPACES: namespaces, ...extra });
    expect(() => policyPartsFromEnv(env({ STRATA_LAMBDA_ORIGINS: DECLARED }))).toThrow(/is not a Lambda origin this deployment/);
    const parts = policyPartsFromEnv(env({ STRATA_LAMBDA_ORIGINS: `${DECLARED},${OTHER}` }));
    expect(parts.deployment.registry.for('shop').origin?.lambda).toBe(OTHER);
  });

  it('refuses STRATA_LAMBDA_ORIGINS entries that are not function ARNs', () => {
    expect(() => loadRuntimeEnv({ STRATA_LAMBDA_ORIGINS: 'catalog' })).toThrow(
      /STRATA_LAMBDA_ORIGINS must list Lambda function ARNs/,
    );
  });
});

describe('the SDK invoker (composition/lambda-origins.ts)', () => {
  // A local HTTP server stands in for the Lambda endpoint (LocalStack cannot run functions here: no Docker): the SDK
  // sends the real Invoke request, and the stand-in answers as the Invoke API documents
  // (https://docs.aws.amazon.com/lambda/latest/dg/API_Invoke.html: the payload as the body, X-Amz-Function-Error
  // when the function failed).
  let server: Server;
  let endpoint: string;
  const seen: { method?: string; url?: string; invocationType?: string; body: string }[] = [];
  let answer: { status: number; headers: Record<string, string>; body: string };
  const saved = { ...process.env };

  beforeAll(async () => {
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' });
    server = createServer(async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      seen.push({
        method: req.method,
        url: req.url,
        invocationType: req.headers['x-amz-invocation-type'] as string | undefined,
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(answer.status, answer.headers).end(answer.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    process.env = saved;
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends a synchronous Invoke of the qualified ARN with the {ns, key} payload', async () => {
    answer = { status: 200, headers: { 'content-type': 'application/json' }, body: '{"found":false}' };
    const invoke = lambdaOriginInvoker({ endpoint });
    const out = await invoke(lambdaOriginRequest(`${DECLARED}:live`, 'shop', 'a/b'), AbortSignal.timeout(5000));
    expect(out.StatusCode).toBe(200);
    expect(out.FunctionError).toBeUndefined();
    expect(Buffer.from(out.Payload!).toString()).toBe('{"found":false}');
    const req = seen.at(-1)!;
    expect(req.method).toBe('POST');
    expect(decodeURIComponent(req.url!)).toBe(`/2015-03-31/functions/${DECLARED}:live/invocations`);
    expect(req.invocationType).toBe('RequestResponse');
    expect(JSON.parse(req.body)).toEqual({ ns: 'shop', key: 'a/b' });
  });

  it('passes on the FunctionError header of a failed function', async () => {
    answer = {
      status: 200,
      headers: { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' },
      body: '{"errorType":"Error","errorMessage":"boom"}',
    };
    const out = await lambdaOriginInvoker({ endpoint })(lambdaOriginRequest(DECLARED, 'shop', 'k'), AbortSignal.timeout(5000));
    expect(out.FunctionError).toBe('Unhandled');
    expect(JSON.parse(Buffer.from(out.Payload!).toString())).toMatchObject({ errorMessage: 'boom' });
  });
});

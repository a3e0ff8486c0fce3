import { StrataError } from '../errors.js';

/**
 * Read-through from a Lambda function (docs/POLICIES.md, "Lambda origins"). The coordinator knows only this request
 * and answer shape; the composition root (composition/lambda-origins.ts) builds the AWS SDK client that sends it,
 * so core/coordinator never imports the SDK.
 *
 * Contract: the function is invoked synchronously (RequestResponse) with the JSON payload `{ "ns", "key" }` and
 * answers `{ "found": false }`, or `{ "found": true, "value": "<base64>", "contentType"?: string,
 * "ttlSeconds"?: number | null }`. A synchronous answer is at most 6 MB
 * (https://docs.aws.amazon.com/lambda/latest/dg/API_Invoke.html), so a value is at most about 4.5 MB once base64.
 */

/** The Invoke request Strata sends (the subset of InvokeCommandInput it uses). */
export interface LambdaInvokeRequest {
  /** The declared function ARN, as the policy names it (a qualifier, when there is one, is part of it). */
  FunctionName: string;
  InvocationType: 'RequestResponse';
  Payload: Uint8Array;
}

/** What Strata reads of the Invoke answer (the subset of InvokeCommandOutput). */
export interface LambdaInvokeResponse {
  StatusCode?: number;
  /** Set when the function threw or timed out (Invoke's X-Amz-Function-Error): the payload then holds the error. */
  FunctionError?: string;
  Payload?: Uint8Array;
}

/** Sends one Invoke; rejects when the call itself fails (throttled, denied, unknown function) or `signal` aborts. */
export type LambdaInvoke = (request: LambdaInvokeRequest, signal: AbortSignal) => Promise<LambdaInvokeResponse>;

export interface LambdaOriginValue {
  value: Buffer;
  contentType?: string;
  /** The function's own TTL for this value (null: no expiry); undefined: the origin's ttlSeconds. */
  ttlSeconds?: number | null;
}

/** The request for one key: the function ARN, and the `{ ns, key }` payload. */
export function lambdaOriginRequest(functionArn: string, ns: string, key: string): LambdaInvokeRequest {
  return {
    FunctionName: functionArn,
    InvocationType: 'RequestResponse',
    Payload: Buffer.from(JSON.stringify({ ns, key }), 'utf8'),
  };
}

/** Invokes the origin function for `key`; undefined = the function has no such key (`found: false`). */
export async function invokeLambdaOrigin(
  invoke: LambdaInvoke | undefined,
  origin: { lambda: string; timeoutMs: number },
  ns: string,
  key: string,
): Promise<LambdaOriginValue | undefined> {
  const fn = origin.lambda;
  if (!invoke) throw new StrataError('ORIGIN_FAILED', 'this runtime has no Lambda client for Lambda origins', { function: fn });
  let res: LambdaInvokeResponse;
  const signal = AbortSignal.timeout(origin.timeoutMs);
  try {
    res = await invoke(lambdaOriginRequest(fn, ns, key), signal);
  } catch (e) {
    const name = e instanceof Error ? e.name : 'Error';
    if (signal.aborted || name === 'TimeoutError' || name === 'AbortError')
      throw new StrataError(
        'ORIGIN_FAILED',
        `origin did not answer within ${origin.timeoutMs} ms`,
        { function: fn },
        { cause: e },
      );
    const denied = name === 'AccessDeniedException' || name === 'AccessDenied';
    const hint = denied
      ? ": the API functions may invoke only the functions declared in the environment's config (api.lambdaOrigins)"
      : '';
    const message = `origin function could not be invoked (${name})${hint}`;
    throw new StrataError('ORIGIN_FAILED', message, { function: fn, error: name }, { cause: e });
  }
  const text = res.Payload ? Buffer.from(res.Payload).toString('utf8') : '';
  if (res.FunctionError) {
    // The payload is Lambda's error object ({ errorType, errorMessage, ... }): its type and message, cut short.
    const err = parseJson(text) as { errorType?: unknown; errorMessage?: unknown } | undefined;
    throw new StrataError('ORIGIN_FAILED', `origin function failed (${res.FunctionError}); see its logs`, {
      function: fn,
      functionError: res.FunctionError,
      ...(typeof err?.errorType === 'string' ? { errorType: err.errorType.slice(0, 200) } : {}),
      ...(typeof err?.errorMessage === 'string' ? { errorMessage: err.errorMessage.slice(0, 500) } : {}),
    });
  }
  return parseAnswer(fn, parseJson(text));
}

/** The function's answer, checked against the contract; a bad one is the function's fault (502), said precisely. */
function parseAnswer(fn: string, a: unknown): LambdaOriginValue | undefined {
  const bad = (why: string): StrataError =>
    new StrataError('ORIGIN_FAILED', `origin function answered ${why}; expected ${CONTRACT}`, { function: fn });
  if (!a || typeof a !== 'object' || Array.isArray(a)) throw bad('something other than a JSON object');
  const o = a as Record<string, unknown>;
  if (o.found === false) return undefined;
  if (o.found !== true) throw bad('without "found": true or false');
  if (typeof o.value !== 'string' || !BASE64.test(o.value)) throw bad('a "value" that is not a base64 string');
  if (o.contentType !== undefined && typeof o.contentType !== 'string') throw bad('a "contentType" that is not a string');
  const ttl = o.ttlSeconds;
  if (ttl !== undefined && ttl !== null && !(Number.isInteger(ttl) && (ttl as number) >= 1 && (ttl as number) <= 31_536_000))
    throw bad('a "ttlSeconds" that is not null or a whole number of seconds from 1 to 31536000');
  return {
    value: Buffer.from(o.value, 'base64'),
    ...(o.contentType !== undefined ? { contentType: o.contentType as string } : {}),
    ...(ttl !== undefined ? { ttlSeconds: ttl as number | null } : {}),
  };
}

const CONTRACT = '{"found": false} or {"found": true, "value": "<base64>", "contentType"?, "ttlSeconds"?}';
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

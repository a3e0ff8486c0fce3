import type { IncomingMessage } from 'node:http';
import type { APIGatewayProxyEvent, Context } from 'aws-lambda';

/**
 * Builds the API Gateway REST (v1) proxy event API Gateway would send for this request, with binary media
 * types set to `*\/*` as the API stack configures them (so every body arrives base64-encoded).
 */
export function toApiGatewayEvent(
  req: IncomingMessage,
  body: Buffer,
  match: { resource: string; pathParameters: Record<string, string> },
  requestId: string,
  path: string,
  query: URLSearchParams,
): APIGatewayProxyEvent {
  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    const value = req.rawHeaders[i + 1]!;
    headers[name] = value;
    (multiValueHeaders[name] ??= []).push(value);
  }
  const qs: Record<string, string> = {};
  const mqs: Record<string, string[]> = {};
  for (const [k, v] of query) {
    qs[k] = v;
    (mqs[k] ??= []).push(v);
  }
  const now = Date.now();
  const apiKey = typeof req.headers['x-api-key'] === 'string' && req.headers['x-api-key'] ? req.headers['x-api-key'] : undefined;
  return {
    resource: match.resource,
    path,
    httpMethod: req.method ?? 'GET',
    headers,
    multiValueHeaders,
    queryStringParameters: Object.keys(qs).length ? qs : null,
    multiValueQueryStringParameters: Object.keys(mqs).length ? mqs : null,
    pathParameters: Object.keys(match.pathParameters).length ? match.pathParameters : null,
    stageVariables: null,
    body: body.length ? body.toString('base64') : null,
    isBase64Encoded: body.length > 0,
    requestContext: {
      accountId: 'local',
      apiId: 'local',
      authorizer: null,
      protocol: `HTTP/${req.httpVersion}`,
      httpMethod: req.method ?? 'GET',
      // API Gateway puts the id of the caller's key here. Locally there is no key store: a key sent in x-api-key
      // is its own id, so STRATA_TENANT_ACCESS can name local keys (api/tenant-access.ts).
      identity: {
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: req.headers['user-agent'] ?? null,
        ...(apiKey ? { apiKey, apiKeyId: apiKey } : {}),
      } as APIGatewayProxyEvent['requestContext']['identity'],
      path,
      stage: 'local',
      requestId,
      requestTimeEpoch: now,
      resourceId: 'local',
      resourcePath: match.resource,
    },
  };
}

export function lambdaContext(requestId: string, functionName: string): Context {
  const deadline = Date.now() + 29_000;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: '1024',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import type { LambdaInvoke } from '../coordinator/lambda-origin.js';

/**
 * The Invoke of Lambda origins (coordinator/lambda-origin.ts), sent with the AWS SDK: one client per region, taken from
 * each function's ARN and made on its first use (a deployment declaring no Lambda origin never makes one). In AWS the
 * data functions run in the VPC without internet access: they reach Lambda through the interface endpoint the
 * Network stack adds when the environment declares Lambda origins (cdk/app.ts).
 */
export function lambdaOriginInvoker(opts: { endpoint?: string } = {}): LambdaInvoke {
  const clients = new Map<string, LambdaClient>();
  return async (request, signal) => {
    const region = request.FunctionName.split(':')[3]!;
    let client = clients.get(region);
    if (!client) {
      // No SDK retries: the origin's timeoutMs bounds the whole call, and a read that fails is retried by its client.
      client = new LambdaClient({ region, maxAttempts: 1, ...(opts.endpoint ? { endpoint: opts.endpoint } : {}) });
      clients.set(region, client);
    }
    const out = await client.send(new InvokeCommand(request), { abortSignal: signal });
    return {
      ...(out.StatusCode !== undefined ? { StatusCode: out.StatusCode } : {}),
      ...(out.FunctionError !== undefined ? { FunctionError: out.FunctionError } : {}),
      ...(out.Payload !== undefined ? { Payload: out.Payload } : {}),
    };
  };
}

import { StrataError } from '../errors.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';

export interface OriginValue {
  value: Buffer;
  contentType?: string;
}

/** Fetches a missing key from the namespace's read-through origin. undefined = the origin has no such key. */
export async function fetchFromOrigin(
  origin: NonNullable<NamespacePolicy['origin']>,
  key: string,
): Promise<OriginValue | undefined> {
  const url = origin.url.replace('{key}', encodeURIComponent(key));
  let res: Response;
  try {
    res = await fetch(url, { headers: origin.headers, signal: AbortSignal.timeout(origin.timeoutMs), redirect: 'follow' });
  } catch (e) {
    const timedOut = e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError');
    const message = timedOut ? `origin did not answer within ${origin.timeoutMs} ms` : 'origin could not be reached';
    throw new StrataError('ORIGIN_FAILED', message, { origin: new URL(url).origin }, { cause: e });
  }
  if (res.status === 404 || res.status === 410) {
    await res.body?.cancel();
    return undefined;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new StrataError('ORIGIN_FAILED', `origin answered ${res.status}`, { origin: new URL(url).origin, status: res.status });
  }
  return { value: Buffer.from(await res.arrayBuffer()), contentType: res.headers.get('content-type') ?? undefined };
}

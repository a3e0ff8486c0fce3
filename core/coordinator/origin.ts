import { StrataError } from '../errors.js';
import type { EntryHeader } from '../model/entry.js';
import { contentHash } from '../model/keys.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';
import { Coalescer } from './keyed-mutex.js';
import type { ReadResult, WriteOptions, WriteResult } from './types.js';

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

/**
 * Read-through: a miss loads the key from the namespace's origin and writes it like any other write (transformed,
 * versioned, placed), once per key at a time in this process (concurrent misses of one key share the load).
 */
export class OriginLoader {
  private readonly loads = new Coalescer<ReadResult | undefined>();

  constructor(
    private readonly d: {
      /** Writes the loaded value as a put would, under the key's lock. */
      write(ns: string, key: string, value: Buffer, opts: WriteOptions, policy: NamespacePolicy): Promise<WriteResult>;
      /** Counts an origin hit. */
      hit(): void;
    },
  ) {}

  load(ns: string, key: string, policy: NamespacePolicy): Promise<ReadResult | undefined> {
    const origin = policy.origin!;
    return this.loads.run(`${ns}\u0000${key}`, async () => {
      const loaded = await fetchFromOrigin(origin, key);
      if (!loaded) return undefined;
      const opts: WriteOptions = { ttlSeconds: origin.ttlSeconds, contentType: loaded.contentType };
      const { version, expiresAt, size } = await this.d.write(ns, key, loaded.value, opts, policy);
      const hash = contentHash(loaded.value);
      const header: EntryHeader = { version, expiresAt, size, hash, tags: [], contentType: loaded.contentType, flags: {} };
      this.d.hit();
      return { entry: { header, value: loaded.value }, tier: 'origin' };
    });
  }
}

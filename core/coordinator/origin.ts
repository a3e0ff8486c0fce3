import { StrataError, VersionConflictError } from '../errors.js';
import type { EntryHeader } from '../model/entry.js';
import { contentHash } from '../model/keys.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';
import { Coalescer } from './keyed-mutex.js';
import { invokeLambdaOrigin, type LambdaInvoke } from './lambda-origin.js';
import type { ReadResult, WriteOptions, WriteResult } from './types.js';

export type Origin = NonNullable<NamespacePolicy['origin']>;

export interface OriginValue {
  value: Buffer;
  contentType?: string;
  /** The origin's own TTL for this value (a Lambda origin's answer may carry one); undefined: origin.ttlSeconds. */
  ttlSeconds?: number | null;
}

/** A write of an origin's value: WriteOptions, and how long past its TTL it may be served stale. */
export type OriginWriteOptions = WriteOptions & { staleGraceSeconds?: number };

/**
 * Fetches a missing key from the namespace's read-through origin: an HTTP URL, or a Lambda function through
 * `invoke` (lambda-origin.ts). undefined = the origin has no such key.
 */
export async function fetchFromOrigin(
  origin: Origin,
  ns: string,
  key: string,
  invoke?: LambdaInvoke,
): Promise<OriginValue | undefined> {
  if (origin.lambda !== undefined) return invokeLambdaOrigin(invoke, { ...origin, lambda: origin.lambda }, ns, key);
  const url = origin.url!.replace('{key}', encodeURIComponent(key));
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

/** What the loader needs from the coordinator. */
export interface OriginLoaderDeps {
  /**
   * Writes the loaded value as a put would, under the key's lock. `at`: exactly that version, a compare-and-set
   * (a refresh over the stale version it read); a loss throws VersionConflictError.
   */
  write(
    ns: string,
    key: string,
    value: Buffer,
    opts: OriginWriteOptions,
    policy: NamespacePolicy,
    at?: number,
  ): Promise<WriteResult>;
  /**
   * Writes a negative entry (a tombstone that lives `ttlMs`) at exactly `version`, once, never re-stamped: any write
   * stamped above it wins over it whichever lands first. Resolves false when a newer version was there.
   */
  forget(ns: string, key: string, policy: NamespacePolicy, version: number, ttlMs: number): Promise<boolean>;
  /** A fresh version from the coordinator's clock. */
  version(): number;
  /** Counts an origin hit. */
  hit(): void;
  /** Runs background work (a refresh) off the request path; its failure is reported, never thrown. */
  track(p: Promise<unknown>, what: string): void;
  /** Sends a Lambda origin's Invoke (built in the composition root); absent: Lambda origins fail ORIGIN_FAILED. */
  invokeLambda?: LambdaInvoke;
}

/**
 * Read-through: a miss loads the key from the namespace's origin and writes it like any other write (transformed,
 * versioned, placed), once per key at a time in this process (concurrent misses of one key share the load). With
 * `negativeTtlSeconds` an origin 404 is written as a short-lived tombstone, so the next reads of the missing key, in
 * every coordinator, miss without asking the origin. With `staleWhileRevalidateSeconds` the value is kept that long
 * past its TTL (header.staleAt is its TTL; expiresAt, when tiers drop it, is later by the grace), served marked stale,
 * and refreshed by one background load per key, written over the version read only (a compare-and-set), so a user's
 * write that landed meanwhile wins.
 */
export class OriginLoader {
  private readonly loads = new Coalescer<ReadResult | undefined>();
  private readonly refreshes = new Coalescer<void>();

  constructor(private readonly d: OriginLoaderDeps) {}

  /**
   * A miss. `certain`: no failed tier may hold the key (tier-walk.ts certain()); only then is a 404 remembered, since a
   * failed tier might hold a value the negative entry would hide.
   */
  load(ns: string, key: string, policy: NamespacePolicy, certain = true): Promise<ReadResult | undefined> {
    const origin = policy.origin!;
    return this.loads.run(`${ns}\u0000${key}`, async () => {
      // Taken before the origin is asked: a write stamped after it wins over the negative entry stamped with it.
      const before = this.d.version();
      const loaded = await fetchFromOrigin(origin, ns, key, this.d.invokeLambda);
      if (!loaded) {
        if (origin.negativeTtlSeconds > 0 && certain) {
          // Awaited, so the next read finds it; a failure to write it is reported, and the 404 answered all the same.
          const forgotten = this.d.forget(ns, key, policy, before, origin.negativeTtlSeconds * 1000);
          this.d.track(forgotten, 'origin negative entry');
          await forgotten.catch(() => {});
        }
        return undefined;
      }
      return this.store(ns, key, loaded, policy);
    });
  }

  /**
   * Starts one background refresh of a key served stale at `version`, unless one of this key is running already.
   * Its value is written at `version + 1` (a compare-and-set over the version served), its 404 as a negative entry
   * there: a user's write or delete since, stamped higher, wins either way.
   */
  refresh(ns: string, key: string, policy: NamespacePolicy, version: number): void {
    const id = `${ns}\u0000${key}`;
    if (this.refreshes.has(id)) return;
    const origin = policy.origin!;
    const run = this.refreshes.run(id, async () => {
      const loaded = await fetchFromOrigin(origin, ns, key, this.d.invokeLambda);
      if (!loaded) {
        // Gone at the origin: the stale value must stop being served, so a negative entry even when they are off
        // (then for a second, after which reads ask the origin again).
        await this.d.forget(ns, key, policy, version + 1, Math.max(origin.negativeTtlSeconds, 1) * 1000);
        return;
      }
      try {
        await this.store(ns, key, loaded, policy, version + 1);
      } catch (e) {
        if (!(e instanceof VersionConflictError)) throw e; // a newer write won: nothing to refresh
      }
    });
    this.d.track(run, 'origin refresh');
  }

  private async store(ns: string, key: string, loaded: OriginValue, policy: NamespacePolicy, at?: number): Promise<ReadResult> {
    const origin = policy.origin!;
    const grace = origin.staleWhileRevalidateSeconds;
    const opts: OriginWriteOptions = {
      ttlSeconds: loaded.ttlSeconds !== undefined ? loaded.ttlSeconds : origin.ttlSeconds,
      contentType: loaded.contentType,
      ...(grace > 0 ? { staleGraceSeconds: grace } : {}),
    };
    const { version, expiresAt, size } = await this.d.write(ns, key, loaded.value, opts, policy, at);
    // The write kept the value `grace` past its TTL (expiresAt); staleAt is the TTL itself.
    const staleAt = grace > 0 && expiresAt !== null ? expiresAt - grace * 1000 : undefined;
    const hash = contentHash(loaded.value);
    const header: EntryHeader = {
      version,
      expiresAt,
      size,
      hash,
      tags: [],
      contentType: loaded.contentType,
      flags: {},
      ...(staleAt !== undefined ? { staleAt } : {}),
    };
    this.d.hit();
    return { entry: { header, value: loaded.value }, tier: 'origin' };
  }
}

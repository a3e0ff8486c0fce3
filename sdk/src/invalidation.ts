/**
 * Invalidation by tag and by prefix, and namespace flushes: the tenant routes (`POST /v1/ns/{ns}/invalidate`,
 * `DELETE /v1/ns/{ns}`, reached as {@link StrataClient.invalidateTags} and its siblings) and the admin ones
 * (`DELETE /v1/admin/namespaces/{namespace}`, `GET /v1/admin/invalidations`, reached as `client.namespaces`).
 */
import { invalid, isObject, optionError, readBody, subClientRequest, type SubClientTransport } from './json.js';
import { requestIdOf } from './transport.js';
import { TAG_RE } from './encoding.js';

/** What an invalidation or flush answers once it is in force for every reader. */
export interface InvalidationResult {
  ns: string;
  /** Its entry in the audit log. */
  id: number;
  /** Entries of the scope at or below this version are gone; every write after the call is above it. */
  generation: number;
  kind: 'tags' | 'prefix' | 'flush';
  /**
   * The invalidation-sweep workflow that removes what the invalidation covers from the tiers (reads never see it
   * either way): its `execution`, or where the data API cannot reach Step Functions (deployed) the `request` whose
   * S3 event starts it (the workflow list shows that execution with the request's key as its input `object`). null
   * where the deployment runs no workflows, or for tags where it runs no tag sweeps. The tag invalidations of a
   * namespace within one window share one sweep, which starts at `notBefore` (ISO 8601).
   */
  sweep?: SweepStarted | null;
}

/** The sweep an invalidation started: by its execution's name, or by the name of the request that starts it. */
export type SweepStarted = ({ execution: string } | { request: string }) & { notBefore?: string };

/** One entry of the audit log (`client.namespaces.invalidations()`). */
export interface InvalidationRecord extends Omit<InvalidationResult, 'ns' | 'sweep'> {
  ns: string;
  tags?: string[];
  prefix?: string;
  /** When it was recorded (ISO 8601). */
  at: string;
  /** `tenant:<name>`, `key:<hash>`, `admin` or `anonymous`. */
  by: string;
}

/** Per-call options of the admin namespace methods. */
export interface NamespaceRequestOptions {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}

/** The server's limit on tags per call. */
export const MAX_TAGS_PER_INVALIDATION = 64;

/** Tags checked before anything is sent. */
export function invalidationTags(tags: readonly string[]): string[] {
  if (!Array.isArray(tags) || tags.length === 0) throw optionError('tags', 'give at least one tag');
  if (tags.length > MAX_TAGS_PER_INVALIDATION)
    throw optionError('tags', `at most ${MAX_TAGS_PER_INVALIDATION} tags per call (${tags.length}); split them`);
  for (const t of tags)
    if (typeof t !== 'string' || !TAG_RE.test(t))
      throw optionError('tags', `'${String(t)}' is not a tag: 1-64 characters of A-Z a-z 0-9 _ . : -`);
  return [...tags];
}

export function checkPrefix(prefix: string): string {
  if (typeof prefix !== 'string' || prefix.length === 0)
    throw optionError('prefix', 'give a non-empty prefix (to drop the whole namespace, use flush)');
  return prefix;
}

/** The body of an invalidation or flush answer. */
export function parseInvalidation(body: unknown, status: number, requestId?: string): InvalidationResult {
  if (
    !isObject(body) ||
    typeof body.ns !== 'string' ||
    typeof body.id !== 'number' ||
    typeof body.generation !== 'number' ||
    (body.kind !== 'tags' && body.kind !== 'prefix' && body.kind !== 'flush')
  )
    throw invalid(status, `expected an invalidation from the server, got: ${JSON.stringify(body).slice(0, 200)}`, requestId);
  const s = isObject(body.sweep) ? body.sweep : undefined;
  const named =
    typeof s?.execution === 'string'
      ? { execution: s.execution }
      : typeof s?.request === 'string'
        ? { request: s.request }
        : undefined;
  const sweep = named ? { ...named, ...(typeof s!.notBefore === 'string' ? { notBefore: s!.notBefore } : {}) } : null;
  return { ns: body.ns, id: body.id, generation: body.generation, kind: body.kind, sweep };
}

/**
 * The operator's namespace routes: flush any tenant's namespace, and read the audit log of invalidations and
 * flushes. Needs an admin API key in AWS.
 */
export class NamespacesClient {
  /** @internal */
  constructor(private readonly t: SubClientTransport) {}

  /**
   * Flushes `ns` (`DELETE /v1/admin/namespaces/{namespace}`): every key written before the call is gone for every
   * reader once it resolves. `confirm` must repeat the namespace.
   */
  async flush(ns: string, opts: NamespaceRequestOptions & { confirm: string }): Promise<InvalidationResult> {
    const q = new URLSearchParams({ confirm: opts.confirm });
    const url = `${this.t.endpoint}/v1/admin/namespaces/${encodeURIComponent(ns)}?${q}`;
    return this.t.transport.send(subClientRequest(this.t, 'DELETE', url, opts), async (res) =>
      parseInvalidation(await readBody(res), res.status, requestIdOf(res)),
    );
  }

  /** The most recent invalidations and flushes, newest first (`GET /v1/admin/invalidations`), of one namespace or all. */
  async invalidations(opts: NamespaceRequestOptions & { ns?: string } = {}): Promise<InvalidationRecord[]> {
    const q = opts.ns === undefined ? '' : `?${new URLSearchParams({ ns: opts.ns })}`;
    const url = `${this.t.endpoint}/v1/admin/invalidations${q}`;
    return this.t.transport.send(subClientRequest(this.t, 'GET', url, opts), async (res) => {
      const body = await readBody(res);
      if (!isObject(body) || !Array.isArray(body.items))
        throw invalid(res.status, 'expected { items: [...] } from the server', requestIdOf(res));
      return body.items as InvalidationRecord[];
    });
  }
}

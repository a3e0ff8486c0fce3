import * as z from 'zod';
import { MAX_TAGS_PER_INVALIDATION, type InvalidationScope } from '../coordinator/invalidations.js';
import { MAX_KEY_BYTES, validateUserNamespace } from '../model/keys.js';
import { parseWith, TAG_PATTERN } from '../model/schemas.js';
import type { ApiEvent, ApiResult } from './http.js';
import { json } from './http.js';
import type { ApiContext } from './operations.js';
import { jsonBody, nsParam } from './validation.js';
import { callerIdentity } from './tenant-access.js';
import { startWorkflow } from './admin-operations.js';
import { log } from '../util/logger.js';
import { StrataError, ValidationError } from '../errors.js';

/**
 * Whole-namespace operations: invalidation by tag or prefix, a namespace flush (a tenant route and an admin one:
 * authorization is per route), and the invalidation audit log. See coordinator/invalidations.ts for the design and
 * docs/API.md, "Invalidation", for the contract.
 */

const tagSchema = z.string().regex(TAG_PATTERN, 'tags are 1-64 characters of A-Z, a-z, 0-9, "_", ".", ":" or "-"');

/** `{ tags }` or `{ prefix }`, exactly one (each object strict, so the document says the same: anyOf of the two). */
export const invalidateSchema = z
  .union(
    [
      z.strictObject({ tags: z.array(tagSchema).min(1).max(MAX_TAGS_PER_INVALIDATION) }),
      z.strictObject({
        prefix: z
          .string()
          .min(1)
          .refine((p) => Buffer.byteLength(p) <= MAX_KEY_BYTES && !p.includes('\u0000'), {
            message: `a prefix is at most ${MAX_KEY_BYTES} bytes of UTF-8, without NUL`,
          })
          .meta({ maxLength: MAX_KEY_BYTES, pattern: '^[^\\u0000]+$', 'x-strata-max-utf8-bytes': MAX_KEY_BYTES }),
      }),
    ],
    {
      error:
        'give exactly one of "tags" (a list of 1-64 tags) or "prefix" (a non-empty key prefix; to drop the whole ' +
        'namespace, flush it with DELETE /v1/ns/{ns}?confirm={ns})',
    },
  )
  .meta({ description: 'Exactly one of `tags` (entries carrying any of them) or `prefix` (keys starting with it).' });

export const flushQuery = z.strictObject({ confirm: z.string() });

export const invalidationLogQuery = z.strictObject({ ns: z.string().optional() });

export async function invalidate(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const ns = nsParam(event);
  const body = jsonBody(event, invalidateSchema);
  const scope: InvalidationScope = 'tags' in body ? { tags: [...new Set(body.tags)] } : { prefix: body.prefix };
  const r = await ctx.coordinator.invalidate(ns, scope, callerIdentity(ctx.tenantAccess, event) ?? 'anonymous');
  // A prefix is swept under that prefix (a cheap, bounded scan). Tags are not: no tier indexes keys by tag, so a sweep
  // would read the whole namespace per call; their entries leave by expiry, eviction, or a sweep started by hand.
  const sweep = 'prefix' in scope ? await startSweep(ctx, ns, r.id, scope.prefix) : null;
  return json(200, { ns, ...r, sweep });
}

/**
 * Starts the invalidation-sweep workflow that removes what an invalidation covers; its execution, or null where this
 * runtime has no workflows (the invalidation is in force either way: the sweep only frees space). Named after the
 * invalidation, so a retried request starts no second sweep.
 */
async function startSweep(ctx: ApiContext, ns: string, id: number, prefix?: string): Promise<{ execution: string } | null> {
  const input = { ns, ...(prefix !== undefined ? { prefix } : {}) };
  try {
    const started = await startWorkflow(ctx, 'invalidation-sweep', input, `sweep-${ns}-${id}`.slice(0, 80));
    return { execution: started.execution };
  } catch (e) {
    // The invalidation is in force: a sweep that cannot start must not turn its answer into an error.
    if (!(e instanceof StrataError && e.code === 'EXECUTION_EXISTS'))
      log.warn(`invalidation #${id} of '${ns}': no sweep started`, { error: e });
    return null;
  }
}

/** `DELETE /v1/ns/{ns}?confirm={ns}`: the tenant's own flush. */
export function flushNamespace(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  return flush(ctx, event, nsParam(event), callerIdentity(ctx.tenantAccess, event) ?? 'anonymous');
}

/**
 * `DELETE /v1/admin/namespaces/{namespace}?confirm={namespace}`: the operator's flush of any tenant namespace (its
 * parameter is not `{ns}`, which tenant keys are checked against: an admin key may name any namespace).
 */
export function adminFlushNamespace(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  return flush(ctx, event, validateUserNamespace(event.pathParameters?.namespace, 'namespace'), 'admin');
}

async function flush(ctx: ApiContext, event: ApiEvent, ns: string, by: string): Promise<ApiResult> {
  const { confirm } = parseWith(flushQuery, event.queryStringParameters ?? {}, 'query');
  if (confirm !== ns) {
    throw new ValidationError(
      'confirm',
      `a flush makes every key of '${ns}' missing: repeat the namespace as ?confirm=${encodeURIComponent(ns)} to confirm`,
    );
  }
  const r = await ctx.coordinator.invalidate(ns, { flush: true }, by);
  return json(200, { ns, ...r, sweep: await startSweep(ctx, ns, r.id) });
}

/** `GET /v1/admin/invalidations?ns=`: the audit log, newest first. */
export async function invalidationLog(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const q = parseWith(invalidationLogQuery, event.queryStringParameters ?? {}, 'query');
  const ns = q.ns === undefined ? undefined : validateUserNamespace(q.ns);
  return json(200, { items: await ctx.coordinator.invalidationLog(ns) });
}

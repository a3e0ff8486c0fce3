import { createHash } from 'node:crypto';
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
import { supportsSweepRequests } from '../tiers/tier.js';

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
  // A prefix is swept under that prefix (a cheap, bounded scan). Tags: no tier indexes keys by tag, so their sweep
  // reads the whole namespace; the tag invalidations of one window share one, started once the window is over.
  const sweep = 'prefix' in scope ? await startSweep(ctx, ns, r.id, scope.prefix) : await startTagSweep(ctx, ns, r.id);
  return json(200, { ns, ...r, sweep });
}

/**
 * A sweep's answer: its execution (or, started by its request's S3 event, the request's name), and for a tag
 * invalidations' sweep the time it starts.
 */
type SweepStarted = (({ execution: string } | { request: string }) & { notBefore?: string }) | null;

/**
 * Starts the invalidation-sweep workflow that removes what an invalidation covers; its execution, or null where this
 * runtime has no workflows (the invalidation is in force either way: the sweep only frees space). Named after the
 * invalidation, so a retried request starts no second sweep.
 */
async function startSweep(ctx: ApiContext, ns: string, id: number, prefix?: string): Promise<SweepStarted> {
  const input = { ns, ...(prefix !== undefined ? { prefix } : {}) };
  return start(ctx, ns, id, input, `sweep-${ns}-${id}`.slice(0, 80));
}

/** Tag sweeps wait this long past their window's end: longer than any two coordinators' clocks differ by. */
export const TAG_SWEEP_MARGIN_MS = 60_000;

/**
 * The sweep of a tag invalidation: one per namespace and window of `ctx.tagSweepWindowMinutes` (0: none), named
 * after both and started with the same input by every invalidation of the window, so Step Functions starts it once
 * (a second start with the same name and input while it runs is a success that returns it) and the local runner
 * answers EXECUTION_EXISTS; either way the answer names it. It waits until the window is over, plus
 * {@link TAG_SWEEP_MARGIN_MS} for a coordinator whose clock put its call in this window late, then reads the whole
 * namespace once with every generation in force: each tag invalidated in the window is covered by then.
 */
async function startTagSweep(ctx: ApiContext, ns: string, id: number): Promise<SweepStarted> {
  const minutes = ctx.tagSweepWindowMinutes ?? DEFAULT_TAG_SWEEP_WINDOW_MINUTES;
  if (minutes <= 0) return null;
  const windowMs = minutes * 60_000;
  const window = Math.floor(Date.now() / windowMs);
  // Whole seconds, as Step Functions' Wait state reads a timestamp (sweep-steps.ts).
  const notBefore = new Date((window + 1) * windowMs + TAG_SWEEP_MARGIN_MS).toISOString().replace(/\.\d{3}Z$/, 'Z');
  // Execution names are at most 80 characters: a long namespace is named by a digest.
  const tail = `-tags-${minutes}m-${((window * windowMs) / 60_000).toString(36)}`;
  const named = `sweep-${ns}${tail}`;
  const name = named.length <= 80 ? named : `sweep-${createHash('sha256').update(ns).digest('hex').slice(0, 24)}${tail}`;
  return start(ctx, ns, id, { ns, notBefore }, name, true);
}

/** The default window of tag sweeps (runtime-env.ts: STRATA_TAG_SWEEP_WINDOW_MINUTES). */
export const DEFAULT_TAG_SWEEP_WINDOW_MINUTES = 60;

async function start(
  ctx: ApiContext,
  ns: string,
  id: number,
  input: { ns: string; prefix?: string; notBefore?: string },
  name: string,
  shared = false,
): Promise<SweepStarted> {
  const answer = { ...(input.notBefore !== undefined ? { notBefore: input.notBefore } : {}) };
  try {
    // Deployed, the data functions cannot reach Step Functions: the request's S3 event starts the sweep. A request
    // of that name already there (a retried call, or the window's shared sweep) started it already.
    const requests = ctx.sweepTrigger === 's3-event' ? ctx.coordinator.tierList().find(supportsSweepRequests) : undefined;
    if (requests) {
      await requests.requestSweep(name, input);
      return { request: name, ...answer };
    }
    const started = await startWorkflow(ctx, 'invalidation-sweep', input, name);
    return { execution: started.execution, ...answer };
  } catch (e) {
    // A window's shared sweep already started by an earlier call: this call's tags are in it too.
    if (shared && e instanceof StrataError && e.code === 'EXECUTION_EXISTS') return { execution: name, ...answer };
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

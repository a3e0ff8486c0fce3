/**
 * The admin API's policy (`/v1/admin/policy/...`): read the policy in force, check a candidate document, replace it
 * by compare-and-set, read the audit trail of its versions and roll back, and read what the background rules did.
 * Reached as {@link StrataClient.policies}.
 */
import { invalid, isObject, optionError, readBody, type SubClientTransport, subClientRequest } from './json.js';
import { missingOrThrow, requestIdOf, type HttpRequest } from './transport.js';
import type {
  FiringOutcomeWire,
  FiringPreviewWire,
  FiringWire,
  PolicyDocumentWire,
  PolicyProblemWire,
  PolicySource,
  PolicyValidationWire,
  PolicyVersionSummaryWire,
  PolicyViewWire,
} from './contract.js';

// Written once in contract.ts, shared with the server. The SDK hands them on as they arrive (dates stay ISO-8601
// strings), so what `strata policy get --json` prints is what the server sent.
export type { PolicySource };
/** A policy document (docs/POLICIES.md). Loosely typed: the server checks every field. */
export type PolicyDocument = PolicyDocumentWire;
/** The policy in force, or one version of it. `D`: your own type of the document, if you have one. */
export type PolicyView<D = PolicyDocument> = PolicyViewWire<D>;
/** One entry of the audit trail: who changed the policy, when, and what (`diff`). */
export type PolicyVersionSummary = PolicyVersionSummaryWire;
/** A background rule and whether it would fire on the current state. */
export type FiringPreview = FiringPreviewWire;
/** What {@link PoliciesClient.validate} resolves for a valid document. */
export type PolicyValidation<D = PolicyDocument> = PolicyValidationWire<D>;
/** One problem of a refused document: `ValidationError.problems`. */
export type PolicyProblem = PolicyProblemWire;
/** What became of a background rule's response: done, suppressed (by a control), skipped (nothing to do), failed. */
export type PolicyFiringOutcome = FiringOutcomeWire;
/** One firing of a background rule: when (`at`, ISO-8601), the rule, the response's kind, its outcome and detail. */
export type PolicyFiring = FiringWire;

/** Per-call options of the policy methods. */
export interface PolicyRequestOptions {
  /** Cancels the call; it then rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /** Per-attempt timeout of each HTTP request; overrides the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
}

/** Options of {@link PoliciesClient.put}. */
export interface PolicyPutOptions extends PolicyRequestOptions {
  /** The version the document was edited from (`version` of {@link PoliciesClient.get}); sent as `if-match`. */
  ifVersion: number;
  /** Why, for the audit trail (at most 200 characters). */
  reason?: string | undefined;
}

/** Options of {@link PoliciesClient.rollback}. */
export interface PolicyRollbackOptions extends PolicyRequestOptions {
  /** Roll back only if the policy in force is still this version (`if-match`). Default: whatever is in force. */
  ifVersion?: number | undefined;
  /** Why, for the audit trail. */
  reason?: string | undefined;
}

/** Options of {@link PoliciesClient.versions}. */
export interface PolicyVersionsOptions extends PolicyRequestOptions {
  /** At most this many (1..100, default 20). */
  limit?: number | undefined;
  /** Only versions below this one: the next page after a page whose last version this is. */
  before?: number | undefined;
}

/** Options of {@link PoliciesClient.firings}. */
export interface PolicyFiringsOptions extends PolicyRequestOptions {
  /** At most this many (1..200, default 50). */
  limit?: number | undefined;
}

/** What the client needs from {@link StrataClient}. @internal */
export type PoliciesTransport = SubClientTransport;

/** The server's limit on `x-strata-reason`, checked here so that a long reason fails before anything is sent. */
const MAX_REASON = 200;
const SOURCES: ReadonlySet<string> = new Set<PolicySource>(['deployment', 'runtime']);

function checkVersion(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw optionError(field, 'must be a whole number >= 0');
  return v;
}

function checkLimit(limit: unknown, max: number): number {
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > max)
    throw optionError('limit', `must be a whole number from 1 to ${max}`);
  return limit;
}

function checkDocument(document: unknown): void {
  if (!isObject(document)) throw optionError('document', 'must be an object (a policy document)');
}

/**
 * A reason sent as a header: fetch refuses a header value with a line break or a character beyond Latin-1 with a
 * TypeError, which would surface as a network error, so such a reason is refused here, by name.
 */
function checkHeaderReason(reason: unknown): string {
  if (typeof reason !== 'string') throw optionError('reason', 'must be a string');
  if (reason.length > MAX_REASON) throw optionError('reason', `must be at most ${MAX_REASON} characters (${reason.length})`);
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
  if (/[\u0000-\u001f\u007f]|[^\u0000-\u00ff]/.test(reason))
    throw optionError('reason', 'must be one line of text without characters beyond Latin-1 (it travels in a header)');
  return reason;
}

function parseView<D>(body: unknown, status: number, requestId: string | undefined): PolicyView<D> {
  if (
    !isObject(body) ||
    typeof body.version !== 'number' ||
    typeof body.source !== 'string' ||
    !SOURCES.has(body.source) ||
    !isObject(body.document) ||
    typeof body.hash !== 'string'
  ) {
    throw invalid(status, `expected a policy view from the server, got: ${JSON.stringify(body).slice(0, 200)}`, requestId);
  }
  return body as unknown as PolicyView<D>;
}

function parseSummary(e: unknown, status: number, requestId: string | undefined): PolicyVersionSummary {
  if (!isObject(e) || typeof e.version !== 'number' || typeof e.source !== 'string' || !Array.isArray(e.diff))
    throw invalid(status, `expected a policy version summary, got: ${JSON.stringify(e).slice(0, 200)}`, requestId);
  return e as unknown as PolicyVersionSummary;
}

function parseFiring(e: unknown, status: number, requestId: string | undefined): PolicyFiring {
  if (
    !isObject(e) ||
    typeof e.at !== 'string' ||
    typeof e.rule !== 'string' ||
    typeof e.response !== 'string' ||
    typeof e.outcome !== 'string' ||
    typeof e.detail !== 'string'
  )
    throw invalid(status, `expected a policy firing, got: ${JSON.stringify(e).slice(0, 200)}`, requestId);
  return e as unknown as PolicyFiring;
}

function parseValidation<D>(body: unknown, status: number, requestId: string | undefined): PolicyValidation<D> {
  if (
    !isObject(body) ||
    body.valid !== true ||
    !isObject(body.document) ||
    !Array.isArray(body.wouldFire) ||
    !Array.isArray(body.warnings)
  ) {
    throw invalid(status, `expected a policy validation from the server, got: ${JSON.stringify(body).slice(0, 200)}`, requestId);
  }
  return body as unknown as PolicyValidation<D>;
}

/**
 * The deployment's policy: the rules, budgets and controls that place and move data. These routes are for
 * operators: in AWS they need an admin API key (or identity), not a tenant's.
 *
 * A refused document raises `ValidationError` whose `problems` name each problem (`path`, `rule`, `message`).
 * Writes are compare-and-set: `put` needs the version the document was edited from, and a policy changed since
 * raises `VersionConflictError`.
 *
 * @example
 * ```ts
 * const admin = new StrataClient({ endpoint: 'http://localhost:8080', apiKey: process.env.STRATA_ADMIN_API_KEY });
 * const { version, document } = await admin.policies.get();
 * document.controls = { ...document.controls, maxFleetSize: 8 };
 * const next = await admin.policies.put(document, { ifVersion: version, reason: 'cap the fleet for the freeze' });
 * ```
 */
export class PoliciesClient {
  /** @internal */
  constructor(private readonly t: PoliciesTransport) {}

  /**
   * The policy in force (`GET /v1/admin/policy`): its version (0: the deployment's configuration, never edited), its
   * document with defaults applied, who wrote it and when.
   *
   * @throws {PoliciesUnavailableError} when the deployment has no policy store.
   * @example
   * ```ts
   * const p = await strata.policies.get();
   * console.log(p.version, p.source, p.updatedBy, p.document.rules?.map((r) => r.id));
   * ```
   */
  async get<D = PolicyDocument>(opts: PolicyRequestOptions = {}): Promise<PolicyView<D>> {
    return this.t.transport.send(this.req('GET', this.url(''), opts), async (res) =>
      parseView<D>(await readBody(res), res.status, requestIdOf(res)),
    );
  }

  /**
   * Replaces the policy in force with `document` (`PUT /v1/admin/policy`, `if-match: <ifVersion>`) and resolves the
   * new version. Compare-and-set, so not retried after an ambiguous failure (a 5xx, a timeout): the first attempt may
   * have been applied, and a repeat would fail with a spurious conflict. Read the policy again to find out.
   *
   * @throws {VersionConflictError} when the policy in force is no longer `ifVersion` (`err.current` is, when reported).
   * @throws {ValidationError} when the document is refused; `err.problems` lists why.
   * @example
   * ```ts
   * try {
   *   await strata.policies.put(doc, { ifVersion: 3, reason: 'flush cold keys nightly' });
   * } catch (err) {
   *   if (err instanceof ValidationError) for (const p of err.problems ?? []) console.error(`${p.path}: ${p.message}`);
   *   else throw err;
   * }
   * ```
   */
  async put<D = PolicyDocument>(document: PolicyDocument | D, opts: PolicyPutOptions): Promise<PolicyView<D>> {
    checkDocument(document);
    if (!isObject(opts)) throw optionError('ifVersion', 'is required (the version the document was edited from)');
    const headers: Record<string, string> = { 'if-match': String(checkVersion('ifVersion', opts.ifVersion)) };
    if (opts.reason !== undefined) headers['x-strata-reason'] = checkHeaderReason(opts.reason);
    return this.t.transport.send(this.write('PUT', this.url(''), document, opts, headers), async (res) =>
      parseView<D>(await readBody(res), res.status, requestIdOf(res)),
    );
  }

  /**
   * Checks `document` without changing anything (`POST /v1/admin/policy/validate`): resolves the document with its
   * defaults, the placement each namespace's rules compile to, and which background rules would fire now.
   *
   * @throws {ValidationError} when the document is refused; `err.problems` lists why.
   * @example
   * ```ts
   * const v = await strata.policies.validate(doc);
   * for (const f of v.wouldFire.filter((x) => x.fires)) console.log(`${f.rule} would fire: ${f.reason}`);
   * ```
   */
  async validate<D = PolicyDocument>(
    document: PolicyDocument | D,
    opts: PolicyRequestOptions = {},
  ): Promise<PolicyValidation<D>> {
    checkDocument(document);
    // Changes nothing on the server, so it is retried like a read.
    const req: HttpRequest = {
      ...this.req('POST', this.url('/validate'), opts),
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(document),
    };
    return this.t.transport.send(req, async (res) => parseValidation<D>(await readBody(res), res.status, requestIdOf(res)));
  }

  /**
   * The audit trail, newest first (`GET /v1/admin/policy/versions?limit=&before=`).
   *
   * @example
   * ```ts
   * for (const v of await strata.policies.versions({ limit: 5 }))
   *   console.log(v.version, v.updatedAt, v.updatedBy, v.reason ?? '', v.diff.join('; '));
   * ```
   */
  async versions(opts: PolicyVersionsOptions = {}): Promise<PolicyVersionSummary[]> {
    const q = new URLSearchParams();
    if (opts.limit !== undefined) q.set('limit', String(checkLimit(opts.limit, 100)));
    if (opts.before !== undefined) q.set('before', String(checkVersion('before', opts.before)));
    const url = this.url(`/versions${q.size ? `?${q}` : ''}`);
    return this.t.transport.send(this.req('GET', url, opts), async (res) => {
      const body = await readBody(res);
      if (!isObject(body) || !Array.isArray(body.versions))
        throw invalid(res.status, 'expected { versions: [...] } from the server', requestIdOf(res));
      return body.versions.map((e) => parseSummary(e, res.status, requestIdOf(res)));
    });
  }

  /**
   * One version with its document (`GET /v1/admin/policy/versions/{version}`); `undefined` when there is none.
   *
   * @example
   * ```ts
   * const before = await strata.policies.version(3);
   * if (before) console.log(before.hash, before.reason);
   * ```
   */
  async version<D = PolicyDocument>(version: number, opts: PolicyRequestOptions = {}): Promise<PolicyView<D> | undefined> {
    const url = this.url(`/versions/${checkVersion('version', version)}`);
    return this.t.transport.send({ ...this.req('GET', url, opts), accept: [404] }, async (res) => {
      if (res.status === 404) return missingOrThrow(res, `GET ${url}`);
      return parseView<D>(await readBody(res), res.status, requestIdOf(res));
    });
  }

  /**
   * Makes `version`'s document current again, as a new version (`POST /v1/admin/policy/rollback`); version 0 goes
   * back to the deployment's configuration. Like `put`, not retried after an ambiguous failure: a repeat would
   * record a second rollback, or fail with a spurious conflict when `ifVersion` is given.
   *
   * @throws {VersionConflictError} when `ifVersion` is given and the policy in force is no longer that version.
   * @throws {NotFoundError} when there is no such version.
   * @example
   * ```ts
   * const now = await strata.policies.rollback(3, { reason: 'version 4 evicted too eagerly' });
   * await strata.policies.rollback(0); // back to the deployment's configuration
   * ```
   */
  async rollback<D = PolicyDocument>(version: number, opts: PolicyRollbackOptions = {}): Promise<PolicyView<D>> {
    const body: { version: number; reason?: string } = { version: checkVersion('version', version) };
    if (opts.reason !== undefined) {
      if (typeof opts.reason !== 'string') throw optionError('reason', 'must be a string');
      body.reason = opts.reason;
    }
    const headers: Record<string, string> = {};
    if (opts.ifVersion !== undefined) headers['if-match'] = String(checkVersion('ifVersion', opts.ifVersion));
    return this.t.transport.send(this.write('POST', this.url('/rollback'), body, opts, headers), async (res) =>
      parseView<D>(await readBody(res), res.status, requestIdOf(res)),
    );
  }

  /**
   * What the background rules did, newest first (`GET /v1/admin/policy/firings?limit=`): when each fired, its
   * response and what became of it. Read from the runtime's background evaluator, which keeps its recent firings.
   *
   * @throws {PoliciesUnavailableError} (permanent) where no background evaluator runs.
   * @example
   * ```ts
   * for (const f of await strata.policies.firings({ limit: 10 }))
   *   console.log(f.at, f.rule, f.response, f.outcome, f.detail);
   * ```
   */
  async firings(opts: PolicyFiringsOptions = {}): Promise<PolicyFiring[]> {
    const q = new URLSearchParams();
    if (opts.limit !== undefined) q.set('limit', String(checkLimit(opts.limit, 200)));
    const url = this.url(`/firings${q.size ? `?${q}` : ''}`);
    return this.t.transport.send(this.req('GET', url, opts), async (res) => {
      const body = await readBody(res);
      if (!isObject(body) || !Array.isArray(body.firings))
        throw invalid(res.status, 'expected { firings: [...] } from the server', requestIdOf(res));
      return body.firings.map((e) => parseFiring(e, res.status, requestIdOf(res)));
    });
  }

  private url(path: string): string {
    return `${this.t.endpoint}/v1/admin/policy${path}`;
  }

  private req(method: string, url: string, opts: PolicyRequestOptions): HttpRequest {
    return subClientRequest(this.t, method, url, opts);
  }

  /** A write of the policy: a JSON body, and retried only where the server certainly did not process it. */
  private write(
    method: string,
    url: string,
    payload: unknown,
    opts: PolicyRequestOptions,
    headers: Record<string, string>,
  ): HttpRequest {
    return {
      ...this.req(method, url, opts),
      retryMode: 'conditional',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(payload),
    };
  }
}

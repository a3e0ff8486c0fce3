import { randomUUID } from 'node:crypto';
import { CasConflictError, type CasStore } from '../ring/store.js';
import { NotFoundError, StrataError, VersionConflictError } from '../errors.js';
import { log } from '../util/logger.js';
import { compilePolicy, compilePolicyInput, type CompiledPolicy, type CompileOptions } from './compile.js';
import { parsePolicyDocument, type PolicyDocument } from './document.js';
import { policyDiff } from './diff.js';
import { previewFirings, type PolicyState } from './preview.js';
import type {
  PolicyAdmin,
  PolicySource,
  PolicyValidation,
  PolicyVersionSummary,
  PolicyView,
  PutPolicyOptions,
} from './service.js';

/**
 * Policy documents in the document store next to the ring (S3 in AWS, a folder locally), changed only by
 * compare-and-set:
 *  - `policies/current.json`: the version in force and the newest {@link HISTORY_KEPT} audit entries;
 *  - `policies/versions/<n>-<id>.json`: every version ever written, with its audit entry (who, when, the diff),
 *    created once and never changed; each names the file of the version before it, so the trail can be walked
 *    past the entries kept in `current.json`. A writer that loses the race leaves a file no entry names.
 * `document: null` means "follow the deployment's configuration" (version 0, or a rollback to it).
 *
 * Which wins when a redeploy meets an edit: an edit made at runtime stays in force across redeploys, until an
 * operator rolls back to version 0; while nothing was edited (or after that rollback) the deployment's
 * configuration is in force, so a redeploy changes the policy as it always did.
 */

export const POLICY_CURRENT_KEY = 'policies/current.json';
export const policyVersionKey = (n: number, id: string): string => `policies/versions/${String(n).padStart(8, '0')}-${id}.json`;
/** Audit entries kept in the current document (older ones: read their version files). */
export const HISTORY_KEPT = 100;
const MAX_CAS_ATTEMPTS = 8;

export interface StoredPolicy {
  readonly version: number;
  readonly source: PolicySource;
  /** null: the deployment's configuration. */
  readonly document: PolicyDocument | null;
  readonly updatedAt: string;
  readonly updatedBy: string;
  readonly reason?: string;
  readonly history: readonly AuditEntry[];
}

/** An audit entry as stored: the summary the API shows, and the key of its version file. */
interface AuditEntry extends PolicyVersionSummary {
  readonly file: string;
}

interface StoredVersion {
  readonly document: PolicyDocument | null;
  readonly summary: AuditEntry;
  /** The file of the version this one replaced (absent for version 1). */
  readonly previousFile?: string;
}

const summaryOf = ({ file: _file, ...summary }: AuditEntry): PolicyVersionSummary => summary;

export interface PolicyAdministrationOptions {
  readonly cas: CasStore;
  /** The deployment's configuration as a document (documentFromNamespaceConfig of STRATA_NAMESPACES). */
  readonly deployment: PolicyDocument;
  /** What this deployment runs besides placement (a background evaluator): documents that need more are refused. */
  readonly compile?: CompileOptions;
  /** What dry runs evaluate background rules against; absent: they say the state is unknown. */
  readonly state?: () => Promise<PolicyState>;
  readonly now?: () => Date;
}

/** The policy store could not be read or written (503, retried by clients). */
export class PoliciesUnavailableError extends StrataError {
  constructor(cause: unknown) {
    super(
      'POLICIES_UNAVAILABLE',
      `the policy store could not be reached: ${(cause as Error)?.message ?? String(cause)}`,
      undefined,
      {
        cause,
      },
    );
  }
}

export class PolicyAdministration implements PolicyAdmin {
  private readonly deployment: CompiledPolicy;

  constructor(private readonly opts: PolicyAdministrationOptions) {
    this.deployment = compilePolicy(opts.deployment, opts.compile);
  }

  /** The stored current document with its etag, or undefined before the first edit. */
  async loadStored(): Promise<{ stored: StoredPolicy; etag: string } | undefined> {
    const got = await this.guard(() => this.opts.cas.get(POLICY_CURRENT_KEY));
    return got ? { stored: JSON.parse(got.body) as StoredPolicy, etag: got.etag } : undefined;
  }

  /** The compiled policy in force (one GET). */
  async effective(): Promise<{ view: PolicyView; compiled: CompiledPolicy }> {
    const cur = await this.loadStored();
    return this.resolve(cur?.stored);
  }

  /**
   * The watcher's read: undefined while the version in force is still `known`, without compiling anything (a
   * version's document never changes), else the compiled policy.
   */
  async effectiveIfNewer(known: number): Promise<{ view: PolicyView; compiled: CompiledPolicy } | undefined> {
    const cur = await this.loadStored();
    return (cur?.stored.version ?? 0) === known ? undefined : this.resolve(cur?.stored);
  }

  async current(): Promise<PolicyView> {
    return (await this.effective()).view;
  }

  async validate(input: unknown): Promise<PolicyValidation> {
    const compiled = compilePolicyInput(input, this.opts.compile);
    const state = this.opts.state ? await this.opts.state().catch(() => undefined) : undefined;
    return {
      valid: true,
      document: compiled.document,
      hash: compiled.hash,
      namespaces: compiled.placements,
      wouldFire: previewFirings(compiled, state),
      warnings: [],
    };
  }

  async put(input: unknown, opts: PutPolicyOptions): Promise<PolicyView> {
    const compiled = compilePolicyInput(input, this.opts.compile);
    return this.write(compiled.document, 'runtime', opts, undefined);
  }

  async rollback(to: number, opts: Omit<PutPolicyOptions, 'ifVersion'> & { ifVersion?: number }): Promise<PolicyView> {
    const target = await this.version(to);
    if (!target) throw new NotFoundError(`policy version ${to} does not exist`, { version: to });
    const ifVersion = opts.ifVersion ?? (await this.current()).version;
    // Version 0 is "follow the deployment": stored as null, so a later redeploy's configuration is used.
    return this.write(to === 0 ? null : target.document, to === 0 ? 'deployment' : 'runtime', { ...opts, ifVersion }, to);
  }

  async versions({ limit, before }: { limit: number; before?: number }): Promise<PolicyVersionSummary[]> {
    const cur = await this.loadStored();
    const history = cur?.stored.history ?? [];
    const out = history.filter((h) => before === undefined || h.version < before).slice(0, limit);
    // Past the kept entries: walk the version files back from the oldest kept one.
    const oldest = out.length < limit ? history.at(-1) : undefined;
    let file = oldest ? (await this.readVersion(oldest.file))?.previousFile : undefined;
    while (out.length < limit && file) {
      const v = await this.readVersion(file);
      if (!v) break;
      if (before === undefined || v.summary.version < before) out.push(v.summary);
      file = v.previousFile;
    }
    return out.map(summaryOf);
  }

  async version(n: number): Promise<PolicyView | undefined> {
    if (n === 0) return this.deploymentView(undefined);
    const cur = await this.loadStored();
    if (!cur || n > cur.stored.version) return undefined;
    if (n === cur.stored.version) return (await this.resolve(cur.stored)).view;
    let file: string | undefined = cur.stored.history.find((h) => h.version === n)?.file ?? cur.stored.history.at(-1)?.file;
    while (file) {
      const v = await this.readVersion(file);
      if (!v || v.summary.version < n) return undefined;
      if (v.summary.version === n) return this.viewOf(v.document, v.summary);
      file = v.previousFile;
    }
    return undefined;
  }

  // ----------------------------------------------------------------------------------------------- internals

  private resolve(stored: StoredPolicy | undefined): { view: PolicyView; compiled: CompiledPolicy } {
    if (!stored || stored.document === null) return { view: this.deploymentView(stored), compiled: this.deployment };
    // Accepted when it was put: a key the deployment no longer grants fails those writes (KEY_UNAVAILABLE) rather
    // than sending this process back to the deployment's policy, which would store them unencrypted.
    const compiled = compilePolicy(parsePolicyDocument(stored.document), { ...this.opts.compile, stored: true });
    return { view: this.viewFromStored(stored, compiled), compiled };
  }

  private deploymentView(stored: StoredPolicy | undefined): PolicyView {
    return {
      version: stored?.version ?? 0,
      source: 'deployment',
      document: this.deployment.document,
      hash: this.deployment.hash,
      ...(stored ? { updatedAt: stored.updatedAt, updatedBy: stored.updatedBy } : {}),
      ...(stored?.reason ? { reason: stored.reason } : {}),
    };
  }

  private viewFromStored(stored: StoredPolicy, compiled: CompiledPolicy): PolicyView {
    return {
      version: stored.version,
      source: stored.source,
      document: compiled.document,
      hash: compiled.hash,
      updatedAt: stored.updatedAt,
      updatedBy: stored.updatedBy,
      ...(stored.reason ? { reason: stored.reason } : {}),
    };
  }

  private viewOf(document: PolicyDocument | null, summary: PolicyVersionSummary): PolicyView {
    // A version in the history was accepted when it was written: it is shown even where it would be refused now
    // (a key no longer granted, warm as the only durable tier). Rolling back to it compiles it as a new document.
    const compiled =
      document === null ? this.deployment : compilePolicy(parsePolicyDocument(document), { ...this.opts.compile, stored: true });
    return {
      version: summary.version,
      source: summary.source,
      document: compiled.document,
      hash: compiled.hash,
      updatedAt: summary.updatedAt,
      updatedBy: summary.updatedBy,
      ...(summary.reason ? { reason: summary.reason } : {}),
    };
  }

  private async readVersion(file: string): Promise<StoredVersion | undefined> {
    const got = await this.guard(() => this.opts.cas.get(file));
    return got ? (JSON.parse(got.body) as StoredVersion) : undefined;
  }

  /** The compare-and-set write of a new version; `restoredFrom` marks a rollback. */
  private async write(
    document: PolicyDocument | null,
    source: PolicySource,
    opts: PutPolicyOptions,
    restoredFrom: number | undefined,
  ): Promise<PolicyView> {
    const newHash = document === null ? this.deployment.hash : compilePolicy(document, this.opts.compile).hash;
    for (let attempt = 0; ; attempt++) {
      const cur = await this.loadStored();
      const curVersion = cur?.stored.version ?? 0;
      const before = this.resolve(cur?.stored).view;
      if (curVersion !== opts.ifVersion) {
        // A retried request whose first try was written: the same change by the same caller is not a conflict.
        const last = cur?.stored.history[0];
        if (last && curVersion === opts.ifVersion + 1 && last.hash === newHash && last.updatedBy === opts.author) return before;
        throw new VersionConflictError(
          `the policy is at version ${curVersion}, not ${opts.ifVersion}: read it again (strata policy get) and reapply your change`,
          { expected: opts.ifVersion, current: curVersion },
        );
      }
      const version = curVersion + 1;
      const summary: AuditEntry = {
        file: policyVersionKey(version, randomUUID().slice(0, 8)),
        version,
        source,
        updatedAt: (this.opts.now?.() ?? new Date()).toISOString(),
        updatedBy: opts.author,
        ...(opts.reason ? { reason: opts.reason } : {}),
        hash: newHash,
        previous: curVersion,
        ...(restoredFrom !== undefined ? { restoredFrom } : {}),
        diff: policyDiff(before.document, document ?? this.deployment.document),
      };
      const stored: StoredPolicy = {
        version,
        source,
        document,
        updatedAt: summary.updatedAt,
        updatedBy: summary.updatedBy,
        ...(opts.reason ? { reason: opts.reason } : {}),
        history: [summary, ...(cur?.stored.history ?? [])].slice(0, HISTORY_KEPT),
      };
      // The version file first, so that every version current.json names has its file.
      const previousFile = cur?.stored.history[0]?.file;
      const file: StoredVersion = { document, summary, ...(previousFile ? { previousFile } : {}) };
      await this.guard(() => this.opts.cas.put(summary.file, JSON.stringify(file), null));
      try {
        await this.guard(() => this.opts.cas.put(POLICY_CURRENT_KEY, JSON.stringify(stored), cur?.etag ?? null));
      } catch (e) {
        if (e instanceof PoliciesUnavailableError && e.cause instanceof CasConflictError && attempt + 1 < MAX_CAS_ATTEMPTS)
          continue;
        throw e;
      }
      log.info('policy replaced', {
        version,
        previous: curVersion,
        source,
        by: opts.author,
        hash: newHash,
        ...(restoredFrom !== undefined ? { restoredFrom } : {}),
        changes: summary.diff.length,
      });
      return this.resolve(stored).view;
    }
  }

  private async guard<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (e) {
      throw new PoliciesUnavailableError(e);
    }
  }
}

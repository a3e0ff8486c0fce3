import type {
  FiringPreviewWire,
  PolicyValidationWire,
  PolicyVersionSummaryWire,
  PolicyViewWire,
} from '../../sdk/src/contract.js';
import type { PolicyDocument } from './document.js';

/**
 * What the admin API needs of the policy engine: read the policy in force, check a candidate, replace it by
 * compare-and-set, read its history and roll back. The shapes are the wire contract's (sdk/src/contract.ts), with
 * the document typed by its schema. Implemented by PolicyAdministration (admin.ts).
 */

export type { PolicySource } from '../../sdk/src/contract.js';
export type PolicyView = PolicyViewWire<PolicyDocument>;
export type PolicyVersionSummary = PolicyVersionSummaryWire;
export type FiringPreview = FiringPreviewWire;
export type PolicyValidation = PolicyValidationWire<PolicyDocument>;

export interface PutPolicyOptions {
  /** The version the caller read (If-Match); a different current version is a 409 VERSION_CONFLICT. */
  readonly ifVersion: number;
  /** Who is asking (IAM principal in AWS, the admin key's name locally). */
  readonly author: string;
  readonly reason?: string;
}

export interface PolicyAdmin {
  current(): Promise<PolicyView>;
  /** Parses and checks `input`; throws PolicyDocumentError (400) naming each problem. */
  validate(input: unknown): Promise<PolicyValidation>;
  /** Replaces the policy in force by compare-and-set; throws VersionConflictError (409) when `ifVersion` is stale. */
  put(input: unknown, opts: PutPolicyOptions): Promise<PolicyView>;
  /** The audit trail, newest first; `before`: only versions below it. */
  versions(opts: { limit: number; before?: number }): Promise<PolicyVersionSummary[]>;
  /** One version, or undefined when there is none. */
  version(n: number): Promise<PolicyView | undefined>;
  /**
   * Makes version `to`'s document current again, as a new version. `to` = 0 goes back to following the
   * deployment's configuration.
   */
  rollback(to: number, opts: Omit<PutPolicyOptions, 'ifVersion'> & { ifVersion?: number }): Promise<PolicyView>;
}

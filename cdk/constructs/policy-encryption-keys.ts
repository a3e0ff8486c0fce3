import { Stack, Token } from 'aws-cdk-lib';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type { IConstruct } from 'constructs';
import { check } from './validation.js';

/**
 * The KMS keys namespace policies may encrypt values with (`{ encrypt: { key } }` rules), as the API functions get
 * them ({@link StrataFunction.bindKeyring}): the key ARNs IAM grants use on, and the names policies may write
 * (STRATA_KEYRING_KEYS): a key's ARN; for an alias, its name and ARN as well as its key's ARN.
 */
export interface PolicyEncryptionKeys {
  /** ARNs of the keys themselves (never aliases): what kms:GenerateDataKey and kms:Decrypt are granted on. */
  readonly keyArns: readonly string[];
  /** The names a policy may use for them. */
  readonly names: readonly string[];
}

/** At most this many keys: their names fill the functions' environment (4 KB in all for a Lambda). */
export const MAX_POLICY_ENCRYPTION_KEYS = 8;

const KEY_ARN = /^arn:aws[a-z-]*:kms:([a-z0-9-]+):\d{12}:key\/[A-Za-z0-9-]+$/;

/**
 * Validates `keys` (the stack prop policyEncryptionKeys) and resolves them to grants and names; undefined when none
 * are given. Each must be a key (kms.Key, kms.Key.fromKeyArn) or an alias whose key is known (kms.Alias,
 * kms.Alias.fromAliasAttributes): IAM grants the KMS operations on keys, never on aliases.
 */
export function policyEncryptionKeys(scope: IConstruct, keys: readonly kms.IKey[] | undefined): PolicyEncryptionKeys | undefined {
  if (!keys?.length) return undefined;
  check(
    scope,
    keys.length <= MAX_POLICY_ENCRYPTION_KEYS,
    `policyEncryptionKeys lists ${keys.length} keys, at most ${MAX_POLICY_ENCRYPTION_KEYS}: their names go into the API ` +
      "functions' environment (STRATA_KEYRING_KEYS; Lambda allows 4 KB in all). Encrypt more namespaces under fewer keys",
  );
  const region = Stack.of(scope).region;
  const keyArns: string[] = [];
  const names: string[] = [];
  const given: string[] = [];
  keys.forEach((k, i) => {
    const at = `policyEncryptionKeys[${i}]`;
    const alias = aliasOf(k);
    let key = k;
    if (alias) {
      let target: kms.IKey | undefined;
      try {
        target = alias.aliasTargetKey;
      } catch {
        target = undefined;
      }
      check(
        scope,
        target !== undefined && aliasOf(target) === undefined,
        `${at} is an alias whose key is unknown (kms.Alias.fromAliasName): IAM grants KMS use on keys, not aliases. Give ` +
          'the key (kms.Key.fromKeyArn(scope, id, keyArn)), or the alias with its key ' +
          '(kms.Alias.fromAliasAttributes(scope, id, { aliasName, aliasTargetKey }))',
      );
      key = target;
      names.push(alias.aliasName, alias.keyArn); // an alias's keyArn is its own ARN
    }
    const arn = key.keyArn;
    if (!Token.isUnresolved(arn)) {
      const m = KEY_ARN.exec(arn);
      check(
        scope,
        m !== null,
        `${at}: '${arn}' is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>); give an alias with ` +
          'kms.Alias.fromAliasAttributes, with its key',
      );
      check(
        scope,
        Token.isUnresolved(region) || m[1] === region,
        `${at}: the key is in ${m[1]}, but the API functions call KMS in ${region}: KMS keys are regional; use a key ` +
          '(or a multi-Region replica key) in the deployment region',
      );
    }
    if (!alias) {
      check(scope, !given.includes(arn), `${at}: the key ${arn} is listed twice`);
      given.push(arn);
    }
    // An alias and its key (or two aliases of one key): one grant, every name.
    if (!keyArns.includes(arn)) keyArns.push(arn);
    if (!names.includes(arn)) names.push(arn);
  });
  const duplicate = names.find((n, i) => !Token.isUnresolved(n) && names.indexOf(n) !== i);
  check(scope, duplicate === undefined, `policyEncryptionKeys: the alias ${duplicate} is listed twice`);
  return { keyArns, names };
}

function aliasOf(k: kms.IKey): kms.IAlias | undefined {
  return 'aliasName' in k && 'aliasTargetKey' in k ? (k as unknown as kms.IAlias) : undefined;
}

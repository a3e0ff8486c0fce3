import { CfnOutput, Stack } from 'aws-cdk-lib';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type { Construct } from 'constructs';
import { API_ROUTES } from '../../core/api/routes.js';
import { type ApiFunction } from '../../core/api/route-types.js';
import { policyEncryptionKeys } from '../constructs/policy-encryption-keys.js';
import { StrataFunction } from '../constructs/strata-function.js';
import { StrataRestApi } from '../constructs/strata-rest-api.js';
import { check } from '../constructs/validation.js';
import { apiLambdaEntry } from '../lib/packaging.js';
import { policyDefaultsEnvironment } from '../lib/policy-defaults.js';
import type { DataStack } from './data-stack.js';
import type { FleetStack } from './fleet-stack.js';
import type { StrataNetwork } from './network-stack.js';
import { logRetention, removalPolicy } from './settings.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

export interface ApiStackProps extends StrataStackProps {
  readonly network: StrataNetwork;
  readonly data: Pick<DataStack, 'hotTier' | 'coldTier'>;
  /** The cache-node fleet: the warm tier's shared secret and port. */
  readonly fleet: Pick<FleetStack, 'fleet'>;
  /**
   * The KMS keys namespace policies may encrypt values with (`{ encrypt: { key } }` rules, docs/POLICIES.md): keys
   * (kms.Key, kms.Key.fromKeyArn) or aliases with their key (kms.Alias, kms.Alias.fromAliasAttributes), in the
   * deployment's region, at most 8. The functions that read and write values get kms:GenerateDataKey and kms:Decrypt
   * on exactly these keys, for Strata's data keys only (encryption context `strata:purpose`); every API function gets
   * STRATA_KEYRING=kms and STRATA_KEYRING_KEYS, the names a policy may use: each key's ARN, and an alias's name and
   * ARN. The keys stay the customer's: Strata never creates, rotates, disables or deletes them, and their key policies
   * must let the account's IAM policies grant their use (the default key policy does).
   * @default - none: no KMS permission and no keyring; a policy with an encrypt rule is refused
   */
  readonly policyEncryptionKeys?: readonly kms.IKey[];
}

/** The groups whose routes read values, and so may read through an origin (GET a key, batch get, downloads). */
export const READ_FUNCTIONS: readonly ApiFunction[] = ['keys', 'batch', 'transfer'];

/** The API groups, in the order they first appear in API_ROUTES: one Lambda each. */
export function apiFunctionGroups(): ApiFunction[] {
  return [...new Set(API_ROUTES.map((r) => r.fn))];
}

/**
 * The HTTPS API: one Lambda per route group of API_ROUTES (keys, batch, transfer, service, admin), the data groups
 * bound to the hot, warm (ring document and fleet secret) and cold tiers in the VPC, the admin group (workflow
 * executions and the namespace policy) outside it, every group reading the policy in force from the policy store
 * (which only the admin group writes), behind an API Gateway REST API generated from the same route table, with one
 * API key and usage plan per configured tenant.
 */
export class ApiStack extends StrataStack {
  readonly functions: Readonly<Record<ApiFunction, StrataFunction>>;
  readonly restApi: StrataRestApi;

  constructor(scope: Construct, id: string, props: ApiStackProps) {
    super(scope, id, { description: `Strata ${props.config.name}: HTTPS API (API Gateway REST, Lambda)`, ...props });
    const { config, network, data, fleet } = props;
    const keys = policyEncryptionKeys(this, props.policyEncryptionKeys);

    const functions = {} as Record<ApiFunction, StrataFunction>;
    for (const fn of apiFunctionGroups()) {
      const settings = config.api.functions[fn];
      const routes = API_ROUTES.filter((r) => r.fn === fn).map((r) => `${r.method} ${r.resource}`);
      // The admin routes start, list and describe Step Functions executions and read their progress documents
      // (api/admin-operations.ts), read and write the policy documents (/v1/admin/policy..., api/policy-operations.ts)
      // and the invalidations document (admin flushes, api/namespace-operations.ts) in S3: no tier and no node, so that function runs outside the VPC, where Step Functions needs no interface
      // endpoint and S3 is reached over its public endpoint. Every other group serves data from the tiers, which only
      // the VPC reaches.
      const inVpc = fn !== 'admin';
      const f = new StrataFunction(this, `${fn.charAt(0).toUpperCase()}${fn.slice(1)}Function`, {
        entry: apiLambdaEntry(fn),
        description: functionDescription(config.name, fn, routes),
        ...(inVpc
          ? { vpc: network.vpc, vpcSubnets: network.privateSubnets, securityGroup: network.coordinatorSecurityGroup }
          : {}),
        memoryMb: settings.memoryMb,
        timeoutSeconds: settings.timeoutSeconds,
        ...(settings.reservedConcurrency !== undefined ? { reservedConcurrency: settings.reservedConcurrency } : {}),
        maxTimeoutSeconds: 29,
        logRetention: logRetention(config),
        logRemovalPolicy: removalPolicy(config),
        environment: {
          STRATA_NEAR_CACHE_MB: String(settings.nearCacheMb),
          STRATA_URL_TTL_SECONDS: String(config.api.urlTtlSeconds),
          // Tag invalidations' shared sweeps (core/api/namespace-operations.ts).
          STRATA_TAG_SWEEP_WINDOW_MINUTES: String(config.workflows.tagSweepWindowMinutes),
          ...(config.api.namespaces ? { STRATA_NAMESPACES: JSON.stringify(config.api.namespaces) } : {}),
          // The policy ticker (Workflows stack) runs the background rules: policies may hold them, and the admin
          // function reads their firing history from the policy store (core/composition/api-context.ts).
          ...(config.policies.evaluator ? { STRATA_POLICY_EVALUATOR: '1' } : {}),
          // The default rules' deployment settings, as the evaluator has them (cdk/lib/policy-defaults.ts).
          ...policyDefaultsEnvironment(config),
          // A large upload's completion starts the upload-commit workflow by writing its commit request, whose S3
          // event the Workflows stack's rule turns into the execution: this VPC has no route to Step Functions
          // (core/api/async-complete.ts).
          // Without that event (workflows.asyncUploadCompletion false) every completion runs in the request.
          ...(fn === 'transfer'
            ? config.workflows.asyncUploadCompletion
              ? { STRATA_UPLOAD_COMMIT_TRIGGER: 's3-event' }
              : { STRATA_ASYNC_COMPLETE_BYTES: '0' }
            : {}),
          // A flush or an invalidation starts its sweep the same way: a sweep request's S3 event (the data functions'
          // VPC has no route to Step Functions; the admin function, outside it, starts its flushes' sweeps itself).
          ...(inVpc && config.workflows.invalidationSweeps ? { STRATA_SWEEP_TRIGGER: 's3-event' } : {}),
        },
      });
      // The data functions read the ring (to route to the nodes) and the policy in force, and write nothing in the
      // ring store; the admin function reads the executions' progress and is the policy store's only writer.
      if (inVpc) {
        f.bindHotTier(data.hotTier)
          .bindColdTier(data.coldTier)
          .bindRingStore(data.coldTier, { read: ['ring'] })
          .bindPolicyStore(data.coldTier, { write: false })
          .bindFleet(fleet.fleet);
      } else {
        f.bindWorkflowProgress(data.coldTier)
          .bindPolicyStore(data.coldTier, { write: true })
          .bindNodeAdmin(data.coldTier)
          // Namespace flushes and the invalidation log: the one document the data functions check, not its own copy.
          .bindInvalidations(data.coldTier);
      }
      // Every function checks the policies it loads against the keys; only those that serve values use them.
      if (keys) f.bindKeyring(keys, { use: inVpc });
      // Every function checks policies against the declared Lambda origins; those serving reads may invoke them.
      f.bindLambdaOrigins(config.api.lambdaOrigins, { invoke: READ_FUNCTIONS.includes(fn) });
      functions[fn] = f;
    }
    this.functions = functions;

    this.restApi = new StrataRestApi(this, 'RestApi', {
      apiName: `strata-${config.name}`,
      routes: API_ROUTES,
      functions: Object.fromEntries(Object.entries(functions).map(([k, f]) => [k, f.function])),
      stageName: config.name,
      throttle: config.api.throttle,
      tenants: config.tenants,
      accessLogRetention: logRetention(config),
      logRemovalPolicy: removalPolicy(config),
      executionLogging: config.api.executionLogging,
    });

    this.grantTenantNamespaces(config.tenants);

    new CfnOutput(this, 'ApiUrl', { value: this.restApi.url, description: 'Base URL of the Strata API (append v1/...)' });
    for (const [tenant, key] of Object.entries(this.restApi.apiKeys)) {
      new CfnOutput(this, `ApiKeyId${tenant.replace(/(^|-)([a-z0-9])/g, (_m, _d, c: string) => c.toUpperCase())}`, {
        value: key.keyId,
        description: `API key id of tenant ${tenant}: aws apigateway get-api-key --include-value --api-key <id>`,
      });
    }
  }

  /**
   * Gives the functions that serve namespaced routes the tenant map (STRATA_TENANT_ACCESS: each tenant's API key
   * id and namespaces), so a key only reaches its own namespaces (core/api/tenant-access.ts).
   */
  private grantTenantNamespaces(tenants: readonly { name: string; namespaces: readonly string[]; admin?: boolean }[]): void {
    const grants = tenants.map((t) => ({
      keyId: this.restApi.apiKeys[t.name]!.keyId,
      tenant: t.name,
      namespaces: t.namespaces,
      ...(t.admin ? { admin: true } : {}),
    }));
    // Lambda allows 4 KB of environment in all; API Gateway key ids are 10 characters.
    const estimate = JSON.stringify(
      tenants.map((t) => ({ keyId: 'x'.repeat(10), tenant: t.name, namespaces: t.namespaces })),
    ).length;
    check(
      this,
      estimate <= 2048,
      `the tenants' namespace lists take ${estimate} bytes of the API functions' environment (at most 2048): grant prefixes ("web-*") instead of listing every namespace`,
    );
    const value = Stack.of(this).toJsonString(grants);
    for (const fn of apiFunctionGroups()) {
      // Namespaced routes check the key's namespaces; admin routes check its admin grant: both read the map.
      const needs = API_ROUTES.some((r) => r.fn === fn && (r.resource.includes('{ns}') || r.auth === 'admin'));
      if (needs) this.functions[fn].function.addEnvironment('STRATA_TENANT_ACCESS', value);
    }
  }
}

/**
 * A function's description: its routes, or when they do not fit in Lambda's 256 characters, how many there are and
 * the resources they fall under (a description cut off mid-route would mislead whoever reads it in the console).
 */
function functionDescription(env: string, fn: string, routes: readonly string[]): string {
  const full = `Strata ${env} API '${fn}': ${routes.join(', ')}`;
  if (full.length <= 256) return full;
  const groups = [...new Set(routes.map((r) => r.split(' ')[1]!.split('/').slice(0, 4).join('/')))];
  return `Strata ${env} API '${fn}': ${routes.length} routes under ${groups.join(', ')} (docs/API.md)`.slice(0, 256);
}

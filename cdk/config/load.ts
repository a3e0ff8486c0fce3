import { dev } from './dev.js';
import { prod } from './prod.js';
import { staging } from './staging.js';
import { ENVIRONMENT_NAMES, environmentConfigSchema, type EnvironmentConfig, type EnvironmentConfigInput, type EnvironmentName } from './schema.js';

/** The committed environment files. */
export const ENVIRONMENTS: Readonly<Record<EnvironmentName, EnvironmentConfigInput>> = { dev, staging, prod };

/** A configuration the app cannot deploy; the message says what to change and where. */
export class ConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigurationError';
  }
}

export interface ConfigSources {
  /** CDK context (`-c key=value`): `account`, `region`, `availabilityZones` (comma-separated). */
  readonly context?: { readonly account?: unknown; readonly region?: unknown; readonly availabilityZones?: unknown };
  /** Process environment: CDK_DEPLOY_ACCOUNT / CDK_DEPLOY_REGION, then the CLI's CDK_DEFAULT_ACCOUNT. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export function isEnvironmentName(name: unknown): name is EnvironmentName {
  return typeof name === 'string' && (ENVIRONMENT_NAMES as readonly string[]).includes(name);
}

/**
 * The validated configuration of one environment. Account: context `account`, else CDK_DEPLOY_ACCOUNT, else
 * CDK_DEFAULT_ACCOUNT (the CLI sets it from your credentials), else none (synth stays account-agnostic).
 * Region: context `region`, else CDK_DEPLOY_REGION, else the file's region (CDK_DEFAULT_REGION is ignored on
 * purpose: the committed AZs belong to the committed region). AZs: context `availabilityZones`, else the file's.
 */
export function loadEnvironmentConfig(name: unknown, sources: ConfigSources = {}, files: Readonly<Record<string, EnvironmentConfigInput>> = ENVIRONMENTS): EnvironmentConfig {
  if (!isEnvironmentName(name)) {
    throw new ConfigurationError(`unknown environment ${name === undefined ? '(none given)' : `'${String(name)}'`}: choose one of ${ENVIRONMENT_NAMES.join(', ')} (npm run synth -- --env dev, or cdk synth -c env=dev)`);
  }
  const file = files[name];
  if (!file) throw new ConfigurationError(`no configuration file for environment '${name}' (expected cdk/config/${name}.ts)`);
  const ctx = sources.context ?? {};
  const env = sources.env ?? {};
  const str = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
  const account = str(ctx.account) ?? str(env.CDK_DEPLOY_ACCOUNT) ?? str(env.CDK_DEFAULT_ACCOUNT) ?? file.account;
  const region = str(ctx.region) ?? str(env.CDK_DEPLOY_REGION) ?? file.region;
  const azs = str(ctx.availabilityZones)?.split(',').map((s) => s.trim()).filter(Boolean) ?? file.availabilityZones;
  const parsed = environmentConfigSchema.safeParse({ ...file, account, region, availabilityZones: azs });
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  - ${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`);
    throw new ConfigurationError(`invalid configuration for environment '${name}' (cdk/config/${name}.ts, context and environment):\n${lines.join('\n')}`);
  }
  if (parsed.data.name !== name) throw new ConfigurationError(`cdk/config/${name}.ts declares name '${parsed.data.name}'; it must be '${name}'`);
  return parsed.data;
}

import { dev } from './dev.js';
import { prod } from './prod.js';
import { staging } from './staging.js';
import {
  ENVIRONMENT_NAMES,
  alarmDestinationSchema,
  environmentConfigSchema,
  type AlarmDestination,
  type EnvironmentConfig,
  type EnvironmentConfigInput,
  type EnvironmentName,
} from './schema.js';

/** The committed environment files. */
export const ENVIRONMENTS: Readonly<Record<EnvironmentName, EnvironmentConfigInput>> = { dev, staging, prod };

/** A configuration the app cannot deploy; the message says what to change and where. */
export class ConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigurationError';
  }
}

/** The CDK context keys {@link loadEnvironmentConfig} reads (cdk/bin/strata.ts and cli.ts pass each). */
export const CONTEXT_KEYS = ['account', 'region', 'availabilityZones', 'alarmEmails', 'alarmTopicArn'] as const;

export interface ConfigSources {
  /**
   * CDK context (`-c key=value`): `account`, `region`, `availabilityZones` (comma-separated), and where alarms go:
   * `alarmEmails` (comma-separated) or `alarmTopicArn`.
   */
  readonly context?: {
    readonly account?: unknown;
    readonly region?: unknown;
    readonly availabilityZones?: unknown;
    readonly alarmEmails?: unknown;
    readonly alarmTopicArn?: unknown;
  };
  /**
   * Process environment: CDK_DEPLOY_ACCOUNT / CDK_DEPLOY_REGION, then the CLI's CDK_DEFAULT_ACCOUNT; STRATA_ALARM_EMAILS /
   * STRATA_ALARM_TOPIC_ARN when the context names no alarm destination.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Environments whose alarms must reach someone: they refuse to synthesize without an alarm destination. Others (dev)
 * synthesize with a warning and a topic nobody is subscribed to.
 */
export const ALARM_DESTINATION_REQUIRED: readonly EnvironmentName[] = ['staging', 'prod'];

/** How to give an environment its alarm destination, as the error and warning messages say it. */
export function alarmDestinationHelp(name: EnvironmentName, region: string): string {
  return [
    'Pass e-mail addresses or an existing SNS topic when you synthesize or deploy (it is never committed):',
    `  npm run synth -- --env ${name} -c alarmEmails=oncall@example.org,ops@example.org`,
    `  npm run synth -- --env ${name} -c alarmTopicArn=arn:aws:sns:${region}:123456789012:oncall   (an existing topic: none is created)`,
    'or set STRATA_ALARM_EMAILS=oncall@example.org,ops@example.org or STRATA_ALARM_TOPIC_ARN=arn:aws:sns:... in the environment',
    `(the same options work with npm run deploy, and with cdk synth -c env=${name}).`,
  ].join('\n');
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
export function loadEnvironmentConfig(
  name: unknown,
  sources: ConfigSources = {},
  files: Readonly<Record<string, EnvironmentConfigInput>> = ENVIRONMENTS,
): EnvironmentConfig {
  if (!isEnvironmentName(name)) {
    throw new ConfigurationError(
      `unknown environment ${name === undefined ? '(none given)' : `'${String(name)}'`}: choose one of ${ENVIRONMENT_NAMES.join(', ')} (npm run synth -- --env dev, or cdk synth -c env=dev)`,
    );
  }
  const file = files[name];
  if (!file) throw new ConfigurationError(`no configuration file for environment '${name}' (expected cdk/config/${name}.ts)`);
  const ctx = sources.context ?? {};
  const env = sources.env ?? {};
  const str = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
  const account = str(ctx.account) ?? str(env.CDK_DEPLOY_ACCOUNT) ?? str(env.CDK_DEFAULT_ACCOUNT) ?? file.account;
  const region = str(ctx.region) ?? str(env.CDK_DEPLOY_REGION) ?? file.region;
  const azs =
    str(ctx.availabilityZones)
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean) ?? file.availabilityZones;
  if (file.monitoring?.alarmDestination !== undefined) {
    const help = alarmDestinationHelp(name, region);
    throw new ConfigurationError(
      `cdk/config/${name}.ts commits monitoring.alarmDestination: remove it (it is given at synth).\n${help}`,
    );
  }
  const alarmDestination = alarmDestinationFrom(sources);
  const monitoring = { ...file.monitoring, ...(alarmDestination ? { alarmDestination } : {}) };
  const parsed = environmentConfigSchema.safeParse({ ...file, account, region, availabilityZones: azs, monitoring });
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  - ${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`);
    throw new ConfigurationError(
      `invalid configuration for environment '${name}' (cdk/config/${name}.ts, context and environment):\n${lines.join('\n')}`,
    );
  }
  if (parsed.data.name !== name)
    throw new ConfigurationError(`cdk/config/${name}.ts declares name '${parsed.data.name}'; it must be '${name}'`);
  if (!parsed.data.monitoring.alarmDestination && ALARM_DESTINATION_REQUIRED.includes(name)) {
    const help = alarmDestinationHelp(name, parsed.data.region);
    throw new ConfigurationError(`no alarm destination for environment '${name}': its alarms would reach nobody.\n${help}`);
  }
  return parsed.data;
}

/**
 * The alarm destination given at synth time: the context's `alarmEmails` / `alarmTopicArn` when either is set, else
 * STRATA_ALARM_EMAILS / STRATA_ALARM_TOPIC_ARN (a whole source wins, so an exported variable never mixes with -c).
 */
function alarmDestinationFrom(sources: ConfigSources): AlarmDestination | undefined {
  const ctx = sources.context ?? {};
  const env = sources.env ?? {};
  const fromContext = list(ctx.alarmEmails) !== undefined || text(ctx.alarmTopicArn) !== undefined;
  const [emailsKey, topicKey] = fromContext
    ? ['-c alarmEmails', '-c alarmTopicArn']
    : ['STRATA_ALARM_EMAILS', 'STRATA_ALARM_TOPIC_ARN'];
  const emails = list(fromContext ? ctx.alarmEmails : env.STRATA_ALARM_EMAILS);
  const topicArn = text(fromContext ? ctx.alarmTopicArn : env.STRATA_ALARM_TOPIC_ARN);
  if (emails && topicArn) {
    throw new ConfigurationError(
      `give ${emailsKey} or ${topicKey}, not both: alarms notify one destination (subscribe the addresses to your topic instead)`,
    );
  }
  if (!emails && !topicArn) return undefined;
  const parsed = alarmDestinationSchema.safeParse(topicArn ? { topicArn } : { emails });
  if (!parsed.success) {
    const given = topicArn ? `${topicKey}=${topicArn}` : `${emailsKey}=${emails!.join(',')}`;
    const problems = [...new Set(parsed.error.issues.map((i) => i.message))].join('; ');
    throw new ConfigurationError(`invalid alarm destination ${given}: ${problems}`);
  }
  return parsed.data;
}

/** A trimmed non-empty string, else undefined. */
function text(v: unknown): string | undefined {
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

/** A comma-separated string (from -c or the environment) or a list (from cdk.json), as non-empty trimmed items. */
function list(v: unknown): string[] | undefined {
  const items = (typeof v === 'string' ? v.split(',') : Array.isArray(v) ? v.map(String) : [])
    .map((s) => s.trim())
    .filter(Boolean);
  return items.length ? items : undefined;
}

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { buildStrataApp, type StrataStacks } from '../../../cdk/app.js';
import { loadEnvironmentConfig } from '../../../cdk/config/load.js';
import type { EnvironmentConfig, EnvironmentName } from '../../../cdk/config/schema.js';
import { CacheNodeBundle } from '../../../cdk/constructs/cache-node-fleet.js';
import { REPO_ROOT } from '../../../cdk/lib/packaging.js';

/** Bundles like the daemon but without native modules, so tests never depend on cachenode/ or arm64 builds. */
export const PLACEHOLDER_CACHENODE = join(REPO_ROOT, 'test', 'infra', 'fixtures', 'cachenode-placeholder.ts');

export type StackKey = keyof StrataStacks;
export const STACK_KEYS: readonly StackKey[] = ['network', 'data', 'fleet', 'api', 'monitoring', 'workflows'];

/** The feature flags the CLI passes from cdk/cdk.json, so tests synthesize exactly what `cdk synth` does. */
export function cdkJsonContext(): Record<string, unknown> {
  return (JSON.parse(readFileSync(join(REPO_ROOT, 'cdk', 'cdk.json'), 'utf8')) as { context: Record<string, unknown> }).context;
}

export interface SynthOptions {
  /**
   * Run esbuild for the Lambda and cachenode assets. Templates are identical either way (apart from asset
   * hashes), so only tests that look at the bundles need it. @default false
   */
  readonly bundling?: boolean;
  /** @default true */
  readonly nag?: boolean;
  /**
   * Overrides applied to the context (e.g. account). `alarmEmails` / `alarmTopicArn` choose the alarm destination.
   * @default - alarms to PLACEHOLDER_ALARM_EMAIL
   */
  readonly context?: Record<string, unknown>;
}

export interface SynthesizedEnvironment {
  readonly config: EnvironmentConfig;
  readonly app: App;
  readonly stacks: StrataStacks;
  readonly assembly: CloudAssembly;
  readonly templates: Readonly<Record<StackKey, Template>>;
  /** Directory of the cloud assembly (templates, assets). */
  readonly outdir: string;
}

/**
 * Where test synths send alarms: staging and prod refuse to synthesize without a destination (given at synth time,
 * never committed). An address of the reserved example.com domain, so nothing real is ever subscribed.
 */
export const PLACEHOLDER_ALARM_EMAIL = 'strata-alarms@example.com';

/** The context's alarmEmails / alarmTopicArn when it gives either (an empty alarmEmails: none at all), else the placeholder. */
function alarmDestinationContext(context: Record<string, unknown> = {}): { alarmEmails?: unknown; alarmTopicArn?: unknown } {
  const given = 'alarmEmails' in context || 'alarmTopicArn' in context;
  return given
    ? { alarmEmails: context.alarmEmails, alarmTopicArn: context.alarmTopicArn }
    : { alarmEmails: PLACEHOLDER_ALARM_EMAIL };
}

/** Synthesizes one environment as the CLI would (cdk.json flags, cdk-nag on), with the placeholder daemon. */
export function synthEnvironment(name: EnvironmentName, options: SynthOptions = {}): SynthesizedEnvironment {
  const outdir = mkdtempSync(join(tmpdir(), `strata-cdk-${name}-`));
  const context: Record<string, unknown> = { ...cdkJsonContext(), ...options.context };
  if (!options.bundling) context['aws:cdk:bundling-stacks'] = [];
  const app = new App({ outdir, context, analyticsReporting: false });
  const sources = { context: { account: options.context?.account, ...alarmDestinationContext(options.context) } };
  const config = loadEnvironmentConfig(name, sources);
  const stacks = buildStrataApp(app, {
    config,
    cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE),
    nag: options.nag ?? true,
  });
  const assembly = app.synth();
  const templates = Object.fromEntries(STACK_KEYS.map((k) => [k, Template.fromStack(stacks[k])])) as Record<StackKey, Template>;
  return { config, app, stacks, assembly, templates, outdir };
}

const cache = new Map<string, SynthesizedEnvironment>();

/** {@link synthEnvironment}, once per test file (module registry) and option set. Call it at file or describe scope. */
export function synthesized(name: EnvironmentName, options: SynthOptions = {}): SynthesizedEnvironment {
  const key = JSON.stringify([name, options]);
  let s = cache.get(key);
  if (!s) {
    const synthesizedEnv = synthEnvironment(name, options);
    cache.set(key, synthesizedEnv);
    // The cloud assembly (templates, bundles) goes after the file's tests.
    afterAll(() => rmSync(synthesizedEnv.outdir, { recursive: true, force: true }));
    s = synthesizedEnv;
  }
  return s;
}

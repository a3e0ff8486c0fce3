import { runtimeEnvSchema } from './runtime-env.js';
import { ConfigError } from '../errors.js';
import { discardSink, setDefaultMetricsSink, stdoutSink, type MetricsSink } from '../metrics/sink.js';
import { formatIssues } from '../util/zod-issues.js';

export interface MetricsSettings {
  /** `Environment` dimension value of every metric. */
  environment: string;
  /** Whether request metrics go to stdout as EMF lines by default (always in Lambda). */
  stdout: boolean;
}

const schema = runtimeEnvSchema.pick({ STRATA_ENV: true, STRATA_METRICS_STDOUT: true });

/**
 * The metrics part of the runtime configuration (STRATA_ENV, STRATA_METRICS_STDOUT), readable without building
 * the tiers. A bad value stops start-up with a message naming the variable, like the rest of the configuration.
 */
export function metricsSettings(env: NodeJS.ProcessEnv = process.env): MetricsSettings {
  const r = schema.safeParse({
    STRATA_ENV: env.STRATA_ENV || undefined,
    STRATA_METRICS_STDOUT: env.STRATA_METRICS_STDOUT || undefined,
  });
  if (!r.success) throw new ConfigError(`invalid configuration: ${formatIssues(r.error.issues, { root: '' })}`);
  return { environment: r.data.STRATA_ENV, stdout: !!env.AWS_LAMBDA_FUNCTION_NAME || r.data.STRATA_METRICS_STDOUT };
}

/** Stdout in Lambda (or with STRATA_METRICS_STDOUT=1), else {@link discardSink}. */
export function defaultMetricsSink(env: NodeJS.ProcessEnv = process.env): MetricsSink {
  return metricsSettings(env).stdout ? stdoutSink() : discardSink;
}

/** Makes {@link defaultMetricsSink} the process's default (every entry point's composition does, once). */
export function useDefaultMetricsSink(): void {
  setDefaultMetricsSink(() => defaultMetricsSink());
}

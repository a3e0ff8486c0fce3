/**
 * Where request metrics go. In Lambda: stdout only, one write per request, which CloudWatch Logs turns into
 * metrics (EMF). The local server installs its in-process store instead (plus stdout with STRATA_METRICS_STDOUT=1),
 * so `npm start` keeps a readable console and still has numbers for its dashboard.
 */
import type { EmfDocument } from './emf.js';
import { serializeEmf } from './emf.js';

/** Receives the EMF documents of one request. Must not block or throw; nothing awaits it. */
export interface MetricsSink {
  write(docs: readonly EmfDocument[]): void;
}

/** Writes EMF lines with one synchronous `write` call (stdout unless told otherwise). */
export function stdoutSink(write: (text: string) => unknown = (text) => process.stdout.write(text)): MetricsSink {
  return { write: (docs) => void (docs.length && write(serializeEmf(docs))) };
}

/** Drops everything (unit tests, scripts that call the handlers outside Lambda and the local server). */
export const discardSink: MetricsSink = { write: () => undefined };

/** Sends the same documents to several sinks. */
export function teeSink(...sinks: MetricsSink[]): MetricsSink {
  return { write: (docs) => sinks.forEach((s) => s.write(docs)) };
}

let installed: MetricsSink | undefined;
let fallback: MetricsSink | undefined;
let chooseDefault: () => MetricsSink = () => discardSink;

/**
 * How this process picks its default sink. The composition root sets it (composition/metrics-settings.ts reads
 * the configuration: stdout in Lambda or with STRATA_METRICS_STDOUT=1); this module reads no environment.
 */
export function setDefaultMetricsSink(choose: () => MetricsSink): void {
  chooseDefault = choose;
  fallback = undefined;
}

/** The process's sink: the installed one, else the default (chosen once; {@link discardSink} until one is set). */
export function metricsSink(): MetricsSink {
  if (installed) return installed;
  fallback ??= chooseDefault();
  return fallback;
}

/** Installs a sink for this process (the local server, tests); `undefined` restores the default. */
export function setMetricsSink(sink: MetricsSink | undefined): void {
  installed = sink;
}

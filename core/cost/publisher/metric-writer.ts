import { PutMetricDataCommand, type CloudWatchClient, type MetricDatum, type StandardUnit } from '@aws-sdk/client-cloudwatch';
import { ValidationError } from '../../errors.js';
import type { MetricDef } from '../../metrics/metric-catalog.js';

/**
 * Publishing metrics of the catalog (core/metrics/metric-catalog.ts) with PutMetricData. A {@link MetricPoint}
 * can only be built from a catalog entry and one of the dimension sets the catalog declares for it, so the
 * publisher cannot emit a name, unit or dimension set that dashboards and alarms do not know about.
 */

/** CloudWatch takes at most 1,000 data points per PutMetricData call (and 1 MB, far above 1,000 of ours). */
export const MAX_DATA_PER_CALL = 1000;

/** One value of a catalog metric, with its dimensions. */
export interface MetricPoint {
  readonly def: MetricDef;
  readonly dimensions: Readonly<Record<string, string>>;
  readonly value: number;
}

/**
 * A point of `def` with `dimensions`, checked against the catalog: the dimension names must be exactly one of the
 * def's dimension sets, every value non-empty, and the value finite.
 * @example metricPoint(METRICS.totalCostPerHour, { Environment: 'dev' }, 0.42)
 */
export function metricPoint(def: MetricDef, dimensions: Readonly<Record<string, string>>, value: number): MetricPoint {
  const names = Object.keys(dimensions).sort();
  const declared = def.dimensions.some((set) => set.length === names.length && [...set].sort().every((n, i) => n === names[i]));
  if (!declared) {
    throw new ValidationError(
      'dimensions',
      `${def.namespace} ${def.name} is not published with dimensions [${names.join(', ')}] (the catalog declares ${def.dimensions.map((s) => `[${s.join(', ')}]`).join(' or ')})`,
    );
  }
  for (const [k, v] of Object.entries(dimensions))
    if (v.length === 0) throw new ValidationError('dimensions', `${def.name}: dimension ${k} has an empty value`);
  if (!Number.isFinite(value)) throw new ValidationError('value', `${def.name}: must be a finite number, got ${value}`);
  return { def, dimensions, value };
}

/** Where points go: CloudWatch in AWS, memory in tests. One call carries one namespace. */
export interface MetricSink {
  put(namespace: string, data: readonly MetricDatum[]): Promise<void>;
}

/** PutMetricData through a CloudWatch client. */
export class CloudWatchMetricSink implements MetricSink {
  constructor(private readonly client: CloudWatchClient) {}

  async put(namespace: string, data: readonly MetricDatum[]): Promise<void> {
    await this.client.send(new PutMetricDataCommand({ Namespace: namespace, MetricData: [...data] }));
  }
}

/** What a publish sent: calls made and points per namespace. */
export interface PublishResult {
  readonly calls: number;
  readonly points: Readonly<Record<string, number>>;
}

/** The CloudWatch data of `points` grouped by namespace, all stamped `timestamp`. */
export function toMetricData(points: readonly MetricPoint[], timestamp: Date): Map<string, MetricDatum[]> {
  const byNamespace = new Map<string, MetricDatum[]>();
  for (const p of points) {
    const list = byNamespace.get(p.def.namespace) ?? [];
    list.push({
      MetricName: p.def.name,
      Dimensions: Object.entries(p.dimensions).map(([Name, Value]) => ({ Name, Value })),
      Value: p.value,
      Unit: p.def.unit as StandardUnit,
      Timestamp: timestamp,
    });
    byNamespace.set(p.def.namespace, list);
  }
  return byNamespace;
}

/** How many PutMetricData calls {@link publishPoints} makes for these points. */
export function putCallsFor(points: readonly MetricPoint[]): number {
  const counts = new Map<string, number>();
  for (const p of points) counts.set(p.def.namespace, (counts.get(p.def.namespace) ?? 0) + 1);
  return [...counts.values()].reduce((a, n) => a + Math.ceil(n / MAX_DATA_PER_CALL), 0);
}

/**
 * Sends `points` to `sink`: one namespace per call, at most {@link MAX_DATA_PER_CALL} points each, the calls of a
 * namespace in order. A failing call rejects (the caller's scheduled run fails and is retried by its trigger).
 */
export async function publishPoints(sink: MetricSink, points: readonly MetricPoint[], timestamp: Date): Promise<PublishResult> {
  let calls = 0;
  const counts: Record<string, number> = {};
  for (const [namespace, data] of toMetricData(points, timestamp)) {
    for (let i = 0; i < data.length; i += MAX_DATA_PER_CALL) {
      await sink.put(namespace, data.slice(i, i + MAX_DATA_PER_CALL));
      calls++;
    }
    counts[namespace] = data.length;
  }
  return { calls, points: counts };
}

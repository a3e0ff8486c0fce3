/**
 * CloudWatch Embedded Metric Format (EMF): a JSON log line that CloudWatch Logs turns into metrics, with no API
 * call. `_aws.CloudWatchMetrics` declares which top-level fields are metrics (and their units) and which are
 * dimensions; the values are plain top-level fields.
 *
 * @see https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
 */
import * as z from 'zod';
import type { MetricDef, MetricKey, MetricUnit } from './metric-catalog.js';
import { METRICS } from './metric-catalog.js';

/** Limits of the EMF specification. */
export const EMF_LIMITS = {
  /** Dimensions in one dimension set. */
  dimensionsPerSet: 30,
  /** Metrics in one directive. */
  metricsPerDirective: 100,
  /** Values in one metric's array. */
  valuesPerMetric: 100,
} as const;

export interface EmfMetric {
  Name: string;
  Unit: MetricUnit;
}

export interface EmfDirective {
  Namespace: string;
  /** Each inner list is one dimension set: the metric is published once per set. */
  Dimensions: string[][];
  Metrics: EmfMetric[];
}

/** One EMF log event. Dimension values (strings) and metric values (numbers) are top-level fields. */
export interface EmfDocument {
  _aws: { Timestamp: number; CloudWatchMetrics: EmfDirective[] };
  [field: string]: unknown;
}

export interface EmfInput {
  /** Epoch milliseconds the values belong to. */
  timestamp: number;
  /** Dimension values; an absent one drops the dimension sets that need it. */
  dimensions: Readonly<Record<string, string | undefined>>;
  /** Metric values by catalog key; a metric none of whose dimension sets is complete is left out. */
  values: Partial<Record<MetricKey, number | readonly number[]>>;
  /** Extra fields for the log line (request id, status), neither metrics nor dimensions. */
  properties?: Readonly<Record<string, string | number | boolean>>;
}

/**
 * Builds one EMF document from catalog metrics: metrics that share a namespace and the same usable dimension
 * sets go in one directive. Dimension sets come from the catalog only, so a record cannot invent a dimension.
 */
export function emfDocument(input: EmfInput): EmfDocument {
  const directives = new Map<string, EmfDirective[]>();
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input.values) as [MetricKey, number | readonly number[] | undefined][]) {
    if (value === undefined) continue;
    const def: MetricDef = METRICS[key];
    const sets = def.dimensions.filter((set) => set.every((d) => input.dimensions[d] !== undefined));
    if (sets.length === 0) continue;
    const id = `${def.namespace}|${sets.map((s) => s.join(',')).join(';')}`;
    const group = directives.get(id) ?? [];
    directives.set(id, group);
    let directive = group.at(-1);
    if (!directive || directive.Metrics.length >= EMF_LIMITS.metricsPerDirective) {
      directive = { Namespace: def.namespace, Dimensions: sets.map((s) => [...s]), Metrics: [] };
      group.push(directive);
    }
    directive.Metrics.push({ Name: def.name, Unit: def.unit });
    fields[def.name] = typeof value === 'number' ? value : value.slice(0, EMF_LIMITS.valuesPerMetric);
    for (const set of sets) for (const d of set) fields[d] = input.dimensions[d];
  }
  return {
    _aws: { Timestamp: input.timestamp, CloudWatchMetrics: [...directives.values()].flat() },
    ...input.properties,
    ...fields,
  };
}

/** EMF documents as log text: one JSON object per line. */
export function serializeEmf(docs: readonly EmfDocument[]): string {
  let out = '';
  for (const d of docs) out += `${JSON.stringify(d)}\n`;
  return out;
}

const unitSchema = z.enum([
  'Seconds',
  'Microseconds',
  'Milliseconds',
  'Bytes',
  'Kilobytes',
  'Megabytes',
  'Gigabytes',
  'Terabytes',
  'Bits',
  'Kilobits',
  'Megabits',
  'Gigabits',
  'Terabits',
  'Percent',
  'Count',
  'Bytes/Second',
  'Kilobytes/Second',
  'Megabytes/Second',
  'Gigabytes/Second',
  'Terabytes/Second',
  'Bits/Second',
  'Kilobits/Second',
  'Megabits/Second',
  'Gigabits/Second',
  'Terabits/Second',
  'Count/Second',
  'None',
]);

const nameSchema = z.string().min(1).max(255);

/** The EMF specification's structure (the referential rules are in {@link emfDocumentSchema}). */
const emfShape = z.looseObject({
  _aws: z.looseObject({
    Timestamp: z.number().int().nonnegative(),
    CloudWatchMetrics: z.array(
      z.strictObject({
        Namespace: z.string().min(1).max(1024),
        Dimensions: z.array(z.array(nameSchema).max(EMF_LIMITS.dimensionsPerSet)),
        Metrics: z
          .array(
            z.strictObject({
              Name: nameSchema,
              Unit: unitSchema.optional(),
              StorageResolution: z.union([z.literal(1), z.literal(60)]).optional(),
            }),
          )
          .max(EMF_LIMITS.metricsPerDirective),
      }),
    ),
  }),
});

/**
 * A valid EMF document: the specification's structure, plus every declared metric has a numeric top-level value
 * (a number or up to 100 numbers) and every dimension a string top-level value.
 */
export const emfDocumentSchema = emfShape.superRefine((doc, ctx) => {
  doc._aws.CloudWatchMetrics.forEach((directive, i) => {
    for (const set of directive.Dimensions) {
      for (const d of set) {
        if (typeof doc[d] !== 'string')
          ctx.addIssue({
            code: 'custom',
            path: ['_aws', 'CloudWatchMetrics', i, 'Dimensions'],
            message: `dimension '${d}' has no string value at the top level`,
          });
      }
    }
    for (const m of directive.Metrics) {
      const v = doc[m.Name];
      const ok =
        (typeof v === 'number' && Number.isFinite(v)) ||
        (Array.isArray(v) &&
          v.length > 0 &&
          v.length <= EMF_LIMITS.valuesPerMetric &&
          v.every((x) => typeof x === 'number' && Number.isFinite(x)));
      if (!ok)
        ctx.addIssue({
          code: 'custom',
          path: ['_aws', 'CloudWatchMetrics', i, 'Metrics'],
          message: `metric '${m.Name}' has no numeric value (or 1-100 numbers) at the top level`,
        });
    }
  });
});

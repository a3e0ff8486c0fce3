import { METRICS } from '../../core/metrics/metric-catalog.js';
import type { EmfDocument } from '../../core/metrics/emf.js';
import { EMF_LIMITS, emfDocument, emfDocumentSchema, serializeEmf } from '../../core/metrics/emf.js';
import { stdoutSink, teeSink } from '../../core/metrics/sink.js';

const T = Date.UTC(2026, 10, 21, 12, 0, 0);

describe('EMF documents (emfDocument)', () => {
  it('declares each metric with the catalog unit and the dimension sets whose values are all given', () => {
    const doc = emfDocument({
      timestamp: T,
      dimensions: { Environment: 'dev', Tier: 'hot' },
      values: { latency: 3.5, requests: 1 },
    });

    expect(emfDocumentSchema.safeParse(doc).success).toBe(true);
    expect(doc._aws.Timestamp).toBe(T);
    // Requests has [Environment] and [Environment, Operation]; without an Operation only the first applies.
    const requests = doc._aws.CloudWatchMetrics.find((d) => d.Metrics.some((m) => m.Name === 'Requests'))!;
    expect(requests).toEqual({
      Namespace: 'Strata/Requests',
      Dimensions: [['Environment']],
      Metrics: [{ Name: 'Requests', Unit: 'Count' }],
    });
    const latency = doc._aws.CloudWatchMetrics.find((d) => d.Metrics.some((m) => m.Name === 'Latency'))!;
    expect(latency.Dimensions).toEqual([['Environment'], ['Environment', 'Tier']]);
    expect(latency.Metrics).toEqual([{ Name: 'Latency', Unit: 'Milliseconds' }]);
    expect(doc).toMatchObject({ Environment: 'dev', Tier: 'hot', Latency: 3.5, Requests: 1 });
  });

  it('groups metrics that share their dimension sets into one directive', () => {
    const doc = emfDocument({
      timestamp: T,
      dimensions: { Environment: 'dev', Namespace: 'app' },
      values: { bytesIn: 10, bytesOut: 20, misses: 1 },
    });
    expect(doc._aws.CloudWatchMetrics).toHaveLength(1);
    expect(doc._aws.CloudWatchMetrics[0]!.Metrics.map((m) => m.Name).sort()).toEqual(['BytesIn', 'BytesOut', 'Misses']);
    expect(doc._aws.CloudWatchMetrics[0]!.Dimensions).toEqual([['Environment'], ['Environment', 'Namespace']]);
  });

  it('leaves out a metric none of whose dimension sets can be filled, rather than inventing one', () => {
    // Hits is only published by tier.
    const doc = emfDocument({ timestamp: T, dimensions: { Environment: 'dev' }, values: { hits: 2, requests: 1 } });
    expect(doc.Hits).toBeUndefined();
    expect(doc._aws.CloudWatchMetrics.flatMap((d) => d.Metrics.map((m) => m.Name))).toEqual(['Requests']);
  });

  it('keeps extra properties as plain fields, neither metrics nor dimensions', () => {
    const doc = emfDocument({
      timestamp: T,
      dimensions: { Environment: 'dev' },
      values: { requests: 1 },
      properties: { requestId: 'r-1', statusCode: 200 },
    });
    expect(doc).toMatchObject({ requestId: 'r-1', statusCode: 200 });
    expect(doc._aws.CloudWatchMetrics.flatMap((d) => d.Dimensions.flat())).not.toContain('requestId');
  });

  it('publishes array values of up to 100 numbers', () => {
    const doc = emfDocument({
      timestamp: T,
      dimensions: { Environment: 'dev' },
      values: { latency: Array.from({ length: 150 }, (_, i) => i) },
    });
    expect(doc.Latency).toHaveLength(EMF_LIMITS.valuesPerMetric);
    expect(emfDocumentSchema.safeParse(doc).success).toBe(true);
  });

  it('serializes one JSON object per line', () => {
    const docs = [
      emfDocument({ timestamp: T, dimensions: { Environment: 'dev' }, values: { requests: 1 } }),
      emfDocument({ timestamp: T, dimensions: { Environment: 'dev', Tier: 'cold' }, values: { hits: 1 } }),
    ];
    const text = serializeEmf(docs);
    const lines = text.split('\n');
    expect(lines.at(-1)).toBe('');
    expect(lines.slice(0, -1).map((l) => JSON.parse(l) as EmfDocument)).toEqual(docs);
  });
});

describe('EMF validation (emfDocumentSchema)', () => {
  const valid = (): EmfDocument =>
    emfDocument({ timestamp: T, dimensions: { Environment: 'dev', Operation: 'get' }, values: { requests: 1, errors: 0 } });

  it('rejects a declared metric without a numeric top-level value', () => {
    const doc = valid();
    delete doc.Requests;
    const r = emfDocumentSchema.safeParse(doc);
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.message).join()).toMatch(/metric 'Requests' has no numeric value/);
  });

  it('rejects a dimension whose value is not a string', () => {
    const r = emfDocumentSchema.safeParse({ ...valid(), Operation: 7 });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.message).join()).toMatch(/dimension 'Operation'/);
  });

  it('rejects more than 30 dimensions in a set and more than 100 metrics in a directive', () => {
    const many = Array.from({ length: 31 }, (_, i) => `D${i}`);
    const fields = Object.fromEntries(many.map((d) => [d, 'x']));
    expect(
      emfDocumentSchema.safeParse({
        _aws: { Timestamp: T, CloudWatchMetrics: [{ Namespace: 'N', Dimensions: [many], Metrics: [{ Name: 'M' }] }] },
        M: 1,
        ...fields,
      }).success,
    ).toBe(false);
    const metrics = Array.from({ length: 101 }, (_, i) => ({ Name: `M${i}` }));
    const values = Object.fromEntries(metrics.map((m) => [m.Name, 1]));
    expect(
      emfDocumentSchema.safeParse({
        _aws: { Timestamp: T, CloudWatchMetrics: [{ Namespace: 'N', Dimensions: [[]], Metrics: metrics }] },
        ...values,
      }).success,
    ).toBe(false);
    expect(
      emfDocumentSchema.safeParse({
        _aws: { Timestamp: T, CloudWatchMetrics: [{ Namespace: 'N', Dimensions: [[]], Metrics: metrics.slice(0, 100) }] },
        ...values,
      }).success,
    ).toBe(true);
  });

  it('rejects a unit CloudWatch does not know', () => {
    expect(
      emfDocumentSchema.safeParse({
        _aws: {
          Timestamp: T,
          CloudWatchMetrics: [{ Namespace: 'N', Dimensions: [], Metrics: [{ Name: 'M', Unit: 'Dollars' }] }],
        },
        M: 1,
      }).success,
    ).toBe(false);
  });

  it('accepts a document built from every catalog metric at once', () => {
    const values = Object.fromEntries(Object.keys(METRICS).map((k) => [k, 1]));
    const dims = Object.fromEntries(
      Object.values(METRICS)
        .flatMap((m) => m.dimensions.flat())
        .map((d) => [d, `${d.toLowerCase()}-1`]),
    );
    const doc = emfDocument({ timestamp: T, dimensions: dims, values });
    expect(emfDocumentSchema.safeParse(doc).success).toBe(true);
    // Same metric names as the catalog (each emitted once).
    expect(doc._aws.CloudWatchMetrics.flatMap((d) => d.Metrics.map((m) => m.Name)).sort()).toEqual(
      Object.values(METRICS)
        .map((m) => m.name)
        .sort(),
    );
  });
});

describe('Sinks', () => {
  it('stdoutSink writes all documents of a request with one write call', () => {
    const writes: string[] = [];
    const sink = stdoutSink((s) => writes.push(s));
    const docs = [
      emfDocument({ timestamp: T, dimensions: { Environment: 'dev' }, values: { requests: 1 } }),
      emfDocument({ timestamp: T, dimensions: { Environment: 'dev', Tier: 'hot' }, values: { hits: 2 } }),
    ];
    sink.write(docs);
    sink.write([]);
    expect(writes).toHaveLength(1);
    expect(writes[0]!.trimEnd().split('\n')).toHaveLength(2);
  });

  it('teeSink hands the same documents to each sink', () => {
    const a: EmfDocument[] = [];
    const b: EmfDocument[] = [];
    const docs = [emfDocument({ timestamp: T, dimensions: { Environment: 'dev' }, values: { requests: 1 } })];
    teeSink({ write: (d) => a.push(...d) }, { write: (d) => b.push(...d) }).write(docs);
    expect(a).toEqual(docs);
    expect(b).toEqual(docs);
  });
});

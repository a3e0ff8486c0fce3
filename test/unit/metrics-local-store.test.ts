import { emfDocument } from '../../core/metrics/emf.js';
import { LocalMetricsStore, percentileOf } from '../../core/metrics/local-store.js';

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);
const R = 'Strata/Requests';

function storeAt(now: { t: number }, opts: { resolutionMs?: number; retainMs?: number } = {}): LocalMetricsStore {
  return new LocalMetricsStore({ resolutionMs: 10_000, ...opts, now: () => now.t });
}

describe('LocalMetricsStore', () => {
  it('takes EMF documents: each value once per declared dimension set', () => {
    const now = { t: T0 + 5_000 };
    const store = storeAt(now);
    store.write([
      emfDocument({
        timestamp: T0 + 1_000,
        dimensions: { Environment: 'local', Tier: 'hot', Namespace: 'app' },
        values: { hits: 3 },
      }),
    ]);
    store.write([
      emfDocument({
        timestamp: T0 + 2_000,
        dimensions: { Environment: 'local', Tier: 'cold', Namespace: 'app' },
        values: { hits: 1 },
      }),
    ]);
    const window = { fromMs: T0, toMs: T0 + 9_999 };

    expect(store.query({ namespace: R, name: 'Hits', dimensions: { Environment: 'local', Tier: 'hot' } }, 'Sum', window)).toEqual(
      [{ points: [[T0, 3]] }],
    );
    expect(
      store.query(
        { namespace: R, name: 'Hits', dimensions: { Environment: 'local', Namespace: 'app', Tier: 'cold' } },
        'Sum',
        window,
      ),
    ).toEqual([{ points: [[T0, 1]] }]);
    // No [Environment] set for Hits: a query for it finds nothing, as in CloudWatch.
    expect(store.query({ namespace: R, name: 'Hits', dimensions: { Environment: 'local' } }, 'Sum', window)).toEqual([]);
  });

  it('splits by a dimension: one result per value seen', () => {
    const now = { t: T0 + 5_000 };
    const store = storeAt(now);
    for (const [op, n] of [
      ['get', 3],
      ['put', 2],
    ] as const) {
      for (let i = 0; i < n; i++)
        store.write([
          emfDocument({ timestamp: T0, dimensions: { Environment: 'local', Operation: op }, values: { requests: 1 } }),
        ]);
    }
    const r = store.query({ namespace: R, name: 'Requests', dimensions: { Environment: 'local' }, splitBy: 'Operation' }, 'Sum', {
      fromMs: T0,
      toMs: T0 + 9_999,
    });
    expect(r).toEqual([
      { split: 'get', points: [[T0, 3]] },
      { split: 'put', points: [[T0, 2]] },
    ]);
  });

  it('computes Sum, Average, Minimum, Maximum and SampleCount per step, leaving out steps without data', () => {
    const now = { t: T0 + 60_000 };
    const store = storeAt(now);
    const put = (at: number, v: number) =>
      store.record({ namespace: R, name: 'BytesIn', unit: 'Bytes', dimensions: { Environment: 'local' } }, v, at);
    put(T0 + 1, 10);
    put(T0 + 2, 30);
    put(T0 + 25_000, 5);
    const sel = { namespace: R, name: 'BytesIn', dimensions: { Environment: 'local' } };
    const window = { fromMs: T0, toMs: T0 + 29_999 };
    expect(store.query(sel, 'Sum', window)[0]!.points).toEqual([
      [T0, 40],
      [T0 + 20_000, 5],
    ]);
    expect(store.query(sel, 'Average', window)[0]!.points).toEqual([
      [T0, 20],
      [T0 + 20_000, 5],
    ]);
    expect(store.query(sel, 'Minimum', window)[0]!.points).toEqual([
      [T0, 10],
      [T0 + 20_000, 5],
    ]);
    expect(store.query(sel, 'Maximum', window)[0]!.points).toEqual([
      [T0, 30],
      [T0 + 20_000, 5],
    ]);
    expect(store.query(sel, 'SampleCount', window)[0]!.points).toEqual([
      [T0, 2],
      [T0 + 20_000, 1],
    ]);
    // A wider step merges buckets.
    expect(store.query(sel, 'Sum', { ...window, stepMs: 30_000 })[0]!.points).toEqual([[T0, 45]]);
    // Percentiles need a histogram, which only millisecond metrics keep.
    expect(store.query(sel, 'p50', window)[0]!.points).toEqual([]);
  });

  it('computes percentiles of millisecond metrics across merged buckets', () => {
    const now = { t: T0 + 60_000 };
    const store = storeAt(now);
    for (let ms = 1; ms <= 100; ms++) {
      store.write([
        emfDocument({
          timestamp: T0 + (ms % 2) * 10_000,
          dimensions: { Environment: 'local', Tier: 'hot' },
          values: { latency: ms },
        }),
      ]);
    }
    const sel = { namespace: R, name: 'Latency', dimensions: { Environment: 'local', Tier: 'hot' } };
    const [r] = store.query(sel, 'p50', { fromMs: T0, toMs: T0 + 19_999, stepMs: 20_000 });
    expect(r!.points).toHaveLength(1);
    expect(r!.points[0]![1]).toBeCloseTo(50, 1);
    const [p99] = store.query(sel, 'p99', { fromMs: T0, toMs: T0 + 19_999, stepMs: 20_000 });
    expect(p99!.points[0]![1]).toBeCloseTo(99, 1);
    const [max] = store.query(sel, 'Maximum', { fromMs: T0, toMs: T0 + 19_999, stepMs: 20_000 });
    expect(max!.points).toEqual([[T0, 100]]);
  });

  it('keeps points for the retention only', () => {
    const now = { t: T0 };
    const store = storeAt(now, { retainMs: 60_000 });
    const s = { namespace: R, name: 'Requests', unit: 'Count', dimensions: { Environment: 'local' } };
    store.record(s, 1, T0);
    expect(store.oldestPointMs()).toBe(T0);
    now.t = T0 + 120_000;
    store.record(s, 1, T0 + 120_000);
    expect(store.oldestPointMs()).toBe(T0 + 120_000);
    // Too old to keep: dropped on arrival.
    store.record(s, 1, T0);
    expect(
      store.query({ namespace: R, name: 'Requests', dimensions: { Environment: 'local' } }, 'Sum', {
        fromMs: T0,
        toMs: T0 + 130_000,
      })[0]!.points,
    ).toEqual([[T0 + 120_000, 1]]);
  });

  it('rejects a retention shorter than its resolution', () => {
    expect(() => new LocalMetricsStore({ resolutionMs: 10_000, retainMs: 5_000 })).toThrow(RangeError);
  });

  it('reads pNN statistics', () => {
    expect(percentileOf('p99')).toBe(99);
    expect(percentileOf('p99.9')).toBe(99.9);
    expect(percentileOf('Sum')).toBeUndefined();
  });
});

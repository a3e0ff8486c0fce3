import { priceBook } from '../../core/cost/model/price-catalog.js';
import { costPlacement } from '../../core/cost/model/calculator.js';
import { expectedDistinctKeys } from '../../core/cost/model/formulas.js';
import {
  candidatePlacements,
  elasticacheServerlessPlacement,
  instancePlacement,
  s3Placement,
} from '../../core/cost/model/placements.js';
import { recommend, type RecommendationReport } from '../../core/cost/model/recommender.js';
import { ValidationError } from '../../core/errors.js';

const MB = 1e6;
const top = (r: RecommendationReport) => r.recommendations[0]!;

describe('placement recommender', () => {
  describe("the paper's rules (§III-D) hold with today's prices", () => {
    it.each([
      ['1 KB', 1e3],
      ['1 MB', MB],
      ['5 MB', 5 * MB],
    ])('d = %s, T < 2 GB, low R: S3 is best, volatile allowed', (_label, valueBytes) => {
      const r = recommend({ valueBytes, keys: 300, requestsPerMonth: 2000 });
      expect(top(r).placement.id).toBe('s3:STANDARD');
    });

    it('persistence needed: S3 is the cheapest placement, and volatile ones are not offered', () => {
      for (const requestsPerMonth of [2000, 200_000]) {
        const r = recommend({ valueBytes: 1 * MB, keys: 500, requestsPerMonth, persistent: true }, { rankBy: 'cost' });
        expect(top(r).placement.kind).toBe('s3');
        expect(r.recommendations.every((x) => x.placement.persistent)).toBe(true);
        expect(r.excluded.map((e) => e.placement.id)).toEqual(
          expect.arrayContaining(['elasticache-serverless', 'elasticache:cache.r7g.large']),
        );
        expect(r.excluded.every((e) => /volatile/.test(e.reason))).toBe(true);
      }
    });

    it('d = 50 MB at a high request rate: a large instance beats S3 and the small ones', () => {
      const r = recommend({ valueBytes: 50 * MB, keys: 500, requestsPerMonth: 200_000, serviceTimeMs: 75_390 });
      expect(top(r).placement).toMatchObject({ kind: 'ec2-ebs', instanceType: expect.stringMatching(/\.xlarge$/) });
      const s3 = r.recommendations.find((x) => x.placement.id === 's3:STANDARD')!;
      const small = r.recommendations.find((x) => x.placement.id === 'ec2-ebs:t4g.small')!;
      expect(top(r).costPerSpeedup).toBeLessThan(s3.costPerSpeedup);
      expect(top(r).costPerSpeedup).toBeLessThan(small.costPerSpeedup);
    });
  });

  describe("the paper's rules with the paper's prices (paper-2010)", () => {
    it('S3 for 1 MB at 2,000 requests; m1.xlarge for 50 MB at 200,000', () => {
      expect(
        top(
          recommend({ valueBytes: 1 * MB, keys: 500, requestsPerMonth: 2000, serviceTimeMs: 6320 }, { catalogId: 'paper-2010' }),
        ).placement.id,
      ).toBe('s3:STANDARD');
      const big = recommend(
        { valueBytes: 50 * MB, keys: 500, requestsPerMonth: 200_000, serviceTimeMs: 75_390 },
        { catalogId: 'paper-2010' },
      );
      expect(top(big).placement.instanceType).toBe('m1.xlarge');
      // Speedups from the fitted 2010 latencies land near the measured ones (S3 50 MB: 6.43 in Table IV).
      expect(big.recommendations.find((x) => x.placement.id === 's3:STANDARD')!.speedup).toBeGreaterThan(5);
      expect(big.recommendations.find((x) => x.placement.id === 's3:STANDARD')!.speedup).toBeLessThan(8);
    });

    it("offers the paper's seven placements", () => {
      expect(
        candidatePlacements(priceBook('paper-2010'))
          .map((p) => p.label)
          .sort(),
      ).toEqual(
        ['S3', 'm1.small-mem', 'm1.small-disk', 'm1.small-ebs', 'm1.xlarge-mem', 'm1.xlarge-disk', 'm1.xlarge-ebs'].sort(),
      );
    });
  });

  describe('ranking', () => {
    const r = recommend({ valueBytes: 10_000, keys: 10_000, requestsPerMonth: 5_000_000, latencyTargetMs: 5 });

    it('puts every placement that meets the latency target first, then orders by C/S', () => {
      const flags = r.recommendations.map((x) => x.meetsLatency);
      expect(flags).toEqual([...flags].sort((a, b) => Number(b) - Number(a)));
      expect(top(r).meetsLatency).toBe(true);
      const s3 = r.recommendations.find((x) => x.placement.id === 's3:STANDARD')!;
      expect(s3.meetsLatency).toBe(false);
      for (const group of [true, false]) {
        const cs = r.recommendations.filter((x) => x.meetsLatency === group).map((x) => x.costPerSpeedup);
        expect(cs).toEqual([...cs].sort((a, b) => a - b));
      }
      expect(r.recommendations.map((x) => x.rank)).toEqual(r.recommendations.map((_, i) => i + 1));
    });

    it('reports C/S as the monthly total over the speedup, and the total as the sum of the components', () => {
      for (const x of r.recommendations) {
        expect(x.costPerSpeedup).toBeCloseTo(x.cost.total / x.speedup, 10);
        expect(x.cost.total).toBeCloseTo(x.cost.alloc + x.cost.store + x.cost.req + x.cost.io + x.cost.access, 10);
      }
    });

    it('ranks by monthly cost when asked', () => {
      const byCost = recommend({ valueBytes: 10_000, keys: 10_000, requestsPerMonth: 5_000_000 }, { rankBy: 'cost' });
      const totals = byCost.recommendations.map((x) => x.cost.total);
      expect(totals).toEqual([...totals].sort((a, b) => a - b));
    });
  });

  describe('workload', () => {
    it('defaults the writes to the misses of a cold cache and the origin time to 1 s', () => {
      const r = recommend({ valueBytes: 1000, keys: 500, requestsPerMonth: 2000 });
      expect(r.writesPerMonth).toBeCloseTo(expectedDistinctKeys(500, 2000), 10);
      expect(r.workload.serviceTimeMs).toBe(1000);
    });

    it('drops C_IO when results stay in the region, and prices Ireland from its own catalog entries', () => {
      const inRegion = recommend({ valueBytes: MB, keys: 500, requestsPerMonth: 2000, transferOut: 'in-region' });
      expect(inRegion.recommendations.every((x) => x.cost.io === 0)).toBe(true);
      const us = recommend({ valueBytes: MB, keys: 500, requestsPerMonth: 2000 }, { rankBy: 'cost' });
      const eu = recommend({ valueBytes: MB, keys: 500, requestsPerMonth: 2000 }, { rankBy: 'cost', region: 'eu-west-1' });
      const alloc = (rep: RecommendationReport) =>
        rep.recommendations.find((x) => x.placement.id === 'ec2-ebs:r7g.large')!.cost.alloc;
      expect(eu.region).toBe('eu-west-1');
      expect(alloc(eu)).toBeGreaterThan(alloc(us));
    });

    it('rejects a workload it cannot price, naming the field', () => {
      expect(() => recommend({ valueBytes: MB, keys: 0, requestsPerMonth: 1 })).toThrow(ValidationError);
      expect(() => recommend({ valueBytes: MB, keys: 0, requestsPerMonth: 1 })).toThrow(/keys/);
      expect(() => recommend({ valueBytes: -1, keys: 1, requestsPerMonth: 1 })).toThrow(/valueBytes/);
    });

    it('leaves out ElastiCache for values Valkey cannot hold', () => {
      const r = recommend({ valueBytes: 600 * 1024 * 1024, keys: 10, requestsPerMonth: 100 });
      expect(r.excluded.find((e) => e.placement.id === 'elasticache-serverless')?.reason).toMatch(/512 MiB/);
      expect(
        r.recommendations.some((x) => x.placement.kind === 'elasticache-serverless' || x.placement.kind === 'elasticache-node'),
      ).toBe(false);
    });
  });
});

describe("calculator on Strata's tiers", () => {
  const book = priceBook('aws-2026-11', 'us-east-1');
  const GiB = 1024 ** 3;

  it('bills ElastiCache Serverless for at least its minimum storage, and one ECPU per KiB moved', () => {
    const tiny = costPlacement(
      elasticacheServerlessPlacement(),
      { valueBytes: 100, keys: 10, readsPerMonth: 1e6, writesPerMonth: 0 },
      book,
      { accessPath: false, transferOut: 'in-region' },
    );
    expect(tiny.cost.store).toBeCloseTo(0.1 * 0.084 * 730, 10);
    expect(tiny.cost.req).toBeCloseTo(0.0023, 10);
    const big = costPlacement(
      elasticacheServerlessPlacement(),
      { valueBytes: 10 * 1024, keys: 10, readsPerMonth: 1e6, writesPerMonth: 0 },
      book,
      { accessPath: false },
    );
    expect(big.cost.req).toBeCloseTo(10 * 0.0023, 10);
  });

  it("sizes warm nodes' gp3 volumes with headroom and charges throughput above the 125 MB/s baseline only when needed", () => {
    const quiet = costPlacement(
      instancePlacement('m7g.large', 'ebs'),
      { valueBytes: 1e6, keys: 10_000, readsPerMonth: 1e5, writesPerMonth: 0 },
      book,
    );
    expect(quiet.cost.store).toBeCloseTo(((10_000 * 1e6 * 1.25) / GiB) * 0.08, 8);
    expect(quiet.cost.req).toBe(0);
    expect(quiet.cost.alloc).toBeCloseTo(730 * 0.0816, 10);
    const busy = costPlacement(
      instancePlacement('m7g.large', 'ebs'),
      { valueBytes: 1e6, keys: 10_000, readsPerMonth: 1e9, writesPerMonth: 0 },
      book,
    );
    expect(busy.cost.req).toBeGreaterThan(0);
  });

  it("adds Strata's API Gateway and Lambda front door per request, and bills Standard-IA's 128 KiB minimum", () => {
    const r = costPlacement(
      s3Placement('STANDARD_IA'),
      { valueBytes: 1000, keys: 1000, readsPerMonth: 1e6, writesPerMonth: 0 },
      book,
    );
    expect(r.cost.access).toBeGreaterThan(3.5 + 0.2);
    expect(r.cost.store).toBeCloseTo(((1000 * 128 * 1024) / GiB) * 0.0125, 10);
    expect(r.notes.join()).toMatch(/128 KiB/);
  });
});

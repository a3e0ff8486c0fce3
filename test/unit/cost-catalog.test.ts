import { getCatalog, listCatalogs, parseCatalog, priceBook, PriceCatalogError } from '../../core/cost/model/price-catalog.js';
import type { PriceCatalog } from '../../core/cost/model/catalogs/schema.js';
import { ValidationError } from '../../core/errors.js';

const STRATA_INSTANCES = ['r7g', 'm7g', 'c7g']
  .flatMap((f) => ['medium', 'large', 'xlarge'].map((s) => `${f}.${s}`))
  .concat(['t4g.small', 't4g.medium']);

/** Every object in the region data that carries prices must say when and where they come from. */
function serviceBlocks(c: PriceCatalog): [string, Record<string, unknown>][] {
  return Object.entries(c.regions).flatMap(([region, prices]) =>
    Object.entries(prices).map(
      ([svc, block]) => [`${region}.${svc}`, block as Record<string, unknown>] as [string, Record<string, unknown>],
    ),
  );
}

const clone = <T>(x: T): T => structuredClone(x);

describe('price catalogs', () => {
  it("all validate against the schema and include the AWS prices and the paper's 2010 prices", () => {
    const ids = listCatalogs().map((c) => c.id);
    expect(ids).toEqual(expect.arrayContaining(['aws-2026-11', 'paper-2010']));
    for (const c of listCatalogs()) expect(() => parseCatalog(c)).not.toThrow();
  });

  it('state the date and source of every service block', () => {
    for (const c of listCatalogs()) {
      for (const [where, block] of serviceBlocks(c)) {
        expect({ where, asOf: block.asOf }).toEqual({ where, asOf: expect.stringMatching(/^\d{4}-\d{2}/) });
        expect({ where, source: block.source }).toEqual({
          where,
          source: expect.stringMatching(/AWS public price list|Table I/),
        });
      }
    }
  });

  describe('aws-2026-11', () => {
    const c = getCatalog('aws-2026-11');

    it.each(['us-east-1', 'eu-west-1'])('prices every service Strata uses in %s', (region) => {
      const p = priceBook(c.id, region).prices;
      expect(Object.keys(p.ec2.instances).sort()).toEqual([...STRATA_INSTANCES].sort());
      for (const i of Object.values(p.ec2.instances)) expect(i.arch).toBe('arm64');
      expect(p.ebs.gp3).toMatchObject({ baselineIops: 3000, baselineThroughputMBps: 125 });
      expect(Object.keys(p.s3.classes).sort()).toEqual(['GLACIER_IR', 'STANDARD', 'STANDARD_IA']);
      expect(p.elasticache?.serverless?.engine).toBe('valkey');
      expect(p.elasticache?.nodes['cache.r7g.large']).toBeDefined();
      expect(p.lambda?.perGBSecondArm64).toBeGreaterThan(0);
      expect(p.apiGateway?.restRequests.per).toBe(1_000_000);
      expect(p.stepFunctions?.standardTransitions.per).toBe(1000);
      expect(p.cloudWatch).toMatchObject({
        customMetricPerMonth: expect.any(Number),
        dashboardPerMonth: expect.any(Number),
        alarmStandardPerMonth: expect.any(Number),
        logsIngestionPerGB: expect.any(Number),
      });
      expect(p.cloudWatch?.putMetricData.usd).toBeGreaterThan(0);
      expect(p.cloudWatch?.getMetricDataMetrics.usd).toBeGreaterThan(0);
    });

    it('keeps the price relations a typo would break: r > m > c per size, sizes double, Ireland not cheaper', () => {
      const us = priceBook(c.id, 'us-east-1').prices.ec2.instances;
      const eu = priceBook(c.id, 'eu-west-1').prices.ec2.instances;
      for (const size of ['medium', 'large', 'xlarge']) {
        expect(us[`r7g.${size}`]!.hourly).toBeGreaterThan(us[`m7g.${size}`]!.hourly);
        expect(us[`m7g.${size}`]!.hourly).toBeGreaterThan(us[`c7g.${size}`]!.hourly);
      }
      for (const f of ['r7g', 'm7g', 'c7g']) {
        expect(us[`${f}.xlarge`]!.hourly / us[`${f}.large`]!.hourly).toBeCloseTo(2, 1);
        expect(us[`${f}.large`]!.hourly / us[`${f}.medium`]!.hourly).toBeCloseTo(2, 1);
      }
      for (const t of STRATA_INSTANCES) expect(eu[t]!.hourly).toBeGreaterThanOrEqual(us[t]!.hourly);
      expect(c.hoursPerMonth).toBe(730);
    });
  });

  describe('paper-2010', () => {
    it('holds Table I exactly, with the 744-hour month and decimal GB of Tables III and IV', () => {
      const c = getCatalog('paper-2010');
      const p = priceBook('paper-2010').prices;
      expect([c.hoursPerMonth, c.bytesPerGB]).toEqual([744, 1e9]);
      expect(p.ec2.instances['m1.small']?.hourly).toBe(0.085);
      expect(p.ec2.instances['m1.xlarge']?.hourly).toBe(0.68);
      expect(p.s3.classes.STANDARD).toMatchObject({
        perGBMonth: 0.15,
        put: { usd: 0.01, per: 1000 },
        get: { usd: 0.01, per: 10_000 },
      });
      expect(p.dataTransfer.outToInternetPerGB).toBe(0.15);
      expect(p.ebs.standard).toMatchObject({ perGBMonth: 0.1, io: { usd: 0.1, per: 1_000_000 } });
      expect(p.ebs.gp3).toBeUndefined();
    });
  });

  describe('schema', () => {
    const base = getCatalog('paper-2010');
    const issuesOf = (c: unknown): string[] => {
      try {
        parseCatalog(c);
      } catch (e) {
        expect(e).toBeInstanceOf(PriceCatalogError);
        return (e as PriceCatalogError).issues;
      }
      throw new Error('expected the catalog to be rejected');
    };

    it('rejects a negative price, naming its path', () => {
      const c = clone(base);
      c.regions['us-east-1']!.ec2.instances['m1.small']!.hourly = -1;
      expect(issuesOf(c).join()).toMatch(/regions\.us-east-1\.ec2\.instances\.m1\.small\.hourly/);
    });

    it('rejects a service block without a date, or with a date that is not YYYY-MM', () => {
      const missing = clone(base) as unknown as { regions: Record<string, { s3: { asOf?: string } }> };
      delete missing.regions['us-east-1']!.s3.asOf;
      expect(issuesOf(missing).join()).toMatch(/s3\.asOf/);
      const bad = clone(base);
      bad.regions['us-east-1']!.s3.asOf = 'last year';
      expect(issuesOf(bad).join()).toMatch(/YYYY-MM/);
    });

    it('rejects unknown fields, an S3 price list without STANDARD, and a catalog without regions', () => {
      const extra = clone(base) as unknown as { regions: Record<string, { ebs: Record<string, unknown> }> };
      extra.regions['us-east-1']!.ebs.io2 = { perGBMonth: 0.125 };
      expect(issuesOf(extra).join()).toMatch(/io2|Unrecognized/);
      const noStandard = clone(base);
      delete noStandard.regions['us-east-1']!.s3.classes.STANDARD;
      expect(issuesOf(noStandard).join()).toMatch(/STANDARD/);
      expect(issuesOf({ ...clone(base), regions: {} }).join()).toMatch(/at least one region/);
    });

    it('rejects a request price with no batch size', () => {
      const c = clone(base) as unknown as {
        regions: Record<string, { s3: { classes: { STANDARD: { get: { per: number } } } } }>;
      };
      c.regions['us-east-1']!.s3.classes.STANDARD.get.per = 0;
      expect(issuesOf(c).join()).toMatch(/STANDARD\.get\.per/);
    });
  });

  describe('lookup', () => {
    it('names the field when the catalog or region is unknown', () => {
      expect(() => priceBook('aws-1999')).toThrow(ValidationError);
      expect(() => priceBook('aws-1999')).toThrow(/catalog.*aws-2026-11/);
      expect(() => priceBook('aws-2026-11', 'mars-north-1')).toThrow(/region.*us-east-1, eu-west-1/);
    });
  });
});

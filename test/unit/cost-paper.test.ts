import { readFileSync } from 'node:fs';
import { priceBook } from '../../core/cost/model/price-catalog.js';
import { costPlacement } from '../../core/cost/model/calculator.js';
import {
  allocationCost,
  breakdown,
  costPerSpeedup,
  estimateSpeedup,
  expectedDistinctKeys,
  requestCost,
  transferCost,
} from '../../core/cost/model/formulas.js';
import {
  cellKey,
  computePaperRow,
  findDiscrepancy,
  PAPER_DISCREPANCIES,
  PAPER_ROWS,
  paperCells,
  type PaperCell,
  type PaperRow,
} from '../../core/cost/model/paper-2010-tables.js';
import { instancePlacement, s3Placement } from '../../core/cost/model/placements.js';

const book = priceBook('paper-2010');
const cells = paperCells();
const row = (table: 'III' | 'IV', size: string, label: string): PaperRow => {
  const r = PAPER_ROWS.find((x) => x.table === table && x.unitSize === size && x.placement.label === label);
  if (!r) throw new Error(`no row ${table} ${size} ${label}`);
  return r;
};
const cell = (
  table: 'III' | 'IV',
  size: string,
  label: string,
  requests: 2000 | 200_000,
  q: PaperCell['quantity'],
): PaperCell => {
  const c = cells.find((x) => x.key === cellKey(table, size, label, requests, q));
  if (!c) throw new Error(`no cell ${table} ${size} ${label} ${requests} ${q}`);
  return c;
};
/** Equal to the paper's printed value up to the rounding of the printed numbers. */
const expectPaper = (c: PaperCell, printed: number): void => {
  expect(c.published).toBe(printed);
  expect(Math.abs(c.formula - printed)).toBeLessThanOrEqual(c.tolerance);
};

describe('cost formulas (paper 001 §III-C)', () => {
  it('C_Alloc = h·k·c_t gives the $63.24 and $505.92 instance-months of a 744-hour month', () => {
    expect(allocationCost(744, 1, 0.085)).toBeCloseTo(63.24, 10);
    expect(allocationCost(744, 1, 0.68)).toBeCloseTo(505.92, 10);
    expect(allocationCost(744, 7, 0.085)).toBeCloseTo(442.68, 10);
  });

  it('C_IO = R·d·c_io gives $0.30, $1.50 and $15.00 for 2,000 requests of 1, 5 and 50 MB', () => {
    expect(transferCost(2000, 0.001, 0.15)).toBeCloseTo(0.3, 10);
    expect(transferCost(2000, 0.005, 0.15)).toBeCloseTo(1.5, 10);
    expect(transferCost(2000, 0.05, 0.15)).toBeCloseTo(15, 10);
  });

  it('prices requests in the batches the price list quotes ($0.01 per 10,000 GETs)', () => {
    expect(requestCost(2000, { usd: 0.01, per: 10_000 })).toBeCloseTo(0.002, 12);
  });

  it('C/S divides by the speedup and refuses a speedup that is not positive', () => {
    expect(costPerSpeedup(63.24, 3.67)).toBeCloseTo(17.23, 2);
    expect(() => costPerSpeedup(1, 0)).toThrow(RangeError);
  });

  it('a breakdown totals its components', () => {
    expect(breakdown({ alloc: 1, store: 2, req: 3, io: 4, access: 5 }).total).toBe(15);
  });

  it('counts the misses of a cold cache under uniform requests: K(1 − (1 − 1/K)^R)', () => {
    expect(expectedDistinctKeys(500, 2000)).toBeCloseTo(490.9, 1);
    expect(expectedDistinctKeys(500, 1)).toBeCloseTo(1, 10);
    expect(expectedDistinctKeys(500, 0)).toBe(0);
    // A free hit leaves only the misses' time: S = R·t / (M·t) = R / M.
    expect(estimateSpeedup({ requests: 2000, keys: 500, serviceTimeSec: 1, hitTimeSec: 0, fillTimeSec: 0 })).toBeCloseTo(
      2000 / expectedDistinctKeys(500, 2000),
      10,
    );
    expect(estimateSpeedup({ requests: 0, keys: 500, serviceTimeSec: 1, hitTimeSec: 0, fillTimeSec: 0 })).toBe(1);
  });
});

describe('paper 001 Tables III and IV from Table I prices', () => {
  it('reproduces the instance-months, transfer costs and S3 totals the digest lists', () => {
    expectPaper(cell('III', '1 KB', 'm1.small-mem', 2000, 'C_Alloc'), 63.24);
    expectPaper(cell('III', '1 KB', 'm1.xlarge-mem', 2000, 'C_Alloc'), 505.92);
    expectPaper(cell('III', '1 MB', 'm1.small-mem', 2000, 'C_IO'), 0.3);
    expectPaper(cell('III', '5 MB', 'm1.small-disk', 2000, 'C_IO'), 1.5);
    expectPaper(cell('III', '50 MB', 'm1.small-disk', 2000, 'C_IO'), 15);
    expectPaper(cell('IV', '1 MB', 'S3', 2000, 'C'), 0.38);
    expectPaper(cell('IV', '5 MB', 'S3', 2000, 'C'), 1.88);
    expectPaper(cell('IV', '50 MB', 'S3', 2000, 'C'), 18.75);
  });

  it('reproduces the C/S values 0.0007, 17.23, 97.40, 63.36, 233.87 and 88.63', () => {
    expectPaper(cell('IV', '1 KB', 'S3', 2000, 'C/S'), 0.0007);
    expectPaper(cell('III', '1 KB', 'm1.small-disk', 2000, 'C/S'), 17.23);
    expectPaper(cell('III', '50 MB', 'm1.small-disk', 200_000, 'C/S'), 97.4);
    expectPaper(cell('III', '50 MB', 'm1.xlarge-disk', 200_000, 'C/S'), 63.36);
    expectPaper(cell('IV', '50 MB', 'S3', 200_000, 'C/S'), 233.87);
    expectPaper(cell('IV', '50 MB', 'm1.xlarge-ebs', 200_000, 'C/S'), 88.63);
  });

  it('233.87 agrees only within the rounding of S = 6.43: the formula, with C_R for 200,000 GETs, gives 233.90', () => {
    const c = cell('IV', '50 MB', 'S3', 200_000, 'C/S');
    expect(c.formula).toBeCloseTo(233.9, 2);
    expect(Math.abs(c.formula - 233.87)).toBeGreaterThan(0.005);
    expect(findDiscrepancy(c.key)).toBeUndefined();
    expect(PAPER_DISCREPANCIES.find((d) => d.id === 'D30')?.explanation).toMatch(/233\.87/);
  });

  it("asserts the formula where the paper's arithmetic is wrong: 5 MB m1.xlarge is $507.42, not $506.78", () => {
    const r = computePaperRow(row('III', '5 MB', 'm1.xlarge-mem'), 2000);
    expect(r.result.cost.total).toBeCloseTo(507.42, 10);
    expect(findDiscrepancy(cellKey('III', '5 MB', 'm1.xlarge-mem', 2000, 'C'))).toMatchObject({
      published: 506.78,
      formula: 507.42,
      kind: 'sum',
    });
    // The S3 1 KB total the paper prints as $0.0023 dropped C_S after rounding it to $0.00.
    expect(computePaperRow(row('IV', '1 KB', 'S3'), 2000).result.cost.total).toBeCloseTo(0.002375, 12);
    expect(findDiscrepancy(cellKey('IV', '1 KB', 'S3', 2000, 'C'))).toMatchObject({ id: 'D12', published: 0.0023 });
  });

  it('sizes 5 MB in m1.small memory at the 7 instances the paper launched', () => {
    const r = computePaperRow(row('III', '5 MB', 'm1.small-mem'), 2000);
    expect(r.result.nodes).toBe(7);
    expect(r.result.cost.alloc).toBeCloseTo(442.68, 10);
  });

  it('checks all 26 rows and 176 printed cells', () => {
    expect(PAPER_ROWS).toHaveLength(26);
    expect(cells).toHaveLength(176);
  });

  describe.each(cells.map((c) => [c.key, c] as const))('cell %s', (_key, c) => {
    const d = findDiscrepancy(c.key);
    if (c.consistent) {
      it(`matches the printed ${c.printed} within ±${c.tolerance.toPrecision(2)}`, () => {
        expect(Math.abs(c.formula - c.published)).toBeLessThanOrEqual(c.tolerance);
        expect(d).toBeUndefined();
      });
    } else {
      it(`differs from the printed ${c.printed}, and the discrepancy list records the formula's value`, () => {
        expect(d).toBeDefined();
        expect(d!.published).toBe(c.published);
        expect(Math.abs(d!.formula - c.formula)).toBeLessThanOrEqual(Math.max(1e-6, 1e-4 * Math.abs(c.formula)));
      });
    }
  });
});

describe('discrepancy list', () => {
  it('is exactly the set of cells the formulas do not give', () => {
    const inconsistent = cells
      .filter((c) => !c.consistent)
      .map((c) => c.key)
      .sort();
    const listed = PAPER_DISCREPANCIES.map((d) => cellKey(d.table, d.unitSize, d.placement, d.requests, d.quantity)).sort();
    expect(listed).toEqual(inconsistent);
  });

  it('is the same list docs/COST.md shows', () => {
    const doc = readFileSync(new URL('../../docs/COST.md', import.meta.url), 'utf8');
    const rows = doc.split('\n').filter((l) => /^\| D\d+ \|/.test(l));
    expect(rows).toHaveLength(PAPER_DISCREPANCIES.length);
    for (const d of PAPER_DISCREPANCIES) {
      expect(rows).toContainEqual(
        expect.stringContaining(
          `| ${d.id} | ${d.table} | ${d.unitSize} | ${d.placement} | ${d.requests.toLocaleString('en-US')} | ${d.quantity} | ${d.published} | ${d.formula} |`,
        ),
      );
    }
  });

  it('numbers its entries D1, D2, … and explains each', () => {
    expect(PAPER_DISCREPANCIES.map((d) => d.id)).toEqual(PAPER_DISCREPANCIES.map((_, i) => `D${i + 1}`));
    for (const d of PAPER_DISCREPANCIES) expect(d.explanation.length).toBeGreaterThan(5);
  });
});

describe('the same formulas through the calculator', () => {
  it('prices S3 as C_S + C_R + C_IO and EBS as C_Alloc + C_S + C_R + C_IO', () => {
    const usage = { valueBytes: 1e6, keys: 500, readsPerMonth: 2000, writesPerMonth: 0 };
    const s3 = costPlacement(s3Placement(), usage, book).cost;
    expect(s3).toMatchObject({ alloc: 0, access: 0 });
    expect(s3.store).toBeCloseTo(0.075, 12);
    expect(s3.req).toBeCloseTo(0.002, 12);
    expect(s3.io).toBeCloseTo(0.3, 12);
    const ebs = costPlacement(instancePlacement('m1.small', 'ebs'), usage, book).cost;
    expect(ebs.alloc).toBeCloseTo(63.24, 10);
    expect(ebs.store).toBeCloseTo(0.05, 12);
    expect(ebs.req).toBeCloseTo(0.0002, 12);
    expect(ebs.total).toBeCloseTo(63.5902, 10);
  });

  it('charges writes as S3 PUTs when there are any (the paper counts none)', () => {
    const r = costPlacement(s3Placement(), { valueBytes: 1e6, keys: 500, readsPerMonth: 2000, writesPerMonth: 500 }, book);
    expect(r.cost.req).toBeCloseTo(0.002 + 0.005, 12);
  });
});

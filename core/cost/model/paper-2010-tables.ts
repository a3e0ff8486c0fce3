import { priceBook, type PriceBook } from './price-catalog.js';
import { costPlacement, type PlacementCost } from './calculator.js';
import { costPerSpeedup } from './formulas.js';
import { PAPER_DISCREPANCIES, type PaperDiscrepancy } from './paper-2010-discrepancies.js';
import { instancePlacement, s3Placement, type Placement } from './placements.js';

export { PAPER_DISCREPANCIES, type PaperDiscrepancy, type DiscrepancyKind } from './paper-2010-discrepancies.js';

/**
 * Paper 001's cost tables (III: volatile, IV: persistent) as data: the inputs (value size, placement,
 * measured speedups) and every number the paper prints, so the calculator can be checked cell by cell.
 * The speedups S are measurements, not model outputs; they are inputs here.
 */

export const PAPER_KEYS = 500;
/** The paper's two request rates: the experiment (2,000 a month) and its extrapolation. */
export const PAPER_REQUESTS = [2000, 200_000] as const;
export type PaperRequests = (typeof PAPER_REQUESTS)[number];

export type PaperQuantity = 'C' | 'C_Alloc' | 'C_S' | 'C_R' | 'C_IO' | 'C-C_Alloc' | 'C/S';

export interface PaperRow {
  readonly table: 'III' | 'IV';
  readonly unitSize: string;
  readonly valueBytes: number;
  readonly placement: Placement;
  /** Measured speedups after 2,000 and (extrapolated) 200,000 requests, as printed. */
  readonly speedup: readonly [string, string];
  /** Printed values at 2,000 requests: the total, its components, and C/S. */
  readonly at2000: Partial<Record<'C' | 'C_Alloc' | 'C_S' | 'C_R' | 'C_IO' | 'C/S', string>>;
  /**
   * Printed values at 200,000 requests. The paper heads the cost column "C_IO" in both tables; it is
   * compared as C − C_Alloc, which is C_IO for the volatile rows and C_S + C_R + C_IO for the persistent
   * ones (see PAPER_DISCREPANCIES for the rows where neither reading matches).
   */
  readonly at200k: { readonly 'C-C_Alloc': string; readonly 'C/S': string };
}

const KB = 1e3;
const MB = 1e6;
const sizes = { '1 KB': KB, '1 MB': MB, '5 MB': 5 * MB, '50 MB': 50 * MB } as const;
type Size = keyof typeof sizes;

const small = (store: 'mem' | 'disk' | 'ebs', nodes?: number) => instancePlacement('m1.small', store, nodes);
const xlarge = (store: 'mem' | 'disk' | 'ebs') => instancePlacement('m1.xlarge', store);

function row3(
  size: Size,
  placement: Placement,
  s: [string, string],
  c: string,
  alloc: string,
  io: string,
  cs: string,
  io200k: string,
  cs200k: string,
): PaperRow {
  return {
    table: 'III',
    unitSize: size,
    valueBytes: sizes[size],
    placement,
    speedup: s,
    at2000: { C: c, C_Alloc: alloc, C_IO: io, 'C/S': cs },
    at200k: { 'C-C_Alloc': io200k, 'C/S': cs200k },
  };
}

function rowS3(
  size: Size,
  s: [string, string],
  c: string,
  store: string,
  req: string,
  io: string,
  cs: string,
  col200k: string,
  cs200k: string,
): PaperRow {
  return {
    table: 'IV',
    unitSize: size,
    valueBytes: sizes[size],
    placement: s3Placement(),
    speedup: s,
    at2000: { C: c, C_S: store, C_R: req, C_IO: io, 'C/S': cs },
    at200k: { 'C-C_Alloc': col200k, 'C/S': cs200k },
  };
}

function rowEbs(
  size: Size,
  placement: Placement,
  s: [string, string],
  c: string,
  alloc: string,
  store: string,
  req: string,
  io: string,
  cs: string,
  col200k: string,
  cs200k: string,
): PaperRow {
  return {
    table: 'IV',
    unitSize: size,
    valueBytes: sizes[size],
    placement,
    speedup: s,
    at2000: { C: c, C_Alloc: alloc, C_S: store, C_R: req, C_IO: io, 'C/S': cs },
    at200k: { 'C-C_Alloc': col200k, 'C/S': cs200k },
  };
}

/** Every row of Tables III and IV, transcribed from the paper. */
export const PAPER_ROWS: readonly PaperRow[] = [
  // Table III: volatile, C = C_Alloc + C_IO
  row3('1 KB', small('mem'), ['3.54', '2629.52'], '63.24', '63.24', '0.00', '17.84', '0.03', '0.03'),
  row3('1 KB', small('disk'), ['3.67', '2147.681'], '63.24', '63.24', '0.00', '17.23', '0.03', '0.03'),
  row3('1 KB', xlarge('mem'), ['3.64', '2302.43'], '505.92', '505.92', '0.00', '138.99', '0.03', '0.22'),
  row3('1 KB', xlarge('disk'), ['3.63', '1823.215'], '505.92', '505.92', '0.00', '139.57', '0.03', '0.28'),
  row3('1 MB', small('mem'), ['3.5', '267.19'], '63.54', '63.24', '0.30', '18.17', '30.00', '0.35'),
  row3('1 MB', small('disk'), ['3.26', '28'], '63.54', '63.24', '0.30', '19.49', '30.00', '4.06'),
  row3('1 MB', xlarge('mem'), ['3.6', '347.3'], '506.22', '505.92', '0.30', '140.62', '30.00', '1.53'),
  row3('1 MB', xlarge('disk'), ['3.59', '180.53'], '506.22', '505.92', '0.30', '141.13', '30.00', '2.94'),
  // 5 MB in memory took seven m1.small instances (1 + 6 launched as the cache grew, §III-B).
  row3('5 MB', small('mem', 7), ['3.3', '109.47'], '444.18', '442.68', '1.50', '96.27', '150.00', '4.26'),
  row3('5 MB', small('disk'), ['3.2', '33.84'], '64.74', '63.24', '1.50', '20.24', '150.00', '6.30'),
  row3('5 MB', xlarge('mem'), ['3.6', '174.42'], '506.78', '505.92', '1.50', '140.78', '150.00', '3.76'),
  row3('5 MB', xlarge('disk'), ['3.38', '111.71'], '506.78', '505.92', '1.50', '149.94', '150.00', '5.87'),
  row3('50 MB', small('disk'), ['2.9', '16.05'], '78.74', '63.24', '15.00', '27.16', '1500.00', '97.40'),
  row3('50 MB', xlarge('disk'), ['3.31', '31.66'], '520.92', '505.92', '15.00', '152.85', '1500.00', '63.36'),
  // Table IV: persistent, C_S3 = C_S + C_R + C_IO, C_EBS = C_Alloc + C_S + C_R + C_IO
  rowS3('1 KB', ['3.4', '24.79'], '0.0023', '0.00', '0.002', '0.0003', '0.0007', '0.23', '0.01'),
  rowEbs('1 KB', small('ebs'), ['3.62', '1984.5'], '63.49', '63.24', '0.0002', '0.00', '0.0003', '17.54', '0.48', '0.04'),
  rowEbs('1 KB', xlarge('ebs'), ['3.58', '2091.7'], '506.17', '505.92', '0.0002', '0.00', '0.0003', '141.39', '0.48', '0.25'),
  rowS3('1 MB', ['3.39', '29.98'], '0.38', '0.075', '0.002', '0.30', '0.12', '30.01', '1.01'),
  rowEbs('1 MB', small('ebs'), ['2.95', '13.62'], '63.59', '63.24', '0.05', '0.00', '0.30', '21.56', '30.25', '6.87'),
  rowEbs('1 MB', xlarge('ebs'), ['3.57', '133.96'], '506.27', '505.92', '0.05', '0.00', '0.30', '142.00', '30.25', '4.01'),
  rowS3('5 MB', ['3.27', '19.97'], '1.88', '0.375', '0.002', '1.50', '0.58', '150.00', '7.53'),
  rowEbs('5 MB', small('ebs'), ['2.83', '11.84'], '64.99', '63.24', '0.25', '0.00', '1.50', '22.97', '150.27', '18.04'),
  rowEbs('5 MB', xlarge('ebs'), ['3.3', '74.66'], '507.67', '505.92', '0.25', '0.00', '1.50', '153.92', '150.27', '8.79'),
  rowS3('50 MB', ['2.59', '6.43'], '18.75', '3.75', '0.002', '15.00', '7.24', '1500.00', '233.87'),
  rowEbs('50 MB', small('ebs'), ['2.74', '11.09'], '80.74', '63.24', '2.50', '0.00', '15.00', '29.47', '1502.52', '142.70'),
  rowEbs('50 MB', xlarge('ebs'), ['3.16', '22.66'], '520.42', '505.92', '2.50', '0.00', '15.00', '164.69', '1502.52', '88.63'),
];

/** The formulas' answer for one row at one request rate. */
export interface PaperRowResult {
  readonly row: PaperRow;
  readonly requests: PaperRequests;
  readonly speedup: number;
  readonly result: PlacementCost;
  readonly costPerSpeedup: number;
}

/**
 * Computes a row with the paper-2010 prices: R reads, no writes (the paper's C_R counts only GETs), every
 * result transferred out of AWS, volumes sized at T, one I/O per request on EBS.
 */
export function computePaperRow(
  row: PaperRow,
  requests: PaperRequests,
  book: PriceBook = priceBook('paper-2010'),
): PaperRowResult {
  const result = costPlacement(
    row.placement,
    { valueBytes: row.valueBytes, keys: PAPER_KEYS, readsPerMonth: requests, writesPerMonth: 0 },
    book,
    {
      transferOut: 'internet',
      accessPath: false,
      ebsHeadroom: 0,
      ebsIoPerRequest: 1,
    },
  );
  const speedup = Number(row.speedup[requests === 2000 ? 0 : 1]);
  return { row, requests, speedup, result, costPerSpeedup: costPerSpeedup(result.cost.total, speedup) };
}

/** One printed number of the paper next to the formulas' value for it. */
export interface PaperCell {
  /** e.g. `IV/5 MB/S3/2000/C/S`. */
  readonly key: string;
  readonly table: 'III' | 'IV';
  readonly unitSize: string;
  readonly placement: string;
  readonly requests: PaperRequests;
  readonly quantity: PaperQuantity;
  readonly printed: string;
  readonly published: number;
  readonly formula: number;
  /**
   * How far apart the two may be and still agree: half a unit in the last printed digit, plus, for C/S,
   * what the rounding of the printed S can move it (C/S · δ/(S − δ), δ = half a unit of S's last digit).
   */
  readonly tolerance: number;
  readonly consistent: boolean;
}

const halfUnit = (printed: string): number => 0.5 * 10 ** -(printed.split('.')[1]?.length ?? 0);

export function cellKey(table: string, unitSize: string, placement: string, requests: number, quantity: PaperQuantity): string {
  return `${table}/${unitSize}/${placement}/${requests}/${quantity}`;
}

function quantityOf(r: PaperRowResult, q: PaperQuantity): number {
  const c = r.result.cost;
  switch (q) {
    case 'C':
      return c.total;
    case 'C_Alloc':
      return c.alloc;
    case 'C_S':
      return c.store;
    case 'C_R':
      return c.req;
    case 'C_IO':
      return c.io;
    case 'C-C_Alloc':
      return c.total - c.alloc;
    case 'C/S':
      return r.costPerSpeedup;
  }
}

/** Every printed cost and C/S of Tables III and IV against the formulas. */
export function paperCells(book: PriceBook = priceBook('paper-2010')): PaperCell[] {
  const cells: PaperCell[] = [];
  for (const row of PAPER_ROWS) {
    for (const requests of PAPER_REQUESTS) {
      const r = computePaperRow(row, requests, book);
      const printedS = row.speedup[requests === 2000 ? 0 : 1];
      const sHalf = halfUnit(printedS);
      const printedCells = Object.entries(requests === 2000 ? row.at2000 : row.at200k) as [PaperQuantity, string][];
      for (const [quantity, printed] of printedCells) {
        const formula = quantityOf(r, quantity);
        const published = Number(printed);
        const tolerance = halfUnit(printed) + (quantity === 'C/S' ? (Math.abs(formula) * sHalf) / (r.speedup - sHalf) : 0) + 1e-9;
        cells.push({
          key: cellKey(row.table, row.unitSize, row.placement.label, requests, quantity),
          table: row.table,
          unitSize: row.unitSize,
          placement: row.placement.label,
          requests,
          quantity,
          printed,
          published,
          formula,
          tolerance,
          consistent: Math.abs(formula - published) <= tolerance,
        });
      }
    }
  }
  return cells;
}

const DISCREPANCY_BY_KEY: ReadonlyMap<string, PaperDiscrepancy> = new Map(
  PAPER_DISCREPANCIES.map((x) => [cellKey(x.table, x.unitSize, x.placement, x.requests, x.quantity), x]),
);

/** The recorded discrepancy for a cell key (see PaperCell.key), if the paper's value is known to be off. */
export function findDiscrepancy(key: string): PaperDiscrepancy | undefined {
  return DISCREPANCY_BY_KEY.get(key);
}

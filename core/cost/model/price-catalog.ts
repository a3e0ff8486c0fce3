import { ValidationError } from '../../errors.js';
import { priceCatalogSchema, type PriceCatalog, type RegionPrices } from './catalogs/schema.js';
import { aws202611Catalog } from './catalogs/aws-2026-11.js';
import { paper2010Catalog } from './catalogs/paper-2010.js';
import { issueLines } from '../../util/zod-issues.js';

/** A catalog whose data does not match the schema: a defect in the data file, found at module load. */
export class PriceCatalogError extends Error {
  readonly issues: string[];
  constructor(catalogId: string, issues: string[], options?: ErrorOptions) {
    super(`price catalog '${catalogId}' is invalid: ${issues.join('; ')}`, options);
    this.name = 'PriceCatalogError';
    this.issues = issues;
  }
}

/** Validates catalog data (zod); throws PriceCatalogError naming every offending path. */
export function parseCatalog(input: unknown): PriceCatalog {
  const r = priceCatalogSchema.safeParse(input);
  if (r.success) return r.data;
  const id = typeof input === 'object' && input !== null && 'id' in input ? String((input as { id: unknown }).id) : '?';
  throw new PriceCatalogError(id, issueLines(r.error.issues));
}

const CATALOGS: ReadonlyMap<string, PriceCatalog> = new Map(
  [aws202611Catalog, paper2010Catalog].map((c) => [c.id, parseCatalog(c)]),
);

/** The catalog used when none is named: the newest AWS prices. */
export const DEFAULT_CATALOG_ID = aws202611Catalog.id;
export const DEFAULT_REGION = 'us-east-1';

export function listCatalogs(): PriceCatalog[] {
  return [...CATALOGS.values()];
}

/** A catalog as `strata cost --catalogs` and `GET /v1/cost/catalogs` list it. */
export interface CatalogSummary {
  readonly id: string;
  readonly version: string;
  readonly hoursPerMonth: number;
  readonly regions: readonly string[];
  /** The distinct `asOf` months of its EC2 and S3 prices. */
  readonly asOf: readonly string[];
  readonly description: string;
}

/**
 * Every catalog with its regions and price dates.
 * @example catalogSummaries().map((c) => c.id) // ['aws-2026-11', 'paper-2010']
 */
export function catalogSummaries(): CatalogSummary[] {
  return listCatalogs().map((c) => ({
    id: c.id,
    version: c.version,
    hoursPerMonth: c.hoursPerMonth,
    regions: Object.keys(c.regions),
    asOf: [...new Set(Object.values(c.regions).flatMap((r) => [r.ec2.asOf, r.s3.asOf]))],
    description: c.description,
  }));
}

export function getCatalog(id: string = DEFAULT_CATALOG_ID): PriceCatalog {
  const c = CATALOGS.get(id);
  if (!c) throw new ValidationError('catalog', `unknown price catalog '${id}' (known: ${[...CATALOGS.keys()].join(', ')})`);
  return c;
}

/** One catalog's prices for one region, with the catalog-wide billing conventions the formulas need. */
export interface PriceBook {
  readonly catalogId: string;
  readonly catalogVersion: string;
  readonly region: string;
  readonly hoursPerMonth: number;
  readonly bytesPerGB: number;
  readonly placements: PriceCatalog['placements'];
  readonly prices: RegionPrices;
}

/**
 * Prices for a region of a catalog.
 * @example priceBook('paper-2010').prices.ec2.instances['m1.small']?.hourly // 0.085
 */
export function priceBook(catalogId: string = DEFAULT_CATALOG_ID, region: string = DEFAULT_REGION): PriceBook {
  const c = getCatalog(catalogId);
  const prices = c.regions[region];
  if (!prices)
    throw new ValidationError(
      'region',
      `catalog '${c.id}' has no prices for region '${region}' (it has: ${Object.keys(c.regions).join(', ')})`,
    );
  return {
    catalogId: c.id,
    catalogVersion: c.version,
    region,
    hoursPerMonth: c.hoursPerMonth,
    bytesPerGB: c.bytesPerGB,
    placements: c.placements,
    prices,
  };
}

/**
 * A placement question as text, the way both front ends of the recommender receive it: `strata cost`'s flags
 * (core/composition/cost-cli.ts, `--value-size 1MB`) and the API's query parameters
 * (core/api/cost-operations.ts, `?valueSize=1MB`). One parser and one validation serve both, so the
 * command line and `GET /v1/cost/placements` accept the same values and rank the same way.
 */
import { StrataError } from '../../errors.js';
import { DEFAULT_CATALOG_ID, DEFAULT_REGION } from './price-catalog.js';
import {
  recommend,
  workloadSchema,
  type RankBy,
  type Recommendation,
  type RecommendationReport,
  type Workload,
  type WorkloadInput,
} from './recommender.js';
import { parseCount, parseDurationMs, parseSize } from './units.js';

/** The query's parameters, as the API names them; each CLI flag is one of them in kebab case (`--value-size`). */
export const PLACEMENT_PARAMS = [
  'valueSize',
  'keys',
  'requestsPerMonth',
  'writesPerMonth',
  'persistent',
  'latencyTarget',
  'serviceTime',
  'inRegion',
  'region',
  'catalog',
  'rankBy',
  'top',
] as const;
export type PlacementParam = (typeof PLACEMENT_PARAMS)[number];

/** A parameter's `strata cost` flag: `valueSize` → `--value-size`. */
export function placementFlag(param: PlacementParam): string {
  return `--${param.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/** The query from parsed `strata cost` flags (`{ 'value-size': '1MB', persistent: true }`); other flags are ignored. */
export function placementQueryFromFlags(flags: Readonly<Record<string, string | boolean | undefined>>): PlacementQuery {
  return Object.fromEntries(PLACEMENT_PARAMS.map((p) => [p, flags[placementFlag(p).slice(2)]])) as PlacementQuery;
}

/** The parameters a workload cannot do without. */
export const REQUIRED_PLACEMENT_PARAMS = ['valueSize', 'keys', 'requestsPerMonth'] as const satisfies readonly PlacementParam[];

/**
 * A placement question as given: text, `undefined` where not given. The two switches are also taken as booleans
 * (CLI flags); as text they are `true`/`false` or `1`/`0`.
 */
export interface PlacementQuery {
  /** d: `1KB`, `1MB`, `50MB` (decimal), `1MiB` (binary) or a byte count. */
  readonly valueSize?: string | undefined;
  /** Distinct keys held: `500`, `200k`, `1.5M`. */
  readonly keys?: string | undefined;
  /** R: reads a month. */
  readonly requestsPerMonth?: string | undefined;
  /** Writes a month (default: the expected misses of a cold cache). */
  readonly writesPerMonth?: string | undefined;
  /** Only placements whose data survives a node loss. */
  readonly persistent?: boolean | string | undefined;
  /** Hit latency target (`5ms`); slower placements rank last. */
  readonly latencyTarget?: string | undefined;
  /** Origin time per miss, the speedup baseline (`1s`, the default). */
  readonly serviceTime?: string | undefined;
  /** Results stay in the region (no transfer-out charge C_IO). */
  readonly inRegion?: boolean | string | undefined;
  readonly region?: string | undefined;
  readonly catalog?: string | undefined;
  /** `cs` (cost per unit speedup, the default) or `cost`. */
  readonly rankBy?: string | undefined;
  /** Show the best n only. */
  readonly top?: string | undefined;
}

/**
 * A parameter of a placement query that is missing or does not parse: 400 `VALIDATION_FAILED` with
 * `details.field` = the query parameter. The message names it as the front end does (`valueSize`, `--value-size`).
 */
export class PlacementQueryError extends StrataError {
  readonly field: PlacementParam;
  constructor(field: PlacementParam, message: string) {
    super('VALIDATION_FAILED', message, { field });
    this.field = field;
  }
}

export interface PlacementQueryOptions {
  /** How messages name a parameter. @default the query parameter itself (`valueSize`) */
  readonly label?: (param: PlacementParam) => string;
  /** The catalog when the query names none. @default DEFAULT_CATALOG_ID */
  readonly defaultCatalog?: string;
}

/** The recommender's answer to a placement query. */
export interface PlacementAnswer {
  readonly report: RecommendationReport;
  /** The query's `top`, if it gave one. */
  readonly top: number | undefined;
  /** The recommendations to show: the best `top`, or all of them. */
  readonly shown: readonly Recommendation[];
}

/** Which query parameter each field of the recommender's workload schema comes from. */
const PARAM_OF: Readonly<Record<keyof Workload, PlacementParam>> = {
  valueBytes: 'valueSize',
  keys: 'keys',
  requestsPerMonth: 'requestsPerMonth',
  writesPerMonth: 'writesPerMonth',
  persistent: 'persistent',
  latencyTargetMs: 'latencyTarget',
  serviceTimeMs: 'serviceTime',
  transferOut: 'inRegion',
};

/**
 * Parses a placement query (units with parseSize/parseCount/parseDurationMs, the workload with the recommender's
 * zod schema) and ranks the placements.
 *
 * @throws {PlacementQueryError} naming the first parameter that is missing or invalid.
 * @throws {ValidationError} for an unknown `catalog` or a `region` the catalog does not price (field `catalog` / `region`).
 * @example
 * recommendPlacements({ valueSize: '1MB', keys: '500', requestsPerMonth: '2000' }).shown[0]?.placement.id // 's3:STANDARD'
 * recommendPlacements({ valueSize: 'huge', keys: '1', requestsPerMonth: '1' }, { label: placementFlag }) // throws '--value-size: not a size: "huge" ...'
 */
export function recommendPlacements(query: PlacementQuery, options: PlacementQueryOptions = {}): PlacementAnswer {
  const label = options.label ?? ((p: PlacementParam) => p);
  for (const p of REQUIRED_PLACEMENT_PARAMS) {
    if (query[p] === undefined)
      throw new PlacementQueryError(
        p,
        `${label(p)} is required with a workload (${REQUIRED_PLACEMENT_PARAMS.map(label).join(', ')})`,
      );
  }
  const parsed = <T>(p: PlacementParam, parse: (text: string) => T): T | undefined => {
    const text = query[p];
    if (text === undefined) return undefined;
    try {
      return parse(String(text));
    } catch (e) {
      throw new PlacementQueryError(p, `${label(p)}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  const on = (p: 'persistent' | 'inRegion'): boolean => {
    const v = query[p];
    if (v === undefined || typeof v === 'boolean') return v ?? false;
    if (v === 'true' || v === '1') return true;
    if (v === 'false' || v === '0') return false;
    throw new PlacementQueryError(p, `${label(p)} must be true or false, got "${v.slice(0, 40)}"`);
  };
  const rankBy = query.rankBy;
  if (rankBy !== undefined && rankBy !== 'cs' && rankBy !== 'cost')
    throw new PlacementQueryError('rankBy', `${label('rankBy')} must be cs or cost, got "${rankBy.slice(0, 40)}"`);
  const top = parsed('top', parseCount);
  if (top !== undefined && (!Number.isInteger(top) || top < 1))
    throw new PlacementQueryError('top', `${label('top')} must be a whole number of at least 1, got "${query.top}"`);

  const writesPerMonth = parsed('writesPerMonth', parseCount);
  const latencyTargetMs = parsed('latencyTarget', parseDurationMs);
  const serviceTimeMs = parsed('serviceTime', parseDurationMs);
  const input: WorkloadInput = {
    valueBytes: parsed('valueSize', parseSize)!,
    keys: parsed('keys', parseCount)!,
    requestsPerMonth: parsed('requestsPerMonth', parseCount)!,
    ...(writesPerMonth !== undefined ? { writesPerMonth } : {}),
    persistent: on('persistent'),
    ...(latencyTargetMs !== undefined ? { latencyTargetMs } : {}),
    ...(serviceTimeMs !== undefined ? { serviceTimeMs } : {}),
    transferOut: on('inRegion') ? 'in-region' : 'internet',
  };
  const checked = workloadSchema.safeParse(input);
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    const p = PARAM_OF[issue.path[0] as keyof Workload] ?? 'valueSize';
    throw new PlacementQueryError(p, `${label(p)}: ${issue.message} (got "${String(query[p]).slice(0, 40)}")`);
  }
  const report = recommend(checked.data, {
    catalogId: query.catalog ?? options.defaultCatalog ?? DEFAULT_CATALOG_ID,
    region: query.region ?? DEFAULT_REGION,
    rankBy: (rankBy === 'cost' ? 'cost' : 'cost-per-speedup') satisfies RankBy,
  });
  return { report, top, shown: top === undefined ? report.recommendations : report.recommendations.slice(0, top) };
}

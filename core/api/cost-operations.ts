/**
 * The cost model over HTTP (`/v1/cost/...`): placements ranked for a workload, paper 001's Tables III and IV
 * recomputed, and the price catalogs. The `strata cost` command of the SDK's CLI renders these answers; the text
 * fields are what `npm run cost` prints offline for the same question (core/composition/cost-cli.ts).
 */
import { ValidationError } from '../errors.js';
import { catalogSummaries, DEFAULT_CATALOG_ID, DEFAULT_REGION } from '../cost/model/price-catalog.js';
import { renderCatalogs, renderDiscrepancies, renderPaperTables, renderRecommendations } from '../cost/model/format.js';
import { PAPER_DISCREPANCIES, paperCells } from '../cost/model/paper-2010-tables.js';
import { PLACEMENT_PARAMS, recommendPlacements, type PlacementQuery } from '../cost/model/placement-query.js';
import type { ApiEvent, ApiResult } from './http.js';
import { json } from './http.js';

const PARAMS: ReadonlySet<string> = new Set(PLACEMENT_PARAMS);

/** The query string as a placement query: empty values count as absent, unknown parameters are a 400. */
function placementQuery(event: ApiEvent): PlacementQuery {
  const query: Record<string, string> = {};
  for (const [name, value] of Object.entries(event.queryStringParameters ?? {})) {
    if (!PARAMS.has(name))
      throw new ValidationError(name.slice(0, 64), `unknown query parameter; the parameters are ${PLACEMENT_PARAMS.join(', ')}`, {
        valid: [...PLACEMENT_PARAMS],
      });
    if (value !== undefined && value !== '') query[name] = value;
  }
  return query;
}

/**
 * `GET /v1/cost/placements?valueSize=&keys=&requestsPerMonth=&...`: the candidate placements ranked for the
 * workload (by C/S, or by monthly cost with `rankBy=cost`), the best `top` of them, and `text`, the table
 * `npm run cost` prints. 400 `VALIDATION_FAILED` naming the parameter that is missing or invalid.
 */
export async function placements(event: ApiEvent): Promise<ApiResult> {
  const { report, top, shown } = recommendPlacements(placementQuery(event));
  return json(200, {
    workload: report.workload,
    writesPerMonth: report.writesPerMonth,
    catalog: { id: report.catalogId, version: report.catalogVersion },
    region: report.region,
    rankBy: report.rankBy,
    recommendations: shown,
    ranked: report.recommendations.length,
    excluded: report.excluded,
    text: renderRecommendations(report, top),
  });
}

let paper: object | undefined;

/**
 * `GET /v1/cost/paper-2010`: Tables III and IV recomputed from the paper's prices (`tables`, as text), every
 * printed cell against the formulas (`cells`), and the cells the paper's own formulas do not give
 * (`discrepancies`, and as text `discrepanciesText`). The same for every request, so computed once.
 */
export async function paper2010(): Promise<ApiResult> {
  paper ??= {
    tables: renderPaperTables(),
    discrepancies: PAPER_DISCREPANCIES,
    discrepanciesText: renderDiscrepancies(),
    cells: paperCells(),
  };
  return json(200, paper);
}

/** `GET /v1/cost/catalogs`: the price catalogs with their regions and price dates, the defaults, and as text. */
export async function catalogs(): Promise<ApiResult> {
  const rows = catalogSummaries();
  return json(200, {
    catalogs: rows,
    defaultCatalog: DEFAULT_CATALOG_ID,
    defaultRegion: DEFAULT_REGION,
    text: renderCatalogs(rows),
  });
}

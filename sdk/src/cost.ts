/**
 * The cost model served by the API (`/v1/cost/...`): cache placements ranked for a workload, the Tables III and IV
 * of D. Chiu and G. Agrawal, "Evaluating Caching and Storage Options on the Amazon Web Services Cloud" (2010)
 * recomputed, and the price catalogs behind them. Reached as {@link StrataClient.cost}.
 */
import { invalid, isObject, optionError, readBody, type SubClientTransport } from './json.js';
import { requestIdOf, type HttpRequest } from './transport.js';

/**
 * A caching workload, and how to price and rank its placements. Sizes, counts and durations are numbers (bytes,
 * counts, milliseconds) or text the server parses: `'1MB'` (decimal) or `'1MiB'`, `'200k'` or `'1.5M'`, `'5ms'` or `'2s'`.
 */
export interface CostWorkload {
  /** d: the typical value size; a number is bytes. */
  valueSize: number | string;
  /** Distinct keys held. */
  keys: number | string;
  /** R: reads a month. */
  requestsPerMonth: number | string;
  /** Writes a month. Default: the expected misses of a cold cache. */
  writesPerMonth?: number | string | undefined;
  /** Only placements whose data survives the loss of a node (S3, EBS, S3-backed). Default `false`. */
  persistent?: boolean | undefined;
  /** Hit latency target; a number is milliseconds. Slower placements rank after every one that meets it. */
  latencyTarget?: number | string | undefined;
  /** The origin's time per miss, the baseline of the speedup S; a number is milliseconds. Default 1 s. */
  serviceTime?: number | string | undefined;
  /** Results stay in the region: no transfer-out charge (C_IO). Default `false`. */
  inRegion?: boolean | undefined;
  /** Default: the server's (`us-east-1`). */
  region?: string | undefined;
  /** Price catalog id (see {@link CostClient.catalogs}). Default: the server's newest. */
  catalog?: string | undefined;
  /** `cs`: cost per unit of speedup C/S (the default); `cost`: monthly cost. */
  rankBy?: 'cs' | 'cost' | undefined;
  /** Return the best `top` placements only (a whole number, at least 1). */
  top?: number | string | undefined;
}

/** Monthly USD of one placement, in the paper's terms. */
export interface CostBreakdown {
  /** C_Alloc: instances or cache nodes for the month. */
  alloc: number;
  /** C_S: data held for the month. */
  store: number;
  /** C_R: request charges. */
  req: number;
  /** C_IO: results transferred out of AWS. */
  io: number;
  /** Strata's front door per request (API Gateway + Lambda); not in the paper's model. */
  access: number;
  total: number;
}

/** Where a cache keeps its data, e.g. `s3:STANDARD`, `ec2-ebs:r7g.large`, `elasticache-serverless+s3:STANDARD`. */
export interface CostPlacement {
  id: string;
  /** Short name for tables (`S3`, `m1.small-mem`). */
  label: string;
  kind: 'ec2-mem' | 'ec2-disk' | 'ec2-ebs' | 's3' | 'elasticache-serverless' | 'elasticache-node' | 'tiered';
  tier: 'hot' | 'warm' | 'cold' | 'hot+cold';
  /** Survives the loss of a node. */
  persistent: boolean;
  instanceType?: string;
  nodeType?: string;
  storageClass?: string;
  /** A fixed node count. */
  nodes?: number;
  /** For `tiered`: the memory tier, then the durable tier. */
  parts?: [CostPlacement, CostPlacement];
}

/** One ranked placement. */
export interface CostRecommendation {
  /** 1 = best. */
  rank: number;
  placement: CostPlacement;
  /** Instances or nodes priced (0 for S3 and serverless). */
  nodes: number;
  cost: CostBreakdown;
  /** Estimated speedup S over the month's requests, starting cold. */
  speedup: number;
  /** C/S: monthly cost per unit of speedup. */
  costPerSpeedup: number;
  /** Estimated time of a hit. */
  hitLatencyMs: number;
  /** Whether the hit time meets the latency target (always `true` without one). */
  meetsLatency: boolean;
  notes: string[];
}

/** The answer of {@link CostClient.placements}. */
export interface CostPlacementsResult {
  /** The workload as the server read it, defaults applied. */
  workload: {
    valueBytes: number;
    keys: number;
    requestsPerMonth: number;
    writesPerMonth?: number;
    persistent: boolean;
    latencyTargetMs?: number;
    serviceTimeMs: number;
    transferOut: 'internet' | 'in-region';
  };
  /** Writes a month priced (given, or the expected misses). */
  writesPerMonth: number;
  catalog: { id: string; version: string };
  region: string;
  rankBy: 'cost-per-speedup' | 'cost';
  /** Best first: the best `top`, or every ranked placement. */
  recommendations: CostRecommendation[];
  /** How many placements were ranked (more than `recommendations.length` when `top` cut the list). */
  ranked: number;
  /** Placements left out, and why (volatile when persistence is needed, values that do not fit). */
  excluded: { placement: CostPlacement; reason: string }[];
  /** The ranking as a table: what `strata cost` prints. */
  text: string;
}

/** A printed cell of Chiu & Agrawal (2010) that its own formulas do not give. */
export interface PaperDiscrepancy {
  /** `D1` ... */
  id: string;
  table: 'III' | 'IV';
  unitSize: string;
  placement: string;
  requests: number;
  /** `C`, `C_S`, `C/S`, `C-C_Alloc`, ... */
  quantity: string;
  /** As the paper printed it. */
  published: number;
  /** What the formulas give. */
  formula: number;
  kind: string;
  explanation: string;
}

/** One printed number of the paper next to the formulas' value for it. */
export interface PaperCell {
  /** e.g. `IV/5 MB/S3/2000/C/S`. */
  key: string;
  table: 'III' | 'IV';
  unitSize: string;
  placement: string;
  requests: number;
  quantity: string;
  printed: string;
  published: number;
  formula: number;
  /** How far apart the two may be and still agree. */
  tolerance: number;
  consistent: boolean;
}

/** The answer of {@link CostClient.paper2010}. */
export interface Paper2010Result {
  /** Tables III and IV recomputed from the paper's prices, as text (differing cells marked). */
  tables: string;
  discrepancies: PaperDiscrepancy[];
  /** The discrepancies as a table. */
  discrepanciesText: string;
  /** Every printed cost and C/S against the formulas. */
  cells: PaperCell[];
}

/** A price catalog. */
export interface CostCatalog {
  id: string;
  version: string;
  hoursPerMonth: number;
  regions: string[];
  /** The months its prices were read (`2026-11`). */
  asOf: string[];
  description: string;
}

/** The answer of {@link CostClient.catalogs}. */
export interface CostCatalogsResult {
  catalogs: CostCatalog[];
  /** What the server prices with when a workload names no catalog or region. */
  defaultCatalog: string;
  defaultRegion: string;
  /** The catalogs as text: what `strata cost --catalogs` prints. */
  text: string;
}

/** Per-call options of the cost methods. */
export interface CostRequestOptions {
  /** Cancels the call; it then rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /** Per-attempt timeout; overrides the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
}

const PARAMS = [
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
] as const satisfies readonly (keyof CostWorkload)[];

/**
 * The workload as query parameters. Only what a request cannot carry is caught here; the server checks the values
 * (and that valueSize, keys and requestsPerMonth are there), with the same parser as `npm run cost`.
 */
function workloadQuery(workload: CostWorkload): URLSearchParams {
  if (!isObject(workload)) throw optionError('workload', 'must be an object ({ valueSize, keys, requestsPerMonth, ... })');
  const q = new URLSearchParams();
  for (const p of PARAMS) {
    const v = workload[p];
    if (v === undefined) continue;
    if (typeof v === 'number' && !Number.isFinite(v)) throw optionError(p, `must be a finite number, got ${v}`);
    if (typeof v !== 'number' && typeof v !== 'string' && typeof v !== 'boolean')
      throw optionError(p, `must be a number or a string, got ${typeof v}`);
    q.set(p, String(v));
  }
  return q;
}

/** The JSON body, once it has the fields the client relies on; `INVALID_RESPONSE` otherwise. */
async function answer<T>(res: Response, fields: Readonly<Record<string, 'string' | 'array'>>, what: string): Promise<T> {
  const body = await readBody(res);
  const ok =
    isObject(body) &&
    Object.entries(fields).every(([k, type]) => (type === 'array' ? Array.isArray(body[k]) : typeof body[k] === type));
  if (!ok)
    throw invalid(res.status, `expected ${what} from the server, got: ${JSON.stringify(body).slice(0, 200)}`, requestIdOf(res));
  return body as T;
}

/**
 * The cost model of the deployment's API: which placement (ElastiCache, EC2 cache nodes on EBS, S3 classes, or a
 * memory tier in front of S3) a workload should use, at what monthly cost, with the price catalogs it is priced from.
 * Open to tenant API keys.
 *
 * @example
 * ```ts
 * const strata = new StrataClient({ endpoint: 'http://localhost:8080' });
 * const { recommendations } = await strata.cost.placements({ valueSize: '1MB', keys: 500, requestsPerMonth: 2000 });
 * console.log(recommendations[0]?.placement.id, recommendations[0]?.cost.total); // s3:STANDARD 0.19 (USD a month, aws-2026-11 prices)
 * ```
 */
export class CostClient {
  /** @internal */
  constructor(private readonly t: SubClientTransport) {}

  /**
   * Ranks the placements for a workload (`GET /v1/cost/placements`): by C/S (cost per unit of speedup), or by
   * monthly cost with `rankBy: 'cost'`; placements meeting `latencyTarget` first. `text` is the ranking as a table.
   *
   * @throws {ValidationError} when a field is missing or invalid (`err.field` names it, e.g. `valueSize`), an
   *   unknown `catalog`, or a `region` the catalog does not price.
   * @example
   * ```ts
   * const r = await strata.cost.placements({ valueSize: '50MB', keys: 500, requestsPerMonth: '200k', persistent: true, region: 'eu-west-1', top: 3 });
   * for (const x of r.recommendations) console.log(x.rank, x.placement.id, x.cost.total.toFixed(2), x.costPerSpeedup.toFixed(2));
   * console.log(r.text); // the same table as `strata cost --value-size 50MB ...`
   * ```
   */
  async placements(workload: CostWorkload, opts: CostRequestOptions = {}): Promise<CostPlacementsResult> {
    const url = `${this.t.endpoint}/v1/cost/placements?${workloadQuery(workload)}`;
    return this.t.transport.send(this.req(url, opts), (res) =>
      answer<CostPlacementsResult>(res, { text: 'string', recommendations: 'array', excluded: 'array' }, 'ranked placements'),
    );
  }

  /**
   * Tables III and IV of Chiu & Agrawal (2010, see the module's comment) recomputed from its Table I prices
   * (`GET /v1/cost/paper-2010`), every printed cell against the formulas, and the cells the paper's own formulas
   * do not give.
   *
   * @example
   * ```ts
   * const paper = await strata.cost.paper2010();
   * console.log(paper.tables);
   * console.log(paper.discrepancies.filter((d) => d.kind === 'sum').map((d) => d.id)); // ['D8', 'D9', ...]
   * ```
   */
  async paper2010(opts: CostRequestOptions = {}): Promise<Paper2010Result> {
    const fields = { tables: 'string', discrepanciesText: 'string', discrepancies: 'array', cells: 'array' } as const;
    const url = `${this.t.endpoint}/v1/cost/paper-2010`;
    return this.t.transport.send(this.req(url, opts), (res) =>
      answer<Paper2010Result>(res, fields, "Chiu & Agrawal's (2010) tables"),
    );
  }

  /**
   * The price catalogs the server prices with (`GET /v1/cost/catalogs`), their regions and price dates, and the
   * defaults.
   *
   * @example
   * ```ts
   * const { catalogs, defaultCatalog } = await strata.cost.catalogs();
   * for (const c of catalogs) console.log(c.id, c.asOf.join(', '), c.regions.join(', '), c.id === defaultCatalog ? '(default)' : '');
   * ```
   */
  async catalogs(opts: CostRequestOptions = {}): Promise<CostCatalogsResult> {
    const fields = { text: 'string', catalogs: 'array', defaultCatalog: 'string', defaultRegion: 'string' } as const;
    return this.t.transport.send(this.req(`${this.t.endpoint}/v1/cost/catalogs`, opts), (res) =>
      answer<CostCatalogsResult>(res, fields, 'the price catalogs'),
    );
  }

  private req(url: string, opts: CostRequestOptions): HttpRequest {
    return {
      method: 'GET',
      url,
      auth: true,
      retryMode: 'idempotent',
      signal: opts.signal,
      timeoutMs: opts.timeoutMs ?? this.t.timeoutMs,
      headers: {},
    };
  }
}

import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { StrataError, ValidationError } from '../../core/errors.js';
import { errorResult } from '../../core/api/http.js';
import type { ApiFunction } from '../../core/api/route-types.js';
import { API_ROUTES } from '../../core/api/routes.js';
import { openApiDocument } from '../../core/api/openapi.js';
import { matchRoute, methodNotAllowed, routeNotFound } from '../../core/api/routes.js';
import type { BuiltContext } from '../../core/composition/api-context.js';
import type { ApiContext } from '../../core/api/operations.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { send, serveBlob } from './blob-routes.js';
import { apiHandler } from '../../core/composition/api-handler.js';
// The admin function's own set-up, as deployed: its workflow service factory (when the context carries none).
import '../../lambdas/api/admin.js';
import { lambdaContext, toApiGatewayEvent } from './api-gateway-event.js';
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { metricsSettings } from '../../core/composition/metrics-settings.js';
import { metricsSink, setMetricsSink, stdoutSink, teeSink, type MetricsSink } from '../../core/metrics/sink.js';
import { dashboardResponse, isDashboardPath, type DashboardRouteOptions } from './dashboard/routes.js';
import type { ExecutionRow } from './dashboard/data.js';
import { LOCAL_WORKFLOWS_NAMESPACE } from './dashboard/local-widgets.js';
import { localCostModel } from './cost-model.js';
import { startWorkflowSampler } from './workflow-sampler.js';

type LambdaHandler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;
type Handlers = Record<ApiFunction, LambdaHandler>;

/** The API stack's functions (a record, so that a function added to ApiFunction must be added here). */
const FUNCTIONS: Record<ApiFunction, true> = { keys: true, batch: true, transfer: true, service: true, admin: true };

/**
 * The handlers Lambda runs (lambdas/api/*.ts: apiHandler per function), over this server's context rather than the
 * process's: two servers in one process (a test's two containers) each serve their own, as two containers would.
 */
function handlersOver(context: ApiContext): Handlers {
  const ctx = Promise.resolve(context);
  const out = {} as Handlers;
  for (const fn of Object.keys(FUNCTIONS) as ApiFunction[]) out[fn] = apiHandler(fn, () => ctx) as unknown as LambdaHandler;
  return out;
}

/** API Gateway rejects request bodies above 10 MB before any Lambda runs; so does the local server. */
export const MAX_REQUEST_BYTES = 10 * 1024 * 1024;
export { MAX_UPLOAD_BYTES } from './blob-routes.js';

export interface LocalServerOptions {
  context: ApiContext;
  port?: number;
  host?: string;
  /**
   * Where the handlers' request metrics go, for the /dashboard page. The server installs it as the process's
   * metrics sink (with stdout EMF lines too when STRATA_METRICS_STDOUT=1) until it closes.
   * @default a new store with 10 s points kept for an hour
   */
  metrics?: LocalMetricsStore;
  /**
   * The base URL the context's presigner puts in the URLs it hands out (STRATA_PUBLIC_URL as the context was
   * built with). With `hostUrls`, the server answers each request with those URLs on the request's own host
   * instead, when that host names this machine (see {@link requestBaseUrl}).
   */
  publicUrl?: string;
  /** Rewrite `publicUrl` to the request's host (STRATA_PUBLIC_URL unset). @default false */
  hostUrls?: boolean;
}

export interface LocalServer {
  server: Server;
  url: string;
  /** The local run's metrics (what /dashboard draws). */
  metrics: LocalMetricsStore;
  close(): Promise<void>;
}

/** Serves the HTTP API on localhost by turning requests into API Gateway proxy events for the Lambda handlers. */
export async function startLocalServer(opts: LocalServerOptions): Promise<LocalServer> {
  const handlers = handlersOver(opts.context);
  const blobs = opts.context.presigner instanceof LocalFolderTier ? opts.context.presigner : undefined;
  const settings = metricsSettings();
  const metrics = opts.metrics ?? new LocalMetricsStore();
  // The handlers write their EMF records to the process's sink: here, the store (and stdout only when asked, so
  // the console stays readable).
  const sink: MetricsSink = settings.stdout ? teeSink(metrics, stdoutSink()) : metrics;
  setMetricsSink(sink);
  // Strata/Cost, modelled from this run's traffic; workflow executions, when the run has workflows.
  const cost = localCostModel({ store: metrics, environment: settings.environment });
  const workflows = opts.context.workflows
    ? startWorkflowSampler({ service: opts.context.workflows, store: metrics, environment: settings.environment })
    : undefined;
  let executions: ExecutionRow[] = [];
  // The Policy firings panel: the background evaluator's history (`npm start` puts it in the context) and the policy
  // in force (a context with a policy store carries its live copy, as the API handler reads it).
  const firings = opts.context.policyFirings;
  const livePolicy = (opts.context as Partial<BuiltContext>).livePolicy;
  const dashboard: DashboardRouteOptions = {
    store: metrics,
    environment: settings.environment,
    captions: {
      cost: {
        modelled: true,
        caption:
          "Modelled, not billed: what this run's traffic would cost on AWS, priced by Strata's cost model " +
          `(core/cost, catalog ${cost.book.catalogId}, ${cost.book.region}, the dev environment's shape) for each ` +
          `completed ${metrics.resolutionMs / 1000} s bucket, as USD per hour at that bucket's rate. ` +
          'Projected month: that rate from this hour to the end of the month.',
      },
    },
    ...(workflows
      ? {
          executions: () => executions,
          notes: {
            [LOCAL_WORKFLOWS_NAMESPACE]: 'no workflow executions yet: npx strata workflow start scale-out --endpoint <this URL>',
          },
        }
      : {}),
    ...(firings ? { firings } : {}),
    ...(livePolicy ? { policy: () => livePolicy.current } : {}),
    refresh: async () => {
      cost.catchUp();
      if (workflows) executions = await workflows.sample();
    },
  };
  let port = 0;
  const urls = { publicUrl: opts.publicUrl?.replace(/\/+$/, ''), hostUrls: !!opts.hostUrls, port: () => port };
  const server = createServer({ keepAlive: true, requestTimeout: 60_000 }, (req, res) => {
    handle(req, res, handlers, blobs, dashboard, urls).catch((e) => {
      console.error('[strata] local server error', e);
      if (!res.headersSent) send(res, errorResult(new StrataError('INTERNAL', 'internal error')), req.method === 'HEAD');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 8080, opts.host ?? '127.0.0.1', () => resolve());
  });
  ({ port } = server.address() as AddressInfo);
  return {
    server,
    url: `http://${opts.host && opts.host !== '0.0.0.0' ? opts.host : '127.0.0.1'}:${port}`,
    metrics,
    close: () =>
      new Promise<void>((resolve) => {
        if (metricsSink() === sink) setMetricsSink(undefined);
        void workflows?.stop();
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

interface UrlOptions {
  publicUrl: string | undefined;
  hostUrls: boolean;
  port: () => number;
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  handlers: Handlers,
  blobs: LocalFolderTier | undefined,
  dashboard: DashboardRouteOptions,
  urls: UrlOptions,
): Promise<void> {
  const requestId = randomUUID();
  const rawUrl = req.url ?? '/';
  const q = rawUrl.indexOf('?');
  const path = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const query = new URLSearchParams(q === -1 ? '' : rawUrl.slice(q + 1));
  const isHead = req.method === 'HEAD';

  // Presigned-URL stand-in for the local-folder tier: streamed both ways, not bound by the API body limit.
  if (blobs && path.startsWith('/local-blobs/')) return serveBlob(req, res, blobs, path.slice('/local-blobs/'.length));

  const body = await readBody(req, MAX_REQUEST_BYTES);
  if (body === null) {
    res.setHeader('connection', 'close');
    return send(
      res,
      errorResult(
        new StrataError(
          'PAYLOAD_TOO_LARGE',
          `request bodies are limited to ${MAX_REQUEST_BYTES} bytes; upload large values through an upload URL`,
          { limit: MAX_REQUEST_BYTES },
        ),
      ),
      isHead,
    );
  }

  if (path === '/' || path === '') {
    return send(
      res,
      {
        statusCode: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          service: 'strata',
          api: '/v1',
          health: '/v1/health',
          stats: '/v1/stats',
          dashboard: '/dashboard',
          docs: 'docs/API.md',
          openapi: '/v1/openapi.json',
        }),
      },
      isHead,
    );
  }
  if (path === '/openapi.json' && (req.method === 'GET' || isHead)) {
    return send(
      res,
      { statusCode: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(openApiDocument(API_ROUTES)) },
      isHead,
    );
  }
  if (isDashboardPath(path)) {
    if (path === '/dashboard/data') await dashboard.refresh?.();
    return send(res, dashboardResponse(req.method ?? 'GET', path, query, dashboard), isHead);
  }

  const match = matchRoute(req.method ?? 'GET', path);
  if (!match.resource) return send(res, errorResult(routeNotFound(req.method ?? 'GET', path)), isHead);
  if (!match.route) {
    res.setHeader('allow', match.allowed.join(', '));
    return send(res, errorResult(methodNotAllowed(req.method ?? 'GET', match.resource, match.allowed)), isHead);
  }
  if (match.badParam)
    return send(
      res,
      errorResult(new ValidationError(match.badParam, 'is not valid percent-encoding (encode keys with encodeURIComponent)')),
      isHead,
    );

  const event = toApiGatewayEvent(
    req,
    body,
    { resource: match.resource, pathParameters: match.pathParameters },
    requestId,
    path,
    query,
  );
  const result = await handlers[match.route.fn](event, lambdaContext(requestId, `strata-api-${match.route.fn}`));
  const base = urls.hostUrls && urls.publicUrl ? requestBaseUrl(req.headers.host, urls.port()) : undefined;
  send(res, base && urls.publicUrl && base !== urls.publicUrl ? rebaseUrls(result, urls.publicUrl, base) : result, isHead);
}

/**
 * `http://<Host>` when the request's Host header names this machine on the port the server listens on (loopback,
 * this host's name, or one of its interface addresses), else undefined. Anything else (a name the client made
 * up, another port behind a proxy) is not echoed into URLs: STRATA_PUBLIC_URL is the way to name those.
 */
export function requestBaseUrl(host: string | undefined, port: number): string | undefined {
  if (!host) return undefined;
  let u: URL;
  try {
    u = new URL(`http://${host}`);
  } catch {
    return undefined;
  }
  if (u.host !== host.toLowerCase() || u.username || u.password || u.pathname !== '/' || u.search || u.hash) return undefined;
  if ((u.port === '' ? 80 : Number(u.port)) !== port) return undefined;
  const name = u.hostname.replace(/^\[|\]$/g, '');
  const loopback = name === 'localhost' || name === '::1' || /^127\.\d+\.\d+\.\d+$/.test(name);
  const interfaces = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  const local = loopback || name === hostname().toLowerCase() || interfaces.some((a) => a.address.toLowerCase() === name);
  return local ? `http://${u.host}` : undefined;
}

/** The handler's answer with the presigner's URLs (`<from>/local-blobs/...`) on base `to`: body and location. */
function rebaseUrls(result: APIGatewayProxyResult, from: string, to: string): APIGatewayProxyResult {
  const prefix = `${from}/local-blobs/`;
  const swap = (v: string) => v.split(prefix).join(`${to}/local-blobs/`);
  const headers = { ...result.headers };
  if (typeof headers.location === 'string') headers.location = swap(headers.location);
  const body = !result.isBase64Encoded && result.body.includes(prefix) ? swap(result.body) : result.body;
  return { ...result, headers, body };
}

/** Reads the body, or returns null (and stops reading) once it passes `limit`. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      if (over) return;
      size += c.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        resolve(null);
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => !over && resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

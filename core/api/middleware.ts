import type middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { StrataError, isStrataError } from '../errors.js';
import { requestOutcome } from '../metrics/request-outcome.js';
import { requestMetricDocuments } from '../metrics/request-metrics.js';
import type { MetricsSink } from '../metrics/sink.js';
import { metricsSink } from '../metrics/sink.js';
import type { ApiEvent, ApiResult } from './http.js';
import { errorResult } from './http.js';
import type { ApiContext } from './operations.js';
import { ErrorLogLimiter, type ErrorLogLimiterOptions } from '../util/error-log-limiter.js';
import { log } from '../util/logger.js';

type Mw = middy.MiddlewareObj<ApiEvent, ApiResult, Error, Context>;

/**
 * Turns thrown errors into the JSON error shape. Typed errors keep their code and message; anything else is a
 * bug and becomes a 500 whose body carries only the request id (the details go to the log, never the client).
 *
 * A typed 5xx (TIER_UNAVAILABLE while no tier answers) comes once per request for as long as the outage lasts:
 * the first of each kind is logged with its request id, then one line per kind per 10 s with the count
 * (util/error-log-limiter.ts; the Errors metric counts each request). A 500 is a bug, rare, and its body tells the
 * client to quote its request id: each is logged.
 */
export function errorResponder(
  log: (msg: string, data: Record<string, unknown>) => void = defaultLog,
  o: Pick<ErrorLogLimiterOptions, 'now' | 'schedule'> = {},
): Mw {
  const failures = new ErrorLogLimiter({
    ...o,
    write: (e) => {
      const err = e.error as StrataError;
      const requestId = e.details?.requestId;
      // The error with its cause chain (the logger spells it out and redacts secrets); the answer carries neither.
      if (e.type === 'first') log('request failed', { requestId, code: err.code, error: err });
      else {
        const repeated = { code: err.code, count: e.count, periodMs: e.periodMs, error: e.summary, lastRequestId: requestId };
        log('request failed repeatedly', { ...repeated, ...(e.otherKinds ? { otherKinds: true } : {}) });
      }
    },
  });
  return {
    onError: async (request) => {
      const err = request.error;
      const requestId = request.context?.awsRequestId;
      if (isStrataError(err) && err.expose) {
        request.response = errorResult(err, err.status >= 500 ? requestId : undefined);
        if (err.status >= 500) failures.report(err, err.code, { requestId });
        return;
      }
      log('unhandled error', { requestId, error: err });
      request.response = errorResult(
        new StrataError('INTERNAL', 'internal error; quote the requestId when reporting it'),
        requestId,
      );
    },
  };
}

/** Adds the request id to every response, so clients can quote it. */
export function requestIdHeader(): Mw {
  return {
    after: async (request) => {
      const id = request.context?.awsRequestId;
      if (id && request.response) request.response.headers = { ...request.response.headers, 'x-request-id': id };
    },
    onError: async (request) => {
      const id = request.context?.awsRequestId;
      if (id && request.response) request.response.headers = { ...request.response.headers, 'x-request-id': id };
    },
  };
}

/**
 * Lambda has no background timers between invocations: write-back entries are flushed at the end of an
 * invocation once the flush interval has passed (and by the scheduled ops job as a backstop).
 */
export function writeBackFlush(getContext: () => Promise<ApiContext>): Mw {
  return {
    after: async () => {
      const ctx = await getContext();
      await ctx.coordinator.flushIfDue().catch((e) => defaultLog('write-back flush failed', { error: String(e) }));
    },
  };
}

export interface RequestMetricsOptions {
  /** `Environment` dimension value. */
  environment: () => string;
  /** Namespaces reported under their own name (the configured ones); others are reported as `other`. */
  namespaces: () => ReadonlySet<string>;
  /** @default the process's sink (stdout EMF in Lambda, the local store under `npm start`) */
  sink?: () => MetricsSink;
  /** @default performance.now */
  now?: () => number;
}

/**
 * Records each request's metrics (Strata/Requests) once its response is final: first in the chain, so its
 * `after`/`onError` run last and see the response the client gets. Synchronous on purpose: building the record
 * and handing it to the sink (one stdout write in Lambda) is all it does, nothing is awaited, and a failure to
 * record is logged, never turned into a failed request.
 */
export function requestMetrics(opts: RequestMetricsOptions): Mw {
  const now = opts.now ?? (() => performance.now());
  const sink = opts.sink ?? metricsSink;
  const started = new WeakMap<object, number>();
  let failures = 0;
  const record = (request: middy.Request<ApiEvent, ApiResult, Error, Context>, error?: unknown): void => {
    try {
      const start = started.get(request);
      const outcome = requestOutcome(request.event, request.response ?? undefined, error);
      const docs = requestMetricDocuments(outcome, {
        environment: opts.environment(),
        namespaces: opts.namespaces(),
        timestamp: Date.now(),
        latencyMs: start === undefined ? 0 : now() - start,
        requestId: request.context?.awsRequestId,
      });
      sink().write(docs);
    } catch (e) {
      // Log the first failures only: a broken sink must not flood the log on every request.
      if (failures++ < 3) defaultLog('request metrics not recorded', { error: String(e) });
    }
  };
  return {
    before: (request) => {
      started.set(request, now());
    },
    after: (request) => record(request),
    onError: (request) => record(request, request.error),
  };
}

function defaultLog(msg: string, data: Record<string, unknown>): void {
  log.error(msg, data);
}

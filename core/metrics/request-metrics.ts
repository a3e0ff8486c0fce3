/**
 * Request metrics (Strata/Requests): turns the outcome of one API request into its EMF documents. One document
 * per request, plus one per serving tier for a batch get that was served by several tiers (EMF gives each document
 * one value per dimension, so hits of two tiers cannot share one).
 */
import type { MetricKey } from './metric-catalog.js';
import { boundedName } from './metric-catalog.js';
import type { EmfDocument } from './emf.js';
import { emfDocument } from './emf.js';
import type { HitTier, RequestOutcome } from './request-outcome.js';

export interface RequestRecordContext {
  /** `Environment` dimension value (STRATA_ENV: dev/staging/prod, `local` for `npm start`). */
  environment: string;
  /** Namespaces reported under their own name; any other is reported as `other`. */
  namespaces: ReadonlySet<string>;
  /** Epoch ms the request finished. */
  timestamp: number;
  /** Handler latency. */
  latencyMs: number;
  /** Written into the log line (not a dimension) so a metric spike can be traced to requests. */
  requestId?: string;
}

/** The EMF documents of one request. */
export function requestMetricDocuments(outcome: RequestOutcome, rc: RequestRecordContext): EmfDocument[] {
  const namespace = outcome.namespace === undefined ? undefined : boundedName(outcome.namespace, rc.namespaces);
  const hitTiers = (Object.entries(outcome.hits) as [HitTier, number][]).filter(([, n]) => n > 0);
  // A single-key read puts its tier on the main document (hits and latency by tier); a batch get cannot, as
  // its keys may come from several tiers: its hits go in one document per tier.
  const mainTier = outcome.servedTier;
  const values: Partial<Record<MetricKey, number>> = {
    requests: 1,
    latency: Math.round(rc.latencyMs * 1000) / 1000,
    errors: outcome.errorCode ? 1 : 0,
    serverErrors: outcome.statusCode >= 500 ? 1 : 0,
  };
  if (outcome.misses !== undefined) values.misses = outcome.misses;
  if (outcome.bytesIn !== undefined) values.bytesIn = outcome.bytesIn;
  if (outcome.bytesOut !== undefined) values.bytesOut = outcome.bytesOut;
  if (mainTier !== undefined && mainTier !== 'none' && hitTiers.length === 1) values.hits = hitTiers[0]![1];

  const properties: Record<string, string | number> = { statusCode: outcome.statusCode };
  if (rc.requestId) properties.requestId = rc.requestId;
  const docs = [
    emfDocument({
      timestamp: rc.timestamp,
      dimensions: {
        Environment: rc.environment,
        Operation: outcome.operation,
        Namespace: namespace,
        Tier: mainTier,
        ErrorCode: outcome.errorCode,
      },
      values,
      properties,
    }),
  ];
  if (mainTier === undefined) {
    for (const [tier, n] of hitTiers) {
      docs.push(
        emfDocument({
          timestamp: rc.timestamp,
          dimensions: { Environment: rc.environment, Namespace: namespace, Tier: tier },
          values: { hits: n },
          properties,
        }),
      );
    }
  }
  return docs;
}

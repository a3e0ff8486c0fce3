import type { WriteResult } from './types.js';

/**
 * What every write answers (PUT, batch put, upload completion, the upload-commit workflow's stored answer):
 * `durable: false` while it lives in the hot tier alone (write-back, not yet flushed: docs/API.md, "Consistency").
 * One function, so an asynchronous completion's answer is exactly the synchronous one's.
 */
export function writeBody(w: WriteResult): Record<string, unknown> {
  return {
    version: w.version,
    expiresAt: iso(w.expiresAt),
    size: w.size,
    tiers: w.tiers,
    durable: w.durable,
    ...(w.superseded ? { superseded: true } : {}),
  };
}

export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

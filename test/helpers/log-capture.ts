// Captures what the structured logger (core/util/logger.ts) writes to stderr during a test: one JSON line each.
import { jest } from '@jest/globals';

export interface CapturedLog {
  /** The lines written so far, parsed. */
  lines(): Record<string, unknown>[];
  restore(): void;
}

/** Replaces process.stderr.write until `restore()`; every chunk must be one JSON line (the logger's format). */
export function captureLog(): CapturedLog {
  const chunks: string[] = [];
  const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  });
  return {
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    restore: () => spy.mockRestore(),
  };
}

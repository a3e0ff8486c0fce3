import type { Entry } from '../../core/model/entry.js';
import { contentHash } from '../../core/model/keys.js';
import { TierUnavailableError } from '../../core/errors.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { TierName } from '../../core/tiers/tier.js';

export function entry(version: number, value: string | Buffer = 'v', extra: Partial<Entry['header']> = {}): Entry {
  const buf = Buffer.isBuffer(value) ? value : Buffer.from(value);
  return {
    header: { version, expiresAt: null, size: buf.length, hash: contentHash(buf), tags: [], flags: {}, ...extra },
    value: buf,
  };
}

/** A memory tier whose backend can be switched off, to exercise fall-through and 503 paths without mocks. */
export class SwitchableTier extends MemoryTier {
  down = false;
  calls = 0;
  constructor(name: TierName, maxBytes = 8 * 1024 * 1024) {
    super({ name, maxBytes });
    for (const m of ['get', 'head', 'has', 'put', 'delete', 'getMany', 'putMany', 'deleteMany', 'ping', 'listOrdered'] as const) {
      const original = (this as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[m]!.bind(this);
      (this as unknown as Record<string, unknown>)[m] = async (...args: unknown[]) => {
        this.calls++;
        if (this.down) throw new TierUnavailableError(this.name);
        return original(...args);
      };
    }
  }
}

import { randomBytes } from 'node:crypto';
import { TierUnavailableError } from '../errors.js';
import type { Entry } from '../model/entry.js';
import { contentHash, SYSTEM_NAMESPACE } from '../model/keys.js';
import type { Tier } from '../tiers/tier.js';

/**
 * A secret every coordinator of a deployment shares, kept in its lowest (durable) tier: the key that signs the
 * listing cursors (api/list-cursor.ts), so a cursor minted by one Lambda container is accepted by every other.
 *
 * Created once, with no infrastructure of its own (a Secrets Manager secret would add $0.40 a month to every idle
 * environment): each process that finds none writes a random one at version 1. A tier applies a write only over an
 * older version, so of concurrent creators exactly one lands, and each reads back the one that did. The tier's own
 * encryption at rest and access policy protect it like the values it stores.
 */
const SECRET_VERSION = 1;
const SECRET_BYTES = 32;

export class SystemSecrets {
  private readonly cache = new Map<string, Promise<Buffer>>();

  constructor(private readonly tier: Tier) {}

  /** The secret called `name`, created on first use. A failure is not cached: the next call tries again. */
  get(name: string): Promise<Buffer> {
    let p = this.cache.get(name);
    if (!p) {
      p = this.load(name);
      this.cache.set(name, p);
      p.catch(() => this.cache.delete(name));
    }
    return p;
  }

  private async load(name: string): Promise<Buffer> {
    const key = `secret/${name}`;
    const found = await this.read(key);
    if (found) return found;
    const value = randomBytes(SECRET_BYTES);
    const header = {
      version: SECRET_VERSION,
      expiresAt: null,
      size: value.length,
      hash: contentHash(value),
      tags: [],
      flags: {},
    };
    const entry: Entry = { header, value };
    await this.tier.put(SYSTEM_NAMESPACE, key, entry);
    const stored = await this.read(key);
    if (!stored) throw new TierUnavailableError(this.tier.name, new Error(`the '${name}' secret could not be stored`));
    return stored;
  }

  private async read(key: string): Promise<Buffer | undefined> {
    const e = await this.tier.get(SYSTEM_NAMESPACE, key);
    if (!e || e.header.flags.tombstone || e.header.flags.elsewhere || e.value.length !== SECRET_BYTES) return undefined;
    return e.value;
  }
}

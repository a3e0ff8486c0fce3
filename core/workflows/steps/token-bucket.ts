/**
 * A token bucket for bandwidth caps (bytes per second) across one workflow step: eviction's copies to S3, tier
 * migration's moves. `take(n)` spends n tokens and, when that leaves the bucket in debt, waits until the debt is
 * paid back at `ratePerSec`. Spending into debt (rather than waiting for n tokens first) lets a single value larger
 * than the burst through at the average rate instead of never.
 *
 * Time comes from `now` and waiting from `sleep`, both injectable so tests drive the clock instead of timing it.
 */
export interface TokenBucketOptions {
  /** Tokens (bytes) added per second; must be positive. */
  ratePerSec: number;
  /** Largest balance: how much may go through at once after an idle spell. @default ratePerSec (one second's worth) */
  burst?: number;
  /** Milliseconds clock. @default performance.now */
  now?: () => number;
  /** @default setTimeout-based */
  sleep?: (ms: number) => Promise<void>;
}

export class TokenBucket {
  readonly ratePerSec: number;
  readonly burst: number;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private tokens: number;
  private last: number;
  /** Milliseconds spent waiting so far (reports). */
  waitedMs = 0;

  constructor(opts: TokenBucketOptions) {
    if (!(opts.ratePerSec > 0) || !Number.isFinite(opts.ratePerSec))
      throw new RangeError(`TokenBucket: ratePerSec must be a positive number (got ${opts.ratePerSec})`);
    this.ratePerSec = opts.ratePerSec;
    this.burst = opts.burst ?? opts.ratePerSec;
    if (!(this.burst > 0)) throw new RangeError(`TokenBucket: burst must be positive (got ${this.burst})`);
    this.now = opts.now ?? (() => performance.now());
    this.sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.tokens = this.burst;
    this.last = this.now();
  }

  /** The balance now (negative while in debt). */
  available(): number {
    this.refill();
    return this.tokens;
  }

  /** How long a take(n) made now would wait, in ms (0 when the balance covers it). */
  delayFor(n: number): number {
    this.refill();
    const after = this.tokens - n;
    return after >= 0 ? 0 : (-after / this.ratePerSec) * 1000;
  }

  /** Spends `n` tokens, waiting as long as the bucket is in debt afterwards. Resolves to the wait in ms. */
  async take(n: number): Promise<number> {
    if (!(n >= 0) || !Number.isFinite(n)) throw new RangeError(`TokenBucket: cannot take ${n} tokens`);
    const wait = this.delayFor(n);
    this.tokens -= n;
    if (wait > 0) {
      this.waitedMs += wait;
      await this.sleep(wait);
    }
    return wait;
  }

  private refill(): void {
    const t = this.now();
    if (t > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.ratePerSec);
      this.last = t;
    }
  }
}

import type { Clock } from '../lib/clock.ts';

export interface BucketPolicy {
  /** Tokens added per second. */
  rate: number;
  burst: number;
}

/**
 * Token buckets keyed by caller. Time comes from the injected clock, so a test that does not
 * move the clock sees a bucket that never refills.
 */
export class RateLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #policy: BucketPolicy;
  readonly #clock: Clock;

  constructor(policy: BucketPolicy, clock: Clock) {
    this.#policy = policy;
    this.#clock = clock;
  }

  /** Takes one token; returns 0 when allowed, else the whole seconds to wait before retrying. */
  take(key: string): number {
    const now = this.#clock.now().getTime();
    const { rate, burst } = this.#policy;
    const b = this.#buckets.get(key) ?? { tokens: burst, at: now };
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    this.#buckets.set(key, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    if (this.#buckets.size > 10_000) this.#evictFull(now);
    return Math.max(1, Math.ceil((1 - b.tokens) / rate));
  }

  #evictFull(now: number): void {
    for (const [k, b] of this.#buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.#policy.rate >= this.#policy.burst) this.#buckets.delete(k);
    }
  }
}

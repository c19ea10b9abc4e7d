import type { Clock } from '../lib/clock.ts';

export interface BucketPolicy {
  /** Tokens added per second. */
  rate: number;
  burst: number;
}

/** Keys one limiter remembers before it forgets the least recently used (a flood of new addresses). */
export const LIMITER_MAX_KEYS = 10_000;

/**
 * Token buckets keyed by caller. Time comes from the injected clock, so a test that does not
 * move the clock sees a bucket that never refills. Memory is bounded: past `maxKeys`, buckets
 * that have refilled are forgotten first (a full bucket is the same as none), then the least
 * recently used; a forgotten caller starts again from a full burst.
 */
export class RateLimiter {
  /** In least-recently-used order: a bucket is moved to the end each time it is used. */
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #policy: BucketPolicy;
  readonly #clock: Clock;
  readonly #maxKeys: number;

  constructor(policy: BucketPolicy, clock: Clock, opts: { maxKeys?: number } = {}) {
    this.#policy = policy;
    this.#clock = clock;
    this.#maxKeys = opts.maxKeys ?? LIMITER_MAX_KEYS;
  }

  /** How many callers it remembers now. */
  get size(): number {
    return this.#buckets.size;
  }

  /** The tokens the caller holds now (the burst for one never seen); changes nothing. */
  available(key: string): number {
    const b = this.#buckets.get(key);
    if (!b) return this.#policy.burst;
    return Math.min(this.#policy.burst, b.tokens + ((this.#clock.now().getTime() - b.at) / 1000) * this.#policy.rate);
  }

  /** Takes one token; returns 0 when allowed, else the whole seconds to wait before retrying. */
  take(key: string): number {
    const now = this.#clock.now().getTime();
    const { rate, burst } = this.#policy;
    const b = this.#buckets.get(key) ?? { tokens: burst, at: now };
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    this.#buckets.delete(key);
    this.#buckets.set(key, b);
    if (this.#buckets.size > this.#maxKeys) this.#shrink(now, key);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / rate));
  }

  /** Down to 90 % of the bound, so the scan runs once per many new keys, never for the caller just seen. */
  #shrink(now: number, keep: string): void {
    const target = Math.floor(this.#maxKeys * 0.9);
    for (const [k, b] of this.#buckets) {
      if (k !== keep && b.tokens + ((now - b.at) / 1000) * this.#policy.rate >= this.#policy.burst) this.#buckets.delete(k);
    }
    for (const k of this.#buckets.keys()) {
      if (this.#buckets.size <= target) break;
      if (k !== keep) this.#buckets.delete(k);
    }
  }
}

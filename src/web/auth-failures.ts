import { isIP } from 'node:net';
import type { Clock } from '../lib/clock.ts';
import { RateLimiter, type BucketPolicy } from '../lib/rate-limit.ts';

/** Failed authentications per client address: a burst of 20, then 10 a minute. */
export const AUTH_FAILURE_LIMIT: BucketPolicy = { rate: 10 / 60, burst: 20 };

/**
 * The bucket an address spends from: an IPv6 client by its /64 (one host usually holds a whole
 * /64, and could otherwise present a fresh address per guess), anything else as it is.
 */
export function addressKey(ip: string): string {
  if (isIP(ip) !== 6 || /^::ffff:\d/i.test(ip)) return ip;
  const [head, tail] = ip.toLowerCase().split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** The answer of one gated credential lookup. */
export type AuthAttempt<T> = { value: T | null } | { value: null; retryAfter: number };

/**
 * The one decision, for /api/v1, the board and /mcp alike, of whether a client address may have a
 * presented credential looked up. Only credentials that fail spend from the address's bucket; once
 * it is empty the address gets 429 (Retry-After) before any lookup runs, so a client cycling
 * made-up tokens costs no database query. An address that has failed recently may also have no
 * more lookups in flight than it has tokens left: concurrent guesses cannot all slip past the check
 * before the first of them is counted. Addresses that never fail are never held back.
 */
export class AuthFailures {
  readonly #buckets: RateLimiter;
  readonly #policy: BucketPolicy;
  /** Lookups in flight per address; an entry lives only while one is. */
  readonly #pending = new Map<string, number>();

  constructor(clock: Clock, policy: BucketPolicy = AUTH_FAILURE_LIMIT) {
    this.#policy = policy;
    this.#buckets = new RateLimiter(policy, clock);
  }

  /** Whole seconds before `ip` may present a credential again; 0 when it may now. Spends nothing. */
  wait(ip: string): number {
    return this.#wait(addressKey(ip));
  }

  #wait(key: string): number {
    const tokens = this.#buckets.available(key);
    if (tokens >= this.#policy.burst) return 0;
    const short = 1 + (this.#pending.get(key) ?? 0) - tokens;
    return short <= 0 ? 0 : Math.max(1, Math.ceil(short / this.#policy.rate));
  }

  /** Counts a failure found after the lookup succeeded (a webhook delivery whose signature is bad). */
  fail(ip: string): void {
    this.#buckets.take(addressKey(ip));
  }

  /**
   * Runs `lookup` for a credential `ip` presented, unless the address must wait; a null answer
   * (the credential did not authenticate) is counted against the address.
   */
  async attempt<T>(ip: string, lookup: () => Promise<T | null>): Promise<AuthAttempt<T>> {
    const key = addressKey(ip);
    const retryAfter = this.#wait(key);
    if (retryAfter > 0) return { value: null, retryAfter };
    this.#pending.set(key, (this.#pending.get(key) ?? 0) + 1);
    try {
      const value = await lookup();
      if (value === null) this.#buckets.take(key);
      return { value };
    } finally {
      const left = this.#pending.get(key)! - 1;
      if (left > 0) this.#pending.set(key, left);
      else this.#pending.delete(key);
    }
  }
}

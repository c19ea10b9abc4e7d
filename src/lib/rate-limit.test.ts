import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock.ts';
import { RateLimiter } from './rate-limit.ts';

describe('RateLimiter', () => {
  it('refuses past the burst and refills on the injected clock', () => {
    const clock = new ManualClock('2026-12-01T00:00:00Z');
    const limiter = new RateLimiter({ rate: 1, burst: 2 }, clock);
    expect([limiter.take('a'), limiter.take('a'), limiter.take('a')]).toEqual([0, 0, 1]);
    clock.advance(1000);
    expect(limiter.take('a')).toBe(0);
  });

  it('remembers at most maxKeys callers however many new ones arrive', () => {
    const limiter = new RateLimiter({ rate: 1, burst: 5 }, new ManualClock('2026-12-01T00:00:00Z'), { maxKeys: 100 });
    for (let i = 0; i < 10_000; i++) limiter.take(`10.0.${i >> 8}.${i & 255}`);
    expect(limiter.size).toBeLessThanOrEqual(100);
  });

  it('forgets refilled buckets first, then the least recently used, never the caller just seen', () => {
    const clock = new ManualClock('2026-12-01T00:00:00Z');
    const limiter = new RateLimiter({ rate: 0.001, burst: 1 }, clock, { maxKeys: 10 });
    limiter.take('hot');
    for (let i = 0; i < 9; i++) limiter.take(`cold-${i}`);
    expect(limiter.take('hot')).toBeGreaterThan(0); // used again: now the most recent
    limiter.take('new'); // the 11th key: the oldest (cold-0 ...) go, 'hot' stays refused
    expect(limiter.size).toBeLessThanOrEqual(10);
    expect(limiter.take('hot')).toBeGreaterThan(0);
    expect(limiter.take('cold-0')).toBe(0); // forgotten: a fresh burst
  });
});

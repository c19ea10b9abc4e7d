import { describe, expect, it } from 'vitest';
import { backoffDelay } from './backoff.ts';

describe('backoffDelay', () => {
  it('starts at 0.5 s and doubles to a 15 s ceiling', () => {
    const mid = () => 0.5; // no jitter
    expect([0, 1, 2, 3, 4, 5, 6, 50].map((a) => backoffDelay(a, mid))).toEqual([500, 1000, 2000, 4000, 8000, 15000, 15000, 15000]);
  });

  it('spreads each delay by a quarter either way, never past the ceiling', () => {
    expect(backoffDelay(0, () => 0)).toBe(375);
    expect(backoffDelay(0, () => 0.999999)).toBe(625);
    expect(backoffDelay(3, () => 0)).toBe(3000);
    expect(backoffDelay(10, () => 0)).toBe(11250);
    expect(backoffDelay(10, () => 0.999999)).toBe(15000);
  });
});

import { describe, expect, it } from 'vitest';
import { inputsOf, SHIFT_CACHE_MAX, shiftCacheHas, shiftCacheSize } from './presence-cache.ts';

// Issue 17 item 15b: the parsed-shift cache is keyed by strings tenants choose, so it is bounded.

const hhmm = (m: number) => `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
/** The i-th of more than SHIFT_CACHE_MAX distinct valid shifts. */
const shift = (i: number) => `Mon ${hhmm(i % 1380)}-${hhmm(1380 + Math.floor(i / 1380))}`;
const row = (text: string) => ({ shift: text, presence_override: null, override_until: null, override_set_at: null, override_by: null });

describe('the stored-shift cache', () => {
  it(`keeps at most ${SHIFT_CACHE_MAX} shifts, dropping the least recently used`, () => {
    for (let i = 0; i < SHIFT_CACHE_MAX; i++) inputsOf(row(shift(i)));
    expect(shiftCacheSize()).toBe(SHIFT_CACHE_MAX);
    // The oldest is used again, then one more arrives: the second oldest goes, the first stays.
    expect(inputsOf(row(shift(0))).shift!.canonical).toBe('TZ=UTC Mon 00:00-23:00');
    inputsOf(row(shift(SHIFT_CACHE_MAX)));
    expect(shiftCacheSize()).toBe(SHIFT_CACHE_MAX);
    expect(shiftCacheHas(shift(0))).toBe(true);
    expect(shiftCacheHas(shift(1))).toBe(false);
    for (let i = SHIFT_CACHE_MAX; i < SHIFT_CACHE_MAX + 500; i++) inputsOf(row(shift(i)));
    expect(shiftCacheSize()).toBe(SHIFT_CACHE_MAX);
  });
});

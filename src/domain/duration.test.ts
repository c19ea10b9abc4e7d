import { describe, expect, it } from 'vitest';
import { parseDuration } from './duration.ts';

describe('parseDuration', () => {
  it('reads h, m and s in that order, whole or with decimals', () => {
    expect(parseDuration('2h')).toBe(7_200_000);
    expect(parseDuration('90m')).toBe(5_400_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('45s')).toBe(45_000);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('1h2m3s')).toBe(3_723_000);
    expect(parseDuration('0m')).toBe(0);
  });
  it('is null for anything else', () => {
    for (const t of ['', '30', '30m2h', '1d', '-5m', ' 5m', '1h 30m', '1234567h', '5M', '\u00005m']) expect(parseDuration(t), JSON.stringify(t)).toBeNull();
  });
});

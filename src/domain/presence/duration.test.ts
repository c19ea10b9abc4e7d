import { describe, expect, it } from 'vitest';
import { isSwitchboardError } from '../errors.ts';
import { CLOCK_IN_DEFAULT_MS, CLOCK_IN_MAX_MS, parseClockInDuration } from './index.ts';

const H = 3_600_000;
const M = 60_000;

describe('parseClockInDuration', () => {
  it('defaults to 1h when absent', () => {
    expect(CLOCK_IN_DEFAULT_MS).toBe(H);
    expect(CLOCK_IN_MAX_MS).toBe(8 * H);
    expect(parseClockInDuration(undefined)).toBe(H);
  });

  it.each([
    ['30m', 30 * M],
    ['2h', 2 * H],
    ['1h30m', 90 * M],
    ['90m', 90 * M],
    ['45s', 45_000],
    ['1h0m30s', H + 30_000],
    ['1.5h', 90 * M],
    ['8h', 8 * H],
    ['7h59m59s', 8 * H - 1000],
    ['480m', 8 * H],
  ])('%s = %i ms', (raw, ms) => {
    expect(parseClockInDuration(raw)).toBe(ms);
  });

  it.each([
    ['9h', 'at most 8h'],
    ['8h1s', 'at most 8h'],
    ['481m', 'at most 8h'],
    ['999999h', 'at most 8h'],
    ['0', 'greater than zero'],
    ['0h', 'greater than zero'],
    ['0m0s', 'greater than zero'],
    ['-1h', 'must be positive'],
    ['abc', 'must be a duration'],
    ['', 'must be a duration'],
    ['1', 'must be a duration'],
    ['1d', 'must be a duration'],
    ['30m1h', 'must be a duration'],
    [' 1h', 'must be a duration'],
    ['1H', 'must be a duration'],
    ['1h 30m', 'must be a duration'],
    ['1e3s', 'must be a duration'],
    ['PT1H', 'must be a duration'],
    [3600, 'must be a duration'],
    [null, 'must be a duration'],
    [{ h: 1 }, 'must be a duration'],
  ])('refuses %j with invalid_argument naming "for" (%s)', (raw, reason) => {
    let err: unknown;
    try {
      parseClockInDuration(raw);
    } catch (e) {
      err = e;
    }
    expect(isSwitchboardError(err)).toBe(true);
    if (!isSwitchboardError(err)) return;
    expect(err.code).toBe('invalid_argument');
    expect(err.details.field).toBe('for');
    expect(err.message).toContain(reason);
  });
});

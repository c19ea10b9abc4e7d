import { describe, expect, it } from 'vitest';
import { isSwitchboardError } from '../errors.ts';
import { parsePresenceUntil, parseRfc3339 } from './until.ts';

const NOW = new Date('2026-06-01T12:00:00.000Z');

/** The refusal parsePresenceUntil throws: invalid_argument naming `until`. */
function refusal(raw: string): unknown {
  try {
    parsePresenceUntil(raw, NOW);
  } catch (err) {
    return err;
  }
  throw new Error(`${JSON.stringify(raw)} was accepted`);
}

describe('parseRfc3339', () => {
  it('reads Z and offsets, with or without a fraction, T and Z in either case', () => {
    expect(parseRfc3339('2026-12-01T17:00:00Z')?.toISOString()).toBe('2026-12-01T17:00:00.000Z');
    expect(parseRfc3339('2026-12-01t17:00:00z')?.toISOString()).toBe('2026-12-01T17:00:00.000Z');
    expect(parseRfc3339('2026-12-01T17:00:00+02:00')?.toISOString()).toBe('2026-12-01T15:00:00.000Z');
    expect(parseRfc3339('2026-12-01T17:00:00-05:30')?.toISOString()).toBe('2026-12-01T22:30:00.000Z');
    expect(parseRfc3339('2026-12-01T17:00:00.5Z')?.toISOString()).toBe('2026-12-01T17:00:00.500Z');
    expect(parseRfc3339('2026-12-01T17:00:00.123456789Z')?.toISOString()).toBe('2026-12-01T17:00:00.123Z');
    expect(parseRfc3339('2028-02-29T00:00:00Z')?.toISOString()).toBe('2028-02-29T00:00:00.000Z');
    expect(parseRfc3339('0050-01-01T00:00:00Z')?.toISOString()).toBe('0050-01-01T00:00:00.000Z');
    expect(parseRfc3339('2027-01-01T00:30:00+01:00')?.toISOString()).toBe('2026-12-31T23:30:00.000Z');
  });

  it('is null for what Date.parse takes but RFC 3339 does not, and for fields out of range', () => {
    const junk = ['12/1', 'Dec 1', 'Dec 1 2026', '2026', '2026-12-01', '2026-12-01T17:00Z', '2026-12-01T17:00:00', '2026-12-01 17:00:00Z', '1764608400000', 'Tue, 01 Dec 2026 17:00:00 GMT', '2026-12-01T17:00:00+0200', '2026-12-01T17:00:00+02', '+002026-12-01T17:00:00Z', '2026-12-01T17:00:00.Z', ' 2026-12-01T17:00:00Z'];
    const outOfRange = ['2026-02-30T00:00:00Z', '2026-02-29T00:00:00Z', '2026-04-31T00:00:00Z', '2026-13-01T00:00:00Z', '2026-00-10T00:00:00Z', '2026-12-00T00:00:00Z', '2026-12-01T24:00:00Z', '2026-12-01T23:60:00Z', '2026-12-01T23:59:60Z', '2026-12-01T17:00:00+24:00', '2026-12-01T17:00:00+02:60'];
    for (const t of [...junk, ...outOfRange]) expect(parseRfc3339(t), t).toBeNull();
  });
});

describe('parsePresenceUntil', () => {
  it('empty, blank or absent is no end', () => {
    expect(parsePresenceUntil(undefined, NOW)).toBeNull();
    expect(parsePresenceUntil('', NOW)).toBeNull();
    expect(parsePresenceUntil('   ', NOW)).toBeNull();
  });

  it('a duration counts from now, in the one duration grammar', () => {
    expect(parsePresenceUntil('90m', NOW)?.toISOString()).toBe('2026-06-01T13:30:00.000Z');
    expect(parsePresenceUntil('2h', NOW)?.toISOString()).toBe('2026-06-01T14:00:00.000Z');
    expect(parsePresenceUntil(' 1h30m ', NOW)?.toISOString()).toBe('2026-06-01T13:30:00.000Z');
    expect(parsePresenceUntil('45s', NOW)?.toISOString()).toBe('2026-06-01T12:00:45.000Z');
  });

  it('an RFC 3339 time is that instant; whether it is in the future is the plan\'s rule', () => {
    expect(parsePresenceUntil('2026-12-01T17:00:00+01:00', NOW)?.toISOString()).toBe('2026-12-01T16:00:00.000Z');
    expect(parsePresenceUntil(' 2026-12-01T17:00:00Z\n', NOW)?.toISOString()).toBe('2026-12-01T17:00:00.000Z');
    expect(parsePresenceUntil('2020-01-01T00:00:00Z', NOW)?.toISOString()).toBe('2020-01-01T00:00:00.000Z');
  });

  it('anything else is invalid_argument naming until, with the shapes it takes', () => {
    for (const raw of ['someday', 'tomorrow', '12/1', 'Dec 1', '1d', '-5m', '5M', '2026-02-30T00:00:00Z', '2026-12-01T17:00Z', '2026-12-01']) {
      const err = refusal(raw);
      expect(isSwitchboardError(err) && err.code, raw).toBe('invalid_argument');
      expect(isSwitchboardError(err) && err.details.field, raw).toBe('until');
      expect((err as Error).message).toBe('until: must be a duration like 90m or 2h, or an RFC 3339 time like 2026-12-01T17:00:00Z');
    }
  });
});

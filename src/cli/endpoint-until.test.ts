import { describe, expect, it } from 'vitest';
import { parsePresenceUntil } from '../domain/presence/until.ts';
import { untilArg } from './endpoint.ts';
import { CliError } from './output.ts';

const NOW = new Date('2026-06-01T12:00:00.000Z');

/** The board's form field is read by parsePresenceUntil itself; the CLI's --until must read every text the same way. */
const CASES = ['', '  ', '90m', '2h', ' 1h30m ', '2026-12-01T17:00:00Z', '2026-12-01t17:00:00z', '2026-12-01T17:00:00+02:00', '2026-12-01T17:00:00.25Z', 'someday', '12/1', 'Dec 1 2026', '2026-02-30T00:00:00Z', '2026-12-01T17:00Z', '-5m', '1d'];

describe('--until (untilArg)', () => {
  it('agrees with the board on every text: the same instant, or both refuse', () => {
    for (const raw of CASES) {
      let board: Date | null | 'refused';
      try {
        board = parsePresenceUntil(raw, NOW);
      } catch {
        board = 'refused';
      }
      if (board === 'refused') expect(() => untilArg(raw, NOW), raw).toThrow(CliError);
      else expect(untilArg(raw, NOW), raw).toBe(board?.toISOString() ?? null);
    }
  });

  it('sends the API RFC 3339; absent is no end', () => {
    expect(untilArg(undefined, NOW)).toBeNull();
    expect(untilArg('90m', NOW)).toBe('2026-06-01T13:30:00.000Z');
    expect(untilArg('2026-12-01T17:00:00+02:00', NOW)).toBe('2026-12-01T15:00:00.000Z');
  });

  it('a refusal is a usage error (exit 2) naming --until and the text', () => {
    let err: unknown;
    try {
      untilArg('12/1', NOW);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(2);
    expect((err as CliError).message).toBe('--until: "12/1" is neither an RFC 3339 time nor a duration like 90m or 2h');
  });
});

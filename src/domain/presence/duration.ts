import { parseDuration } from '../duration.ts';
import { invalidArgument } from '../errors.ts';

/** clock_in's `for` when absent: one hour (SPEC-0022 REQ "Presence Verbs"). */
export const CLOCK_IN_DEFAULT_MS = 3_600_000;
/** The cap on an agent's clock_in: eight hours (SPEC-0022 Security Requirements). */
export const CLOCK_IN_MAX_MS = 8 * 3_600_000;

const SHAPE = 'must be a duration like "30m", "2h" or "1h30m"';

/**
 * Parses clock_in's `for`: undefined means the 1 h default; otherwise a string of hours, minutes
 * and seconds (`2h`, `30m`, `1h30m`, `45s`, `1.5h`). Zero, negative, unparseable, non-string, or
 * over 8 h is refused with invalid_argument naming `for`. Returns milliseconds.
 */
export function parseClockInDuration(raw: unknown): number {
  if (raw === undefined) return CLOCK_IN_DEFAULT_MS;
  if (typeof raw !== 'string') throw invalidArgument('for', SHAPE);
  if (raw.startsWith('-')) throw invalidArgument('for', 'must be positive (a duration like "30m", "2h" or "1h30m")');
  if (/^0+(?:\.0+)?$/.test(raw)) throw invalidArgument('for', 'must be greater than zero');
  const ms = parseDuration(raw);
  if (ms === null) throw invalidArgument('for', `${SHAPE}, got ${JSON.stringify(raw.length > 40 ? `${raw.slice(0, 40)}…` : raw)}`);
  if (ms <= 0) throw invalidArgument('for', 'must be greater than zero');
  if (ms > CLOCK_IN_MAX_MS) throw invalidArgument('for', 'must be at most 8h (an agent can clock itself in for at most 8 hours)');
  return ms;
}

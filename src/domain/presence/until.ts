import { parseDuration } from '../duration.ts';
import { invalidArgument } from '../errors.ts';

/**
 * RFC 3339 `date-time` (section 5.6), strictly: full date, `T`, hours, minutes AND seconds, an
 * optional fraction, then `Z` or a `+hh:mm`/`-hh:mm` offset. `t` and `z` may be lower case (the
 * RFC's note). The API's own check (zod's `iso.datetime({ offset: true })`) refuses the same
 * shapes, so anything this accepts the API accepts. Date.parse is not used: it takes `12/1`,
 * `Dec 1` and `2026-02-30` (as March 2).
 */
const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d\d):(\d\d))$/i;

/**
 * The instant an RFC 3339 time names, or null when the text is not one: wrong shape, or a field
 * out of range (month 13, February 30, hour 24, second 60, offset +24:00). A leap second (:60)
 * is refused: a Date cannot hold it. Fractions past milliseconds are truncated.
 */
export function parseRfc3339(text: string): Date | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, z, sign, oh, om] = m;
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, s].map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const offsetH = z ? 0 : Number(oh);
  const offsetM = z ? 0 : Number(om);
  if (offsetH > 23 || offsetM > 59) return null;
  const t = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  t.setUTCFullYear(year, month - 1, day);
  if (t.getUTCMonth() !== month - 1 || t.getUTCDate() !== day) return null; // 2026-02-30 rolled over
  t.setUTCHours(hour, minute, second, Number((frac ?? '').padEnd(3, '0').slice(0, 3)));
  const offsetMs = (offsetH * 60 + offsetM) * 60_000 * (sign === '-' ? -1 : 1);
  return new Date(t.getTime() - offsetMs);
}

const UNTIL_SHAPE = 'must be a duration like 90m or 2h, or an RFC 3339 time like 2026-12-01T17:00:00Z';

/**
 * The one reading of an operator's presence `until` (the board's form field and the CLI's
 * `--until`): empty or absent means no end (null); a duration (domain/duration.ts's grammar:
 * 90m, 2h, 1h30m) counts from `now`; otherwise a strict RFC 3339 time (parseRfc3339).
 * Surrounding whitespace is ignored. Anything else throws invalid_argument naming `until`.
 * Whether the time is in the future is the presence plan's rule (planOperatorSet), not this one.
 */
export function parsePresenceUntil(raw: string | undefined, now: Date): Date | null {
  const text = (raw ?? '').trim();
  if (text === '') return null;
  const ms = parseDuration(text);
  if (ms !== null) return new Date(now.getTime() + ms);
  const at = parseRfc3339(text);
  if (at === null) throw invalidArgument('until', UNTIL_SHAPE);
  return at;
}

import { invalidArgument } from '../errors.ts';
import { quote, zoneClock, zoneProblem, type ZoneClock } from './zones.ts';

/**
 * The shift grammar (SPEC-0022 REQ "Shift Schedule"; Harness `operating_hours`, reference B.2-B.8):
 *
 *   shift       := [ ("TZ=" | "CRON_TZ=") zone-name (space|tab)+ ] window { ";" window }
 *   window      := [ day-spec (space|tab)+ ] HH:MM "-" HH:MM
 *   day-spec    := day-item { "," day-item }        day-item := day | day "-" day (may wrap)
 *   day         := mon|tue|wed|thu|fri|sat|sun      (case-insensitive)
 *
 * Where we are stricter than Harness (a string valid here is always valid for Harness):
 * - no prefix means UTC, never the host zone (DESIGN.md decision 3);
 * - zone names in exact case; `Local` refused (see zones.ts, which also documents that legacy IANA
 *   links such as `US/Pacific` are accepted);
 * - hours and minutes are exactly two ASCII digits (`+9:00`, `09:+5` refused);
 * - only ASCII space and tab separate fields; the ends of the whole string and of each window are
 *   trimmed of space, tab, CR and LF; any other whitespace (NBSP, ...) inside a window is refused.
 */

/** Monday = 0 ... Sunday = 6. */
export type Weekday = 0 | 1 | 2 | 3 | 4 | 5 | 6;

export interface ShiftWindow {
  readonly day: Weekday;
  /** Minutes after local midnight, 0..1439; inclusive. */
  readonly start: number;
  /**
   * Minutes after local midnight, 0..1440; exclusive. 1440 is `24:00`. An end before the start
   * is an overnight window: it runs from `start` on `day` to `end` on the following day.
   */
  readonly end: number;
}

export interface Shift {
  /** The exact IANA zone name, `UTC` when the input had no prefix. */
  readonly zone: string;
  /** `TZ=<zone> ` then one window per day sorted by (day, start, end), joined by `"; "`. */
  readonly canonical: string;
  /** One entry per (day, start, end), sorted and de-duplicated. */
  readonly windows: readonly ShiftWindow[];
}

export const DAY_NAMES = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'] as const;

const MINUTES_PER_DAY = 1440;
const MINUTES_PER_WEEK = 7 * MINUTES_PER_DAY;
const MS_PER_MINUTE = 60_000;
const MS_PER_DAY = 86_400_000;
const MS_PER_WEEK = 7 * MS_PER_DAY;
/** Every shift repeats weekly, so a week and a day (DST included) is a complete search. */
export const BOUNDARY_LOOKAHEAD_MS = 8 * MS_PER_DAY;
/** Offsets are checked at least this often while walking, so two transitions cannot hide. */
const MAX_STEP_MS = MS_PER_DAY;
/** 1970-01-01 was a Thursday: shifting local time by 3 days makes weeks start on Monday. */
const EPOCH_TO_MONDAY_MS = 3 * MS_PER_DAY;
/** Instants are supported from 0001-01-02 (Intl has no era-less years before 1 CE) to the Date max. */
const MIN_INSTANT_MS = -62_135_510_400_000;
const MAX_INSTANT_MS = 8.64e15;

// ---------------------------------------------------------------------------------------------
// Parsing

const fail = (reason: string): never => {
  throw invalidArgument('shift', reason);
};

const EDGE_SPACE = /^[ \t\r\n]+|[ \t\r\n]+$/g;
const trimEnds = (s: string) => s.replace(EDGE_SPACE, '');
const TWO_DIGITS = /^[0-9]{2}$/;
/** Whitespace other than space and tab. */
const OTHER_SPACE = /[^\S \t]/u;

function parseTime(text: string, role: 'start' | 'end'): number {
  const colon = text.indexOf(':');
  if (colon < 0) return fail(`malformed time ${quote(text)} (want HH:MM)`);
  const hh = text.slice(0, colon);
  const mm = text.slice(colon + 1);
  if (!TWO_DIGITS.test(hh)) return fail(`malformed hour in ${quote(text)} (want two digits, HH:MM)`);
  if (!TWO_DIGITS.test(mm)) return fail(`malformed minute in ${quote(text)} (want two digits, HH:MM)`);
  const h = Number(hh);
  const m = Number(mm);
  if (h === 24 && m === 0) {
    if (role === 'start') return fail(`24:00 is valid only as a window's end (in ${quote(text)})`);
    return MINUTES_PER_DAY;
  }
  if (h > 23 || m > 59) return fail(`time ${quote(text)} is out of range (00:00-23:59, or 24:00 as an end)`);
  return h * 60 + m;
}

function parseDay(name: string, item: string): Weekday {
  const i = DAY_NAMES.findIndex((d) => d.toLowerCase() === name.toLowerCase());
  const where = name === item ? '' : ` in ${quote(item)}`;
  if (i < 0) return fail(`unknown day ${quote(name)}${where} (want Mon, Tue, Wed, Thu, Fri, Sat or Sun)`);
  return i as Weekday;
}

function parseDays(spec: string): Weekday[] {
  const days = new Set<Weekday>();
  for (const item of spec.split(',')) {
    if (item === '') fail(`empty day in ${quote(spec)}`);
    const dash = item.indexOf('-');
    if (dash < 0) {
      days.add(parseDay(item, item));
      continue;
    }
    const from = parseDay(item.slice(0, dash), item);
    const to = parseDay(item.slice(dash + 1), item);
    // Inclusive, wrapping: Fri-Mon = Fri, Sat, Sun, Mon; Mon-Mon = Monday only.
    for (let d = from; ; d = ((d + 1) % 7) as Weekday) {
      days.add(d);
      if (d === to) break;
    }
  }
  return [...days];
}

function parseWindow(segment: string, out: ShiftWindow[]): void {
  const other = OTHER_SPACE.exec(segment);
  if (other) {
    const cp = other[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    fail(`window ${quote(segment)} is malformed: U+${cp} is not a field separator (only space and tab separate fields)`);
  }
  const fields = segment.split(/[ \t]+/);
  if (fields.length > 2) fail(`window ${quote(segment)} is malformed (want "[days] HH:MM-HH:MM")`);
  const range = fields.length === 2 ? fields[1]! : fields[0]!;
  const days: Weekday[] = fields.length === 2 ? parseDays(fields[0]!) : [0, 1, 2, 3, 4, 5, 6];
  const ends = range.split('-');
  if (ends.length !== 2) fail(`malformed time range ${quote(range)} (want HH:MM-HH:MM)`);
  const start = parseTime(ends[0]!, 'start');
  const end = parseTime(ends[1]!, 'end');
  if (start === end) fail(`window ${quote(segment)}: start and end must not be equal`);
  for (const day of days) out.push({ day, start, end });
}

const hhmm = (minutes: number) => `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;

const parseCache = new Map<string, Shift>();
const PARSE_CACHE_MAX = 512;

/**
 * Parses a shift expression. Throws invalid_argument naming the field `shift`, with a reason that
 * names the problem (e.g. `unknown time zone "Mars/Olympus"`). The result is immutable and may be
 * shared: parsing the same text again returns the same object.
 */
export function parseShift(input: string): Shift {
  if (typeof input !== 'string') return fail('must be a string');
  const cached = parseCache.get(input);
  if (cached) return cached;

  const text = trimEnds(input);
  if (text === '') return fail('must not be blank');
  let zone = 'UTC';
  let body = text;
  const prefix = text.startsWith('TZ=') ? 'TZ=' : text.startsWith('CRON_TZ=') ? 'CRON_TZ=' : null;
  if (prefix !== null) {
    // The zone token ends at the first space or tab (nothing else: `TZ=UTC\nMon` names `UTC\nMon`).
    const sep = /[ \t]/.exec(text);
    const cut = sep ? sep.index : text.length;
    zone = text.slice(prefix.length, cut);
    body = trimEnds(text.slice(cut));
    if (zone === '') fail(`missing zone name after ${quote(prefix)}`);
    const problem = zoneProblem(zone);
    if (problem !== null) fail(problem);
    if (body === '') fail(`must specify at least one window after the zone (e.g. "${prefix}${zone} Mon-Fri 09:00-17:00")`);
  }

  const raw: ShiftWindow[] = [];
  const segments = body.split(';');
  segments.forEach((seg, i) => {
    const segment = trimEnds(seg);
    if (segment === '') fail(`empty window (window ${i + 1} of ${segments.length}; check for a stray ";")`);
    parseWindow(segment, raw);
  });

  raw.sort((a, b) => a.day - b.day || a.start - b.start || a.end - b.end);
  const windows = raw.filter((w, i) => {
    const prev = raw[i - 1];
    return !prev || prev.day !== w.day || prev.start !== w.start || prev.end !== w.end;
  });
  const canonical = `TZ=${zone} ${windows.map((w) => `${DAY_NAMES[w.day]} ${hhmm(w.start)}-${hhmm(w.end)}`).join('; ')}`;
  const shift: Shift = Object.freeze({ zone, canonical, windows: Object.freeze(windows.map((w) => Object.freeze(w))) });

  if (parseCache.size >= PARSE_CACHE_MAX) parseCache.delete(parseCache.keys().next().value!);
  parseCache.set(input, shift);
  return shift;
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/** A [from, to) span of instants over which membership is known to be constant and to change at `to`. */
interface Span {
  from: number;
  to: number;
  inside: boolean;
}

interface Compiled {
  clock: ZoneClock;
  /** Sorted, merged [start, end) intervals in minutes since local Monday 00:00, within [0, 10080]. */
  intervals: Array<readonly [number, number]>;
  /** Sorted minutes since local Monday 00:00 at which wall-clock membership changes. Empty: always in. */
  labels: number[];
  /** Recently computed spans (a tiny ring), so repeated evaluations are O(1). */
  spans: Span[];
  nextSpan: number;
}

const SPAN_MEMO = 8;
const compiledShifts = new WeakMap<Shift, Compiled>();

function compile(shift: Shift): Compiled {
  const hit = compiledShifts.get(shift);
  if (hit) return hit;
  const raw: Array<[number, number]> = [];
  for (const w of shift.windows) {
    const s = w.day * MINUTES_PER_DAY + w.start;
    const e = (w.end < w.start ? w.day + 1 : w.day) * MINUTES_PER_DAY + w.end;
    if (e > MINUTES_PER_WEEK) raw.push([s, MINUTES_PER_WEEK], [0, e - MINUTES_PER_WEEK]);
    else raw.push([s, e]);
  }
  raw.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const intervals: Array<[number, number]> = [];
  for (const [s, e] of raw) {
    const last = intervals[intervals.length - 1];
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else intervals.push([s, e]);
  }
  const insideMinute = (m: number) => intervals.some(([s, e]) => s <= m && m < e);
  const candidates = new Set<number>();
  for (const [s, e] of intervals) candidates.add(s % MINUTES_PER_WEEK).add(e % MINUTES_PER_WEEK);
  const labels = [...candidates]
    .filter((m) => insideMinute(m) !== insideMinute((m + MINUTES_PER_WEEK - 1) % MINUTES_PER_WEEK))
    .sort((a, b) => a - b);
  const compiled: Compiled = { clock: zoneClock(shift.zone), intervals, labels, spans: [], nextSpan: 0 };
  compiledShifts.set(shift, compiled);
  return compiled;
}

const mod = (a: number, n: number) => ((a % n) + n) % n;

/** Membership at a local wall-clock time (ms on the local "epoch" scale: instant + offset). */
function insideAtLocal(c: Compiled, local: number): boolean {
  const pos = mod(local + EPOCH_TO_MONDAY_MS, MS_PER_WEEK);
  for (const [s, e] of c.intervals) {
    if (pos < s * MS_PER_MINUTE) return false;
    if (pos < e * MS_PER_MINUTE) return true;
  }
  return false;
}

/** The first label time strictly after a local wall-clock time, on the same local scale. */
function nextLabelAfter(c: Compiled, local: number): number {
  const pos = mod(local + EPOCH_TO_MONDAY_MS, MS_PER_WEEK);
  const weekStart = local - pos;
  for (const l of c.labels) if (l * MS_PER_MINUTE > pos) return weekStart + l * MS_PER_MINUTE;
  return weekStart + MS_PER_WEEK + c.labels[0]! * MS_PER_MINUTE;
}

function instantMs(t: Date, what: string): number {
  const ms = t instanceof Date ? t.getTime() : NaN;
  if (Number.isNaN(ms)) throw new RangeError(`${what}: not a valid Date`);
  if (ms < MIN_INSTANT_MS) throw new RangeError(`${what}: instants before 0001-01-02 are not supported`);
  return ms;
}

function memoLookup(c: Compiled, ms: number): Span | undefined {
  for (const s of c.spans) if (s.from <= ms && ms < s.to) return s;
  return undefined;
}

function memoStore(c: Compiled, span: Span): void {
  c.spans[c.nextSpan] = span;
  c.nextSpan = (c.nextSpan + 1) % SPAN_MEMO;
}

/**
 * The first instant, in ms, with an offset different from `offLo`, given that `lo` has offset
 * `offLo` and `hi` (> lo) does not. Offsets only change on whole seconds, so this bisects seconds.
 */
function transitionBetween(clock: ZoneClock, lo: number, hi: number, offLo: number): { at: number; offset: number } {
  let a = Math.floor(lo / 1000);
  let b = Math.floor(hi / 1000);
  let offB = clock.offsetAt(b * 1000);
  while (b - a > 1) {
    const mid = Math.floor((a + b) / 2);
    const o = clock.offsetAt(mid * 1000);
    if (o === offLo) a = mid;
    else {
      b = mid;
      offB = o;
    }
  }
  return { at: b * 1000, offset: offB };
}

function insideAt(c: Compiled, ms: number): boolean {
  if (c.labels.length === 0) return c.intervals.length > 0;
  const span = memoLookup(c, ms);
  if (span) return span.inside;
  return insideAtLocal(c, ms + c.clock.offsetAt(ms));
}

/** Whether instant `t` is inside the shift: decided on the wall clock in the shift's zone. */
export function isInShift(shift: Shift, t: Date): boolean {
  return insideAt(compile(shift), instantMs(t, 'isInShift'));
}

/**
 * Exact next boundary (reference B.7, "Recommended for us"): walk the wall-clock label times
 * (window starts and ends where membership really changes), assuming a constant offset between
 * two candidates; when the offset at the candidate differs, bisect the transition instant and
 * make it the candidate (a DST jump can change membership by itself). The first candidate whose
 * membership differs from membership at t is the answer. Exact to the millisecond.
 */
function nextBoundaryMs(c: Compiled, t: number): number | null {
  if (c.labels.length === 0) return null;
  const span = memoLookup(c, t);
  if (span) return span.to;
  const clock = c.clock;
  const limit = Math.min(t + BOUNDARY_LOOKAHEAD_MS, MAX_INSTANT_MS);
  let cur = t;
  let off = clock.offsetAt(cur);
  const inside = insideAtLocal(c, cur + off);
  for (;;) {
    const local = cur + off;
    let next = cur + (nextLabelAfter(c, local) - local);
    next = Math.min(next, cur + MAX_STEP_MS, limit);
    let offNext = clock.offsetAt(next);
    if (offNext !== off) ({ at: next, offset: offNext } = transitionBetween(clock, cur, next, off));
    if (insideAtLocal(c, next + offNext) !== inside) {
      memoStore(c, { from: t, to: next, inside });
      return next;
    }
    if (next >= limit) return null;
    cur = next;
    off = offNext;
  }
}

/**
 * The first instant strictly after `t` at which membership differs from membership at `t`, or
 * null when there is none within 8 days (then there is none at all, except for a window that a
 * DST gap swallows on every occurrence within those 8 days).
 */
export function nextShiftBoundary(shift: Shift, t: Date): Date | null {
  const next = nextBoundaryMs(compile(shift), instantMs(t, 'nextShiftBoundary'));
  return next === null ? null : new Date(next);
}

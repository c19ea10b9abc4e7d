import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { instant2026, shiftText } from './arbitraries.testkit.ts';
import { isInShift, nextShiftBoundary, parseShift, type Shift } from './index.ts';

const LA = 'TZ=America/Los_Angeles Mon-Fri 09:00-13:00';
const LUNCH = 'TZ=UTC Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00';
const FRI_NIGHT = 'TZ=UTC Fri 22:00-02:00';
const FRI_MON = 'TZ=UTC Fri-Mon 10:00-11:00';
const TOUCH = 'TZ=UTC Mon 09:00-12:00; Mon 12:00-17:00';
const MIDNIGHT = 'TZ=UTC Mon 22:00-00:00';
const UTC_SHIFT = 'TZ=UTC Mon-Fri 09:00-13:00';
const NY_GAP = 'TZ=America/New_York 01:30-02:30';
const NY_REPEAT = 'TZ=America/New_York 01:00-02:00';
const NY_SHORT = 'TZ=America/New_York 01:30-01:45';

/** Reference B.9, the 33 evaluation vectors: (expression, t) -> membership at t and next(t). */
const EVALUATION_VECTORS: Array<[string, string, string, boolean, string | null]> = [
  ['E1', LA, '2026-09-21T16:00:00Z', true, '2026-09-21T20:00:00Z'],
  ['E2', LA, '2026-09-21T19:59:59Z', true, '2026-09-21T20:00:00Z'],
  ['E3', LA, '2026-09-21T20:00:00Z', false, '2026-09-22T16:00:00Z'],
  ['E4', LA, '2026-09-26T16:00:00Z', false, '2026-09-28T16:00:00Z'],
  ['E5', LUNCH, '2026-09-21T12:30:00Z', false, '2026-09-21T13:00:00Z'],
  ['E6', LUNCH, '2026-09-21T13:00:00Z', true, '2026-09-21T17:00:00Z'],
  ['E7', FRI_NIGHT, '2026-09-25T23:00:00Z', true, '2026-09-26T02:00:00Z'],
  ['E8', FRI_NIGHT, '2026-09-26T01:59:00Z', true, '2026-09-26T02:00:00Z'],
  ['E9', FRI_NIGHT, '2026-09-26T02:00:00Z', false, '2026-10-02T22:00:00Z'],
  ['E10', FRI_NIGHT, '2026-09-25T21:59:00Z', false, '2026-09-25T22:00:00Z'],
  ['E11', 'TZ=UTC Sun 22:00-02:00', '2026-09-28T01:00:00Z', true, '2026-09-28T02:00:00Z'],
  ['E12', FRI_MON, '2026-09-27T10:30:00Z', true, '2026-09-27T11:00:00Z'],
  ['E13', FRI_MON, '2026-09-29T10:30:00Z', false, '2026-10-02T10:00:00Z'],
  ['E14', 'TZ=UTC Mon-Sun 00:00-24:00', '2026-09-21T12:00:00Z', true, null],
  ['E15', TOUCH, '2026-09-21T10:00:00Z', true, '2026-09-21T17:00:00Z'],
  ['E16', MIDNIGHT, '2026-09-21T23:59:59Z', true, '2026-09-22T00:00:00Z'],
  ['E17', MIDNIGHT, '2026-09-22T00:00:00Z', false, '2026-09-28T22:00:00Z'],
  ['E18', UTC_SHIFT, '2026-09-21T08:00:00Z', false, '2026-09-21T09:00:00Z'],
  ['E19', UTC_SHIFT, '2026-09-25T14:00:00Z', false, '2026-09-28T09:00:00Z'],
  ['E20', UTC_SHIFT, '2026-09-21T09:00:00Z', true, '2026-09-21T13:00:00Z'],
  ['E21', UTC_SHIFT, '2026-09-21T10:00:00Z', true, '2026-09-21T13:00:00Z'],
  ['E22', NY_GAP, '2026-03-08T06:59:59Z', true, '2026-03-08T07:00:00Z'],
  ['E23', NY_GAP, '2026-03-08T07:00:00Z', false, '2026-03-09T05:30:00Z'],
  ['E24', NY_GAP, '2026-03-08T06:00:00Z', false, '2026-03-08T06:30:00Z'],
  ['E25', NY_GAP, '2026-03-08T06:59:00Z', true, '2026-03-08T07:00:00Z'],
  ['E26', 'TZ=America/New_York 02:10-02:40', '2026-03-08T06:00:00Z', false, '2026-03-09T06:10:00Z'],
  ['E27', 'TZ=America/New_York 02:15-04:00', '2026-03-08T06:00:00Z', false, '2026-03-08T07:00:00Z'],
  ['E28', NY_REPEAT, '2026-11-01T05:30:00Z', true, '2026-11-01T07:00:00Z'],
  ['E29', NY_REPEAT, '2026-11-01T06:30:00Z', true, '2026-11-01T07:00:00Z'],
  ['E30', NY_REPEAT, '2026-11-01T04:59:00Z', false, '2026-11-01T05:00:00Z'],
  ['E31', NY_SHORT, '2026-11-01T05:40:00Z', true, '2026-11-01T05:45:00Z'],
  ['E32', NY_SHORT, '2026-11-01T05:50:00Z', false, '2026-11-01T06:30:00Z'],
  ['E33', 'TZ=Europe/London Sun 00:30-03:30', '2026-03-29T00:45:00Z', true, '2026-03-29T02:30:00Z'],
];

describe('isInShift / nextShiftBoundary: the 33 reference evaluation vectors (B.9)', () => {
  it('has all 33', () => {
    expect(EVALUATION_VECTORS.map(([id]) => id)).toEqual(Array.from({ length: 33 }, (_, i) => `E${i + 1}`));
  });

  it.each(EVALUATION_VECTORS)('%s %s at %s', (_id, expr, t, inside, next) => {
    const s = parseShift(expr);
    expect(isInShift(s, new Date(t))).toBe(inside);
    expect(nextShiftBoundary(s, new Date(t))).toEqual(next === null ? null : new Date(next));
  });

  it('is exact to the millisecond off whole seconds', () => {
    const s = parseShift(UTC_SHIFT);
    expect(nextShiftBoundary(s, new Date('2026-09-21T12:59:59.999Z'))).toEqual(new Date('2026-09-21T13:00:00Z'));
    expect(nextShiftBoundary(s, new Date('2026-09-21T08:59:59.001Z'))).toEqual(new Date('2026-09-21T09:00:00Z'));
    expect(nextShiftBoundary(parseShift(NY_GAP), new Date('2026-03-08T06:59:59.999Z'))).toEqual(new Date('2026-03-08T07:00:00Z'));
    expect(nextShiftBoundary(parseShift(NY_SHORT), new Date('2026-11-01T05:50:00.123Z'))).toEqual(new Date('2026-11-01T06:30:00Z'));
  });

  it('handles 30-minute DST (Lord Howe) and half-hour zones (Kolkata)', () => {
    // 2026-10-04 02:00 LHST (+10:30) jumps to 02:30 LHDT (+11:00), i.e. at 2026-10-03T15:30Z.
    const lh = parseShift('TZ=Australia/Lord_Howe Sun 02:00-02:30');
    expect(isInShift(lh, new Date('2026-10-03T15:29:00Z'))).toBe(false);
    expect(nextShiftBoundary(lh, new Date('2026-10-03T15:00:00Z'))).toEqual(new Date('2026-10-10T15:00:00Z')); // swallowed, next Sunday 02:00 LHDT
    // 2026-04-05 02:00 LHDT falls back to 01:30 LHST at 2026-04-04T15:00Z: 01:30-02:00 runs twice.
    const lh2 = parseShift('TZ=Australia/Lord_Howe Sun 01:30-02:00');
    expect(isInShift(lh2, new Date('2026-04-04T14:45:00Z'))).toBe(true); // 01:45 LHDT
    expect(nextShiftBoundary(lh2, new Date('2026-04-04T14:45:00Z'))).toEqual(new Date('2026-04-04T15:30:00Z'));
    const kol = parseShift('TZ=Asia/Kolkata Mon-Fri 09:00-17:30');
    expect(isInShift(kol, new Date('2026-09-21T03:30:00Z'))).toBe(true); // 09:00 IST
    expect(nextShiftBoundary(kol, new Date('2026-09-21T03:30:00Z'))).toEqual(new Date('2026-09-21T12:00:00Z'));
  });

  it('returns null when every occurrence within 8 days falls in a DST gap (as Harness does)', () => {
    const s = parseShift('TZ=America/New_York Sun 02:10-02:40');
    expect(nextShiftBoundary(s, new Date('2026-03-01T08:00:00Z'))).toBeNull(); // Sun 03:00 EST; 03-08 is swallowed
    expect(nextShiftBoundary(s, new Date('2026-03-08T06:00:00Z'))).toEqual(new Date('2026-03-15T06:10:00Z'));
  });

  it('refuses an invalid Date', () => {
    expect(() => isInShift(parseShift(UTC_SHIFT), new Date(Number.NaN))).toThrow(RangeError);
    expect(() => nextShiftBoundary(parseShift(UTC_SHIFT), new Date(Number.NaN))).toThrow(RangeError);
  });
});

// ---------------------------------------------------------------------------------------------
// An independent membership oracle: the B.6 rule applied window by window to the wall clock
// that Intl.formatToParts reports, sharing no code with the implementation.

const WEEKDAY: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };
const formatters = new Map<string, Intl.DateTimeFormat>();
function wallClock(zone: string, ms: number): { wd: number; secs: number } {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-GB', { timeZone: zone, weekday: 'short', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
    formatters.set(zone, f);
  }
  const p = Object.fromEntries(f.formatToParts(ms).map((x) => [x.type, x.value]));
  return { wd: WEEKDAY[p.weekday!]!, secs: Number(p.hour) * 3600 + Number(p.minute) * 60 + Number(p.second) + (((ms % 1000) + 1000) % 1000) / 1000 };
}
function oracleIn(s: Shift, ms: number): boolean {
  const { wd, secs } = wallClock(s.zone, ms);
  const prev = (wd + 6) % 7;
  return s.windows.some((w) => {
    const start = w.start * 60;
    const end = w.end * 60;
    if (w.end > w.start) return w.day === wd && start <= secs && secs < end;
    return (w.day === wd && secs >= start) || (w.day === prev && secs < end);
  });
}

const EIGHT_DAYS = 8 * 86_400_000;

describe('nextShiftBoundary (property, DST in 2026 across six zones)', () => {
  it('membership agrees with the independent oracle, is constant on [t, b) and differs at b', () => {
    fc.assert(
      fc.property(shiftText(), instant2026, fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 6, maxLength: 6 }), (text, t, fractions) => {
        const s = parseShift(text);
        const inside = isInShift(s, new Date(t));
        expect(inside).toBe(oracleIn(s, t));
        const b = nextShiftBoundary(s, new Date(t));
        if (b === null) {
          for (const f of [...fractions, 1]) expect(oracleIn(s, t + Math.floor(f * EIGHT_DAYS))).toBe(inside);
          return;
        }
        const bm = b.getTime();
        expect(bm).toBeGreaterThan(t);
        expect(bm - t).toBeLessThanOrEqual(EIGHT_DAYS);
        expect(oracleIn(s, bm - 1)).toBe(inside);
        for (const f of fractions) expect(oracleIn(s, Math.min(bm - 1, t + Math.floor(f * (bm - t))))).toBe(inside);
        expect(oracleIn(s, bm)).toBe(!inside);
        expect(isInShift(s, b)).toBe(!inside);
        expect(isInShift(s, new Date(bm - 1))).toBe(inside);
      }),
      { numRuns: 400 },
    );
  });

  it('agrees with a minute-by-minute scan of the oracle (fewer runs: the scan is slow)', () => {
    fc.assert(
      fc.property(shiftText(['America/New_York', 'Australia/Lord_Howe', 'Europe/London']), instant2026, (text, t) => {
        const s = parseShift(text);
        const b = nextShiftBoundary(s, new Date(t));
        const inside = oracleIn(s, t);
        // Membership only changes on whole minutes (labels) or whole seconds (transitions, here
        // all on whole minutes), so scanning whole minutes finds the first change.
        const end = b === null ? t + EIGHT_DAYS : b.getTime();
        for (let m = Math.floor(t / 60_000) * 60_000 + 60_000; m < end; m += 60_000) {
          if (oracleIn(s, m) !== inside) throw new Error(`${text}: change at ${new Date(m).toISOString()} before ${b?.toISOString() ?? 'null'} (t=${new Date(t).toISOString()})`);
        }
      }),
      { numRuns: 25 },
    );
  });
});

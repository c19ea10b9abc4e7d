import fc from 'fast-check';

/**
 * fast-check generators shared by the presence tests (not a test file itself, so importing it
 * does not register anyone's tests twice).
 */

const DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
const two = (n: number) => String(n).padStart(2, '0');
const randomCase = (s: string) =>
  fc.array(fc.boolean(), { minLength: s.length, maxLength: s.length }).map((up) => [...s].map((ch, i) => (up[i] ? ch.toUpperCase() : ch.toLowerCase())).join(''));
const dayItem = fc.oneof(
  fc.constantFrom(...DAYS).chain(randomCase),
  fc.tuple(fc.constantFrom(...DAYS), fc.constantFrom(...DAYS)).map(([a, b]) => `${a}-${b}`),
);
const sep = fc.constantFrom(' ', '\t', '  ', ' \t ');
/** Whole minutes, with a bias to the hours and half hours around DST transitions. */
const minuteOfDay = fc.oneof(fc.integer({ min: 0, max: 1439 }), fc.constantFrom(0, 60, 90, 120, 130, 150, 180, 240, 540, 780, 1380));
const timeRange = fc
  .tuple(minuteOfDay, fc.oneof(minuteOfDay, fc.constant(1440)))
  .filter(([s, e]) => s !== e)
  .map(([s, e]) => `${two(Math.floor(s / 60))}:${two(s % 60)}-${two(Math.floor(e / 60))}:${two(e % 60)}`);
const window = fc
  .tuple(fc.option(fc.array(dayItem, { minLength: 1, maxLength: 3 }), { nil: undefined }), sep, timeRange)
  .map(([days, s, range]) => (days ? `${days.join(',')}${s}${range}` : range));

export const TEST_ZONES = ['UTC', 'America/New_York', 'Europe/London', 'Australia/Lord_Howe', 'Asia/Kolkata', 'America/Los_Angeles'] as const;

/** A valid shift expression, in any accepted spelling. */
export const shiftText = (zones: readonly string[] = TEST_ZONES) =>
  fc
    .tuple(
      fc.option(fc.tuple(fc.constantFrom('TZ=', 'CRON_TZ='), fc.constantFrom(...zones), sep), { nil: undefined }),
      fc.array(fc.tuple(fc.constantFrom(';', ' ; ', ';\t'), window), { minLength: 1, maxLength: 4 }),
    )
    .map(([prefix, ws]) => `${prefix ? prefix.join('') : ''}${ws.map(([s, w], i) => (i === 0 ? w : `${s}${w}`)).join('')}`);

/** 2026, with extra weight on the days around the DST transitions of the test zones. */
export const TRANSITIONS_2026 = [
  '2026-03-08T07:00:00Z', // America/New_York spring forward
  '2026-11-01T06:00:00Z', // America/New_York fall back
  '2026-03-08T10:00:00Z', // America/Los_Angeles
  '2026-11-01T09:00:00Z',
  '2026-03-29T01:00:00Z', // Europe/London
  '2026-10-25T01:00:00Z',
  '2026-04-04T15:00:00Z', // Australia/Lord_Howe: 02:00 LHDT -> 01:30 LHST
  '2026-10-03T15:30:00Z', // Australia/Lord_Howe: 02:00 LHST -> 02:30 LHDT
].map((s) => Date.parse(s));
export const instant2026 = fc.oneof(
  fc.integer({ min: Date.parse('2026-01-01T00:00:00Z'), max: Date.parse('2027-01-01T00:00:00Z') }),
  fc.tuple(fc.constantFrom(...TRANSITIONS_2026), fc.integer({ min: -9 * 86_400_000, max: 2 * 86_400_000 })).map(([t, d]) => t + d),
  // whole minutes near a transition, where labels sit
  fc.tuple(fc.constantFrom(...TRANSITIONS_2026), fc.integer({ min: -3 * 1440, max: 1440 })).map(([t, m]) => t + m * 60_000),
);


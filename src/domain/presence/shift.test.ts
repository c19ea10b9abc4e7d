import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isSwitchboardError } from '../errors.ts';
import { instant2026, shiftText } from './arbitraries.testkit.ts';
import { isInShift, nextShiftBoundary, parseShift } from './index.ts';

/** The reason a parse fails with, after checking it is invalid_argument naming `shift`. */
function reasonOf(input: string): string {
  try {
    parseShift(input);
  } catch (e) {
    if (!isSwitchboardError(e)) throw e;
    expect(e.code).toBe('invalid_argument');
    expect(e.details.field).toBe('shift');
    expect(e.message.startsWith('shift: ')).toBe(true);
    return e.message;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

type Verdict = { windows: number } | { reason: string };
const ok = (windows: number): Verdict => ({ windows });
const bad = (reason: string): Verdict => ({ reason });

/**
 * Reference B.9, all 80 parse vectors. Where the "Ours" column differs from Harness, we follow
 * "Ours" (29, 30, 78, 79, 80). Vector 28 (legacy alias) is decided: accepted (see zones.ts).
 */
const PARSE_VECTORS: Array<[number, string, Verdict]> = [
  [1, '09:00-13:00', ok(7)],
  [2, 'Mon-Fri 09:00-13:00', ok(5)],
  [3, 'TZ=America/Los_Angeles Mon-Fri 09:00-13:00', ok(5)],
  [4, 'CRON_TZ=UTC Mon-Fri 09:00-13:00', ok(5)],
  [5, 'Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00', ok(10)],
  [6, 'Mon-Fri 09:00-12:00 ; Mon-Fri 13:00-17:00', ok(10)],
  [7, 'Sat,Sun 10:00-12:00', ok(2)],
  [8, 'Sun-Thu 22:00-02:00', ok(5)],
  [9, 'Mon-Sun 00:00-24:00', ok(7)],
  [10, 'Fri 22:00-02:00', ok(1)],
  [11, 'Fri-Mon 10:00-11:00', ok(4)],
  [12, '  Mon-Fri   09:00-13:00  ', ok(5)],
  [13, 'mon-fri 09:00-13:00', ok(5)],
  [14, 'MON,wEd,Fri 09:00-10:00', ok(3)],
  [15, 'Mon-Mon 09:00-10:00', ok(1)],
  [16, 'Tue-Mon 09:00-10:00', ok(7)],
  [17, 'Mon,Mon-Tue 09:00-10:00', ok(2)],
  [18, 'Mon 22:00-00:00', ok(1)],
  [19, 'Mon 00:00-24:00', ok(1)],
  [20, 'Mon 12:00-24:00', ok(1)],
  [21, '23:59-24:00', ok(7)],
  [22, 'Mon\t09:00-10:00', ok(1)],
  [23, 'TZ=UTC\tMon 09:00-10:00', ok(1)],
  [24, 'TZ=UTC   Mon 09:00-10:00', ok(1)],
  [25, 'Mon 09:00-12:00; Mon 12:00-17:00', ok(2)],
  [26, 'TZ=Europe/London Sun 00:30-03:30', ok(1)],
  [27, 'TZ=Etc/GMT+5 09:00-17:00', ok(7)],
  [28, 'TZ=US/Pacific 09:00-17:00', ok(7)], // decided: exact-case IANA link, known to Intl
  [29, '+9:00-13:00', bad('malformed hour')], // Ours (Harness: valid)
  [30, '09:+5-13:00', bad('malformed minute')], // Ours (Harness: valid)
  [31, '', bad('must not be blank')],
  [32, '   ', bad('must not be blank')],
  [33, 'Mon 09:00-09:00', bad('start and end must not be equal')],
  [34, 'Mon 00:00-00:00', bad('start and end must not be equal')],
  [35, 'TZ=Mars/Olympus 09:00-13:00', bad('unknown time zone "Mars/Olympus"')],
  [36, 'TZ= 09:00-13:00', bad('missing zone name')],
  [37, 'TZ=', bad('missing zone name')],
  [38, 'TZ=UTC', bad('must specify at least one window')],
  [39, 'TZ=UTC ', bad('must specify at least one window')],
  [40, 'tz=UTC 09:00-13:00', bad('unknown day "tz=UTC"')],
  [41, 'TZ = UTC 09:00-13:00', bad('malformed (want "[days] HH:MM-HH:MM")')],
  [42, 'TZ=UTC TZ=UTC 09:00-13:00', bad('unknown day "TZ=UTC"')],
  [43, 'Xyz 09:00-13:00', bad('unknown day "Xyz"')],
  [44, 'Monday 09:00-13:00', bad('unknown day "Monday"')],
  [45, 'Tues 09:00-13:00', bad('unknown day "Tues"')],
  [46, 'Mon-Xyz 09:00-13:00', bad('unknown day "Xyz"')],
  [47, 'Mon-Wed-Fri 09:00-13:00', bad('unknown day "Wed-Fri"')],
  [48, 'Mon- 09:00-13:00', bad('unknown day ""')],
  [49, '-Mon 09:00-13:00', bad('unknown day ""')],
  [50, 'Mon,,Tue 09:00-13:00', bad('empty day')],
  [51, 'Mon, 09:00-13:00', bad('empty day')],
  [52, ',Mon 09:00-13:00', bad('empty day')],
  [53, 'Mon, Tue 09:00-13:00', bad('malformed (want "[days] HH:MM-HH:MM")')],
  [54, 'Mon - Fri 09:00-13:00', bad('malformed (want "[days] HH:MM-HH:MM")')],
  [55, 'Mon Tue 09:00-13:00', bad('malformed (want "[days] HH:MM-HH:MM")')],
  [56, 'Mon 09:00 - 13:00', bad('malformed (want "[days] HH:MM-HH:MM")')],
  [57, '09:00-13:00 Mon', bad('unknown day "09:00"')],
  [58, 'Mon', bad('malformed time range "Mon"')],
  [59, 'Mon-Fri', bad('malformed time "Mon"')],
  [60, '25:00-13:00', bad('out of range')],
  [61, '09:60-13:00', bad('out of range')],
  [62, '9:00-13:00', bad('malformed hour')],
  [63, '09:0-13:00', bad('malformed minute')],
  [64, '0900-1300', bad('malformed time "0900"')],
  [65, '09:00-13:00-15:00', bad('malformed time range')],
  [66, '09:00--13:00', bad('malformed time range')],
  [67, '24:00-13:00', bad("24:00 is valid only as a window's end")],
  [68, 'Mon 24:00-01:00', bad("24:00 is valid only as a window's end")],
  [69, 'Mon 12:00-24:01', bad('out of range')],
  [70, '09:00-', bad('malformed time ""')],
  [71, '09:00:00-13:00', bad('malformed minute')],
  [72, '09:00-13:00;', bad('empty window')],
  [73, ';09:00-13:00', bad('empty window')],
  [74, '09:00-10:00;;11:00-12:00', bad('empty window')],
  [75, 'Mon\u2013Fri 09:00-13:00', bad('unknown day')],
  [76, '09.00-13.00', bad('malformed time "09.00"')],
  [77, 'TZ=UTC\nMon 09:00-10:00', bad('unknown time zone "UTC\\nMon"')],
  [78, 'TZ=utc 09:00-10:00', bad('unknown time zone "utc"')], // Ours (Harness: host-dependent)
  [79, 'TZ=Local 09:00-10:00', bad('unknown time zone "Local"')], // Ours (Harness: valid)
  [80, 'Mon\u00A009:00-10:00', bad('U+00A0 is not a field separator')], // Ours (Harness: valid)
];

describe('parseShift: the 80 reference parse vectors (B.9)', () => {
  it('has all 80', () => {
    expect(PARSE_VECTORS.map(([n]) => n)).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));
  });

  it.each(PARSE_VECTORS)('#%i %j', (_n, input, verdict) => {
    if ('windows' in verdict) {
      const s = parseShift(input);
      expect(s.windows).toHaveLength(verdict.windows);
      expect(s.canonical.startsWith(`TZ=${s.zone} `)).toBe(true);
    } else {
      expect(reasonOf(input)).toContain(verdict.reason);
    }
  });
});

describe('parseShift: zones', () => {
  it('evaluates a shift without a prefix in UTC, and says so in the canonical form', () => {
    const s = parseShift('Mon-Fri 09:00-13:00');
    expect(s.zone).toBe('UTC');
    expect(s.canonical).toBe('TZ=UTC Mon 09:00-13:00; Tue 09:00-13:00; Wed 09:00-13:00; Thu 09:00-13:00; Fri 09:00-13:00');
  });

  it.each(['UTC', 'Etc/UTC', 'GMT', 'America/New_York', 'Europe/London', 'Australia/Lord_Howe', 'Asia/Kolkata', 'Asia/Calcutta', 'Europe/Kyiv', 'US/Pacific', 'EST5EDT', 'Etc/GMT-14'])(
    'accepts the exact-case IANA name %s and keeps it as written',
    (zone) => {
      expect(parseShift(`TZ=${zone} 09:00-10:00`).zone).toBe(zone);
      expect(parseShift(`TZ=${zone} 09:00-10:00`).canonical.startsWith(`TZ=${zone} Mon`)).toBe(true);
    },
  );

  it.each([
    ['TZ=america/los_angeles 09:00-10:00', 'did you mean "America/Los_Angeles"'],
    ['TZ=US/PACIFIC 09:00-10:00', 'did you mean "US/Pacific"'],
    ['TZ=Etc/Utc 09:00-10:00', 'did you mean "Etc/UTC"'],
    ['TZ=Factory 09:00-10:00', 'unknown time zone "Factory"'],
    ['TZ=+05:00 09:00-10:00', 'unknown time zone "+05:00"'],
    ['TZ=America/Los_Angeles\u00A0Mon 09:00-10:00', 'unknown time zone "America/Los_Angeles\\u00A0Mon"'],
    ['CRON_TZ= 09:00-10:00', 'missing zone name after "CRON_TZ="'],
  ])('refuses %j', (input, reason) => {
    expect(reasonOf(input)).toContain(reason);
  });
});

describe('parseShift: the canonical form', () => {
  it.each([
    ['CRON_TZ=UTC Mon-Fri 09:00-13:00', 'TZ=UTC Mon 09:00-13:00; Tue 09:00-13:00; Wed 09:00-13:00; Thu 09:00-13:00; Fri 09:00-13:00'],
    ['TZ=US/Pacific Sat,Sun 10:00-12:00', 'TZ=US/Pacific Sat 10:00-12:00; Sun 10:00-12:00'],
    ['Mon-Tue 13:00-17:00 ;Mon-Tue 09:00-12:00', 'TZ=UTC Mon 09:00-12:00; Mon 13:00-17:00; Tue 09:00-12:00; Tue 13:00-17:00'],
    ['Tue 10:00-11:00; Mon 10:00-11:00; Mon 09:00-12:00; mon 10:00-11:00', 'TZ=UTC Mon 09:00-12:00; Mon 10:00-11:00; Tue 10:00-11:00'],
    ['Mon 22:00-00:00', 'TZ=UTC Mon 22:00-00:00'],
    ['Mon 12:00-24:00', 'TZ=UTC Mon 12:00-24:00'],
    ['Sun-Mon 22:00-02:00', 'TZ=UTC Mon 22:00-02:00; Sun 22:00-02:00'],
    ['  TZ=Asia/Kolkata \t MON,Mon-Tue\t09:00-10:00  ', 'TZ=Asia/Kolkata Mon 09:00-10:00; Tue 09:00-10:00'],
  ])('%j -> %j', (input, canonical) => {
    expect(parseShift(input).canonical).toBe(canonical);
    expect(parseShift(canonical).canonical).toBe(canonical);
  });

  it('is immutable and shared: the same text parses to the same object', () => {
    const a = parseShift('TZ=UTC Mon 09:00-10:00');
    expect(parseShift('TZ=UTC Mon 09:00-10:00')).toBe(a);
    expect(Object.isFrozen(a)).toBe(true);
    expect(Object.isFrozen(a.windows)).toBe(true);
  });
});

describe('parseShift: canonical round trip (property)', () => {
  it('parse(canonical(parse(x))) is a fixed point and decides every instant the same way', () => {
    fc.assert(
      fc.property(shiftText(), fc.array(instant2026, { minLength: 5, maxLength: 5 }), (text, instants) => {
        const a = parseShift(text);
        const b = parseShift(a.canonical);
        expect(b.canonical).toBe(a.canonical);
        expect(b.zone).toBe(a.zone);
        expect(b.windows).toEqual(a.windows);
        for (const t of instants) {
          const d = new Date(t);
          expect(isInShift(b, d)).toBe(isInShift(a, d));
          expect(nextShiftBoundary(b, d)).toEqual(nextShiftBoundary(a, d));
        }
      }),
      { numRuns: 200 },
    );
  });
});

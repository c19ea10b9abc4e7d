import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isSwitchboardError } from '../errors.ts';
import { instant2026, shiftText } from './arbitraries.testkit.ts';
import {
  CLOCK_IN_MAX_MS,
  effective,
  isInShift,
  overrideEnd,
  parseClockInDuration,
  parseShift,
  planClockIn,
  planClockOut,
  planOperatorClear,
  planOperatorSet,
  type EffectivePresence,
  type OverrideWrite,
  type PresenceInputs,
  type Shift,
} from './index.ts';

const H = 3_600_000;
const DAY = 24 * H;

const NONE: OverrideWrite = { override: null, overrideUntil: null, overrideSetAt: null, overrideBy: null };
const inputs = (shift: Shift | null, o: OverrideWrite = NONE): PresenceInputs => ({ shift, ...o });
const apply = (i: PresenceInputs, w: OverrideWrite): PresenceInputs => ({ ...i, ...w });
const eff = (presence: 'in' | 'out', source: EffectivePresence['source'], until: Date | null): EffectivePresence => ({ presence, source, until });

function refused(fn: () => unknown): { message: string; details: Record<string, unknown> } {
  try {
    fn();
  } catch (e) {
    if (!isSwitchboardError(e)) throw e;
    expect(e.code).toBe('failed_precondition');
    return e;
  }
  throw new Error('expected failed_precondition');
}

function invalid(fn: () => unknown, field: string): string {
  try {
    fn();
  } catch (e) {
    if (!isSwitchboardError(e)) throw e;
    expect(e.code).toBe('invalid_argument');
    expect(e.details.field).toBe(field);
    return e.message;
  }
  throw new Error('expected invalid_argument');
}

/**
 * The spec's scenarios name a shift "Mon-Fri 09:00-13:00" and wall-clock times on a Monday.
 * We run every one in UTC and, as REQ "Shift Schedule" sets it, in America/Los_Angeles
 * (September 2026 is PDT, UTC-7). Monday is 2026-09-21.
 */
const FIXTURES = [
  { shift: 'TZ=UTC Mon-Fri 09:00-13:00', offsetH: 0 },
  { shift: 'TZ=America/Los_Angeles Mon-Fri 09:00-13:00', offsetH: -7 },
] as const;

describe.each(FIXTURES)('SPEC-0022 scenarios with shift $shift', ({ shift: text, offsetH }) => {
  const shift = parseShift(text);
  /** Local wall time on a day of September 2026 (21 = Monday) as an instant. */
  const at = (day: number, hhmm: string, ms = 0) => new Date(Date.parse(`2026-09-${day}T${hhmm}:00Z`) - offsetH * H + ms);
  const MON = 21;
  const TUE = 22;
  const plain = inputs(shift);

  it('Owner sets a shift: in on weekdays 09:00-13:00 local, out otherwise', () => {
    expect(effective(plain, at(MON, '09:00'))).toEqual(eff('in', 'shift', at(MON, '13:00')));
    expect(effective(plain, at(MON, '12:59', 59_999))).toEqual(eff('in', 'shift', at(MON, '13:00')));
    expect(effective(plain, at(MON, '13:00'))).toEqual(eff('out', 'shift', at(TUE, '09:00')));
    expect(effective(plain, at(MON, '08:59', 59_999))).toEqual(eff('out', 'shift', at(MON, '09:00')));
    expect(effective(plain, at(25, '14:00'))).toEqual(eff('out', 'shift', at(28, '09:00'))); // Friday afternoon
    expect(effective(plain, at(26, '10:00'))).toEqual(eff('out', 'shift', at(28, '09:00'))); // Saturday
  });

  it('P2 / A shift boundary ends an override / Clock-out expires at the next boundary, not the next shift start', () => {
    const w = planClockOut(plain, at(MON, '10:00'));
    expect(w).toEqual({ override: 'out', overrideUntil: null, overrideSetAt: at(MON, '10:00'), overrideBy: 'agent' });
    const i = apply(plain, w);
    expect(overrideEnd(i)).toEqual(at(MON, '13:00')); // the first boundary after it was set: an end
    // out until 13:00 Monday by the override, then out by the shift until 09:00 Tuesday, then in
    expect(effective(i, at(MON, '10:00'))).toEqual(eff('out', 'agent', at(TUE, '09:00')));
    expect(effective(i, at(MON, '12:59', 59_999))).toEqual(eff('out', 'agent', at(TUE, '09:00')));
    expect(effective(i, at(MON, '13:00'))).toEqual(eff('out', 'shift', at(TUE, '09:00')));
    expect(effective(i, at(MON, '20:00'))).toEqual(eff('out', 'shift', at(TUE, '09:00')));
    expect(effective(i, at(TUE, '09:00'))).toEqual(eff('in', 'shift', at(TUE, '13:00')));
  });

  it("an agent's clock_out over its human's live out override keeps the human's override (DESIGN decision 8)", () => {
    const operatorOut = { ...plain, override: 'out' as const, overrideUntil: null, overrideSetAt: at(MON, '09:30'), overrideBy: 'operator:h1' };
    const w = planClockOut(operatorOut, at(MON, '10:00'));
    expect(w).toEqual({ override: 'out', overrideUntil: null, overrideSetAt: at(MON, '09:30'), overrideBy: 'operator:h1' });
    expect(effective(apply(operatorOut, w), at(MON, '10:00')).source).toBe('operator');
  });

  it('P3 / Late clock-in outside a shift: clock_in {for: "2h"} at 20:00 Monday is in until 22:00, then out', () => {
    const w = planClockIn(plain, at(MON, '20:00'), parseClockInDuration('2h'));
    expect(w).toEqual({ override: 'in', overrideUntil: at(MON, '22:00'), overrideSetAt: at(MON, '20:00'), overrideBy: 'agent' });
    const i = apply(plain, w);
    expect(effective(i, at(MON, '20:00'))).toEqual(eff('in', 'agent', at(MON, '22:00')));
    expect(effective(i, at(MON, '21:59', 59_999))).toEqual(eff('in', 'agent', at(MON, '22:00')));
    expect(effective(i, at(MON, '22:00'))).toEqual(eff('out', 'shift', at(TUE, '09:00')));
  });

  it('P4 / Clock-in crossing a shift start: at 08:00 with for 2h it is in until 09:00, then the shift decides', () => {
    const w = planClockIn(plain, at(MON, '08:00'), parseClockInDuration('2h'));
    expect(w).toEqual({ override: 'in', overrideUntil: at(MON, '09:00'), overrideSetAt: at(MON, '08:00'), overrideBy: 'agent' });
    const i = apply(plain, w);
    expect(overrideEnd(i)).toEqual(at(MON, '09:00'));
    // The presence value does not change at 09:00 (override in, then shift in): it next changes at 13:00.
    expect(effective(i, at(MON, '08:00'))).toEqual(eff('in', 'agent', at(MON, '13:00')));
    expect(effective(i, at(MON, '08:59', 59_999))).toEqual(eff('in', 'agent', at(MON, '13:00')));
    expect(effective(i, at(MON, '09:00'))).toEqual(eff('in', 'shift', at(MON, '13:00')));
  });

  it('P5 / Clock-in inside a shift only clears a clock-out: in for the rest of the shift, out at 13:00', () => {
    const out = apply(plain, planClockOut(plain, at(MON, '10:00')));
    const w = planClockIn(out, at(MON, '11:00'), parseClockInDuration(undefined));
    expect(w).toEqual(NONE);
    const i = apply(out, w);
    expect(effective(i, at(MON, '11:00'))).toEqual(eff('in', 'shift', at(MON, '13:00')));
    expect(effective(i, at(MON, '13:00'))).toEqual(eff('out', 'shift', at(TUE, '09:00')));
  });

  it('P6 / Clock-in cap: 9h, 0, -1h and abc are refused before anything is planned', () => {
    for (const raw of ['9h', '0', '-1h', 'abc']) invalid(() => parseClockInDuration(raw), 'for');
    invalid(() => planClockIn(plain, at(MON, '20:00'), 9 * H), 'for');
    invalid(() => planClockIn(plain, at(MON, '20:00'), 0), 'for');
  });

  it('P7: clock_in {} outside the shift lasts the 1h default, capped by the next shift start', () => {
    const late = planClockIn(plain, at(MON, '20:00'), parseClockInDuration(undefined));
    expect(late.overrideUntil).toEqual(at(MON, '21:00'));
    const early = planClockIn(plain, at(TUE, '08:30'), parseClockInDuration(undefined));
    expect(early.overrideUntil).toEqual(at(TUE, '09:00'));
    expect(effective(apply(plain, early), at(TUE, '08:30'))).toEqual(eff('in', 'agent', at(TUE, '13:00')));
  });

  it('P9 / Repeated clock-out: the same state, nothing new to write', () => {
    const first = planClockOut(plain, at(MON, '10:00'));
    const i = apply(plain, first);
    const again = planClockOut(i, at(MON, '10:05'));
    expect(again).toEqual(first);
    expect(effective(apply(i, again), at(MON, '10:05'))).toEqual(effective(i, at(MON, '10:05')));
    // Off shift, after the override has ended, clock_out writes a fresh one: still out, same until.
    const later = planClockOut(i, at(MON, '14:00'));
    expect(later.overrideSetAt).toEqual(at(MON, '14:00'));
    expect(effective(apply(i, later), at(MON, '14:00'))).toEqual(eff('out', 'agent', at(TUE, '09:00')));
  });

  it('clock_out outside the shift lasts until the next boundary (the shift start)', () => {
    const i = apply(plain, planClockOut(plain, at(MON, '20:00')));
    expect(overrideEnd(i)).toEqual(at(TUE, '09:00'));
    expect(effective(i, at(MON, '20:00'))).toEqual(eff('out', 'agent', at(TUE, '09:00')));
    expect(effective(i, at(TUE, '09:00'))).toEqual(eff('in', 'shift', at(TUE, '13:00')));
  });

  it('clock_in inside the shift with nothing to undo writes nothing (an empty override)', () => {
    expect(planClockIn(plain, at(MON, '10:00'), H)).toEqual(NONE);
  });

  it('repeating clock_in at the same instant writes nothing new', () => {
    const w = planClockIn(plain, at(MON, '20:00'), 2 * H);
    expect(planClockIn(apply(plain, w), at(MON, '20:00'), 2 * H)).toEqual(w);
  });

  it('Operator clocks an agent out: source operator, and it still ends at the first boundary after it was set', () => {
    const w = planOperatorSet(plain, at(MON, '10:00'), 'out', null, 'h_42');
    expect(w).toEqual({ override: 'out', overrideUntil: null, overrideSetAt: at(MON, '10:00'), overrideBy: 'operator:h_42' });
    const i = apply(plain, w);
    expect(effective(i, at(MON, '10:00'))).toEqual(eff('out', 'operator', at(TUE, '09:00')));
    expect(effective(i, at(MON, '13:00'))).toEqual(eff('out', 'shift', at(TUE, '09:00')));
  });

  it('an operator out override with an until inside the shift ends there', () => {
    const i = apply(plain, planOperatorSet(plain, at(MON, '10:00'), 'out', at(MON, '11:00'), 'h_42'));
    expect(effective(i, at(MON, '10:00'))).toEqual(eff('out', 'operator', at(MON, '11:00')));
    expect(effective(i, at(MON, '11:00'))).toEqual(eff('in', 'shift', at(MON, '13:00')));
  });

  it('an operator in override has no cap, but still yields to the next boundary', () => {
    const i = apply(plain, planOperatorSet(plain, at(MON, '20:00'), 'in', null, 'h_42'));
    // in by the operator until 09:00 Tuesday, then in by the shift: the value next changes at 13:00.
    expect(effective(i, at(MON, '20:00'))).toEqual(eff('in', 'operator', at(TUE, '13:00')));
    expect(effective(i, at(TUE, '09:00'))).toEqual(eff('in', 'shift', at(TUE, '13:00')));
    const inside = apply(plain, planOperatorSet(plain, at(MON, '10:00'), 'in', null, 'h_42'));
    expect(effective(inside, at(MON, '10:00'))).toEqual(eff('in', 'operator', at(MON, '13:00')));
  });

  it('an operator until must be in the future', () => {
    expect(invalid(() => planOperatorSet(plain, at(MON, '10:00'), 'out', at(MON, '10:00'), 'h_42'), 'until')).toContain('in the future');
    invalid(() => planOperatorSet(plain, at(MON, '10:00'), 'out', at(MON, '09:00'), 'h_42'), 'until');
    invalid(() => planOperatorSet(plain, at(MON, '10:00'), 'out', new Date(Number.NaN), 'h_42'), 'until');
    invalid(() => planOperatorSet(plain, at(MON, '10:00'), 'maybe' as 'in', null, 'h_42'), 'presence');
  });

  it("clock_in never undoes an operator's out: refused with failed_precondition naming who and until when", () => {
    const op = apply(plain, planOperatorSet(plain, at(MON, '20:00'), 'out', at(MON, '23:00'), 'h_42'));
    const refusal = refused(() => planClockIn(op, at(MON, '20:30'), CLOCK_IN_MAX_MS, 'alice'));
    expect(refusal.message).toContain('alice');
    expect(refusal.message).toContain(at(MON, '23:00').toISOString().replace('.000Z', 'Z'));
    expect(refusal.message).toMatch(/list_todos and claim_next/);
    expect(refusal.details).toEqual({ set_by: 'operator:h_42', until: at(MON, '23:00').toISOString().replace('.000Z', 'Z') });
    // Without a name the stored author is named; without an until, it ends at the next boundary (13:00).
    const open = apply(plain, planOperatorSet(plain, at(MON, '10:00'), 'out', null, 'h_42'));
    expect(refused(() => planClockIn(open, at(MON, '11:00'), H)).message).toContain('operator:h_42');
    expect(refused(() => planClockIn(open, at(MON, '11:00'), H)).details.until).toBe(at(MON, '13:00').toISOString().replace('.000Z', 'Z'));
  });

  it("clock_in leaves an operator's in unchanged, inside and outside the shift", () => {
    const outside = apply(plain, planOperatorSet(plain, at(MON, '20:00'), 'in', at(MON, '21:00'), 'h_42'));
    expect(planClockIn(outside, at(MON, '20:30'), 2 * H)).toEqual(planOperatorSet(plain, at(MON, '20:00'), 'in', at(MON, '21:00'), 'h_42'));
    const inside = apply(plain, planOperatorSet(plain, at(MON, '10:00'), 'in', null, 'h_42'));
    expect(planClockIn(inside, at(MON, '10:30'), H).overrideBy).toBe('operator:h_42');
  });

  it('repeating clock_in {for: "2h"} while its in override is live changes nothing: no extension', () => {
    const first = planClockIn(plain, at(MON, '20:00'), 2 * H);
    expect(first.overrideUntil).toEqual(at(MON, '22:00'));
    const i = apply(plain, first);
    expect(planClockIn(i, at(MON, '21:00'), 2 * H)).toEqual(first);
    expect(planClockIn(i, at(MON, '21:59'), 8 * H)).toEqual(first);
    // Once it has run out, a new clock_in starts a new one.
    expect(planClockIn(i, at(MON, '22:00'), 2 * H)).toMatchObject({ overrideUntil: at(TUE, '00:00'), overrideSetAt: at(MON, '22:00') });
  });

  it("an agent's clock_out still ends an operator's in", () => {
    const op = apply(plain, planOperatorSet(plain, at(MON, '20:00'), 'in', null, 'h_42'));
    expect(planClockOut(op, at(MON, '20:30'))).toEqual({ override: 'out', overrideUntil: null, overrideSetAt: at(MON, '20:30'), overrideBy: 'agent' });
  });
});

describe('SPEC-0022 scenarios without a shift', () => {
  const t = new Date('2026-09-21T10:00:00Z');
  const later = (ms: number) => new Date(t.getTime() + ms);

  it('P1 / Default is in', () => {
    expect(effective(inputs(null), t)).toEqual(eff('in', 'default', null));
  });

  it('P8 / Agent clocks out before stopping / Override without a shift: out, no end, until clock_in', () => {
    const w = planClockOut(inputs(null), t);
    expect(w).toEqual({ override: 'out', overrideUntil: null, overrideSetAt: t, overrideBy: 'agent' });
    const i = apply(inputs(null), w);
    expect(effective(i, t)).toEqual(eff('out', 'agent', null));
    expect(effective(i, later(90 * DAY))).toEqual(eff('out', 'agent', null));
    expect(planClockOut(i, later(DAY))).toEqual(w); // P9 without a shift
    const back = planClockIn(i, later(DAY), parseClockInDuration('30m'));
    expect(back).toEqual(NONE); // no shift: clock_in clears, and in has no end
    expect(effective(apply(i, back), later(DAY))).toEqual(eff('in', 'default', null));
  });

  it('P8: an operator change also ends it', () => {
    const i = apply(inputs(null), planClockOut(inputs(null), t));
    const op = apply(i, planOperatorSet(i, later(H), 'in', null, 'h_1'));
    expect(effective(op, later(H))).toEqual(eff('in', 'operator', null));
    expect(effective(apply(i, planOperatorClear()), later(H))).toEqual(eff('in', 'default', null));
  });

  it('Operator clocks an agent out: {"presence": "out", "until": null}', () => {
    const i = apply(inputs(null), planOperatorSet(inputs(null), t, 'out', null, 'h_1'));
    expect(effective(i, t)).toEqual(eff('out', 'operator', null));
    const timed = apply(inputs(null), planOperatorSet(inputs(null), t, 'out', later(3 * DAY), 'h_1'));
    expect(effective(timed, t)).toEqual(eff('out', 'operator', later(3 * DAY)));
    expect(effective(timed, later(3 * DAY))).toEqual(eff('in', 'default', null));
    // An agent clock_out over an operator's out keeps the operator's (DESIGN decision 8).
    expect(planClockOut(i, later(H))).toEqual({ override: 'out', overrideUntil: null, overrideSetAt: t, overrideBy: 'operator:h_1' });
  });

  it('an in override without a shift never changes the presence value', () => {
    const i = apply(inputs(null), planOperatorSet(inputs(null), t, 'in', later(H), 'h_1'));
    expect(effective(i, t)).toEqual(eff('in', 'operator', null));
  });

  // P10 (`clock_out {"endpoint":"x"}` is refused) is a property of the verb's argument schema,
  // which is strict in src/mcp/tools/presence.ts; this package takes no arguments from a caller.
});

describe('effective: edges', () => {
  const shift = parseShift('TZ=UTC Mon-Fri 09:00-13:00');
  const mon10 = new Date('2026-09-21T10:00:00Z');

  it('an override whose until has passed no longer decides', () => {
    const i = inputs(shift, { override: 'out', overrideUntil: new Date('2026-09-21T09:30:00Z'), overrideSetAt: new Date('2026-09-21T09:00:00Z'), overrideBy: 'agent' });
    expect(effective(i, mon10)).toEqual(eff('in', 'shift', new Date('2026-09-21T13:00:00Z')));
    expect(effective(i, new Date('2026-09-21T09:29:59.999Z')).source).toBe('agent');
  });

  it('an override set before a boundary that has passed no longer decides, even with a later until', () => {
    const i = inputs(shift, { override: 'out', overrideUntil: new Date('2026-09-30T00:00:00Z'), overrideSetAt: new Date('2026-09-18T12:00:00Z'), overrideBy: 'agent' });
    expect(effective(i, mon10)).toEqual(eff('in', 'shift', new Date('2026-09-21T13:00:00Z')));
  });

  it('an override without set_at has no boundary anchor: only its until ends it', () => {
    const i = inputs(shift, { override: 'out', overrideUntil: null, overrideSetAt: null, overrideBy: 'agent' });
    expect(effective(i, mon10)).toEqual(eff('out', 'agent', null));
  });

  it('anything but "agent" that set an override is an operator', () => {
    const i = inputs(null, { override: 'out', overrideUntil: null, overrideSetAt: mon10, overrideBy: null });
    expect(effective(i, mon10).source).toBe('operator');
  });

  it('an always-in shift never changes: until null', () => {
    const always = parseShift('Mon-Sun 00:00-24:00');
    expect(effective(inputs(always), mon10)).toEqual(eff('in', 'shift', null));
    const i = inputs(always, { override: 'out', overrideUntil: null, overrideSetAt: mon10, overrideBy: 'agent' });
    expect(effective(i, mon10)).toEqual(eff('out', 'agent', null)); // no boundary ever ends it
  });

  it('refuses an invalid now', () => {
    expect(() => effective(inputs(null), new Date(Number.NaN))).toThrow(RangeError);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties

const WINDOW_8D = 8 * DAY;
const presenceInputs = fc
  .record({
    shift: fc.option(shiftText().map((s) => parseShift(s)), { nil: null, freq: 4 }),
    override: fc.constantFrom(null, 'in', 'out'),
    by: fc.constantFrom('agent', 'operator:h_1'),
    setAgo: fc.oneof(fc.integer({ min: -H, max: 9 * DAY }), fc.integer({ min: 0, max: 2 * H })),
    untilAfterSet: fc.option(fc.integer({ min: 1, max: 10 * DAY }), { nil: null }),
    noSetAt: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
  })
  .map((r) => (t: number): PresenceInputs => {
    if (r.override === null) return inputs(r.shift);
    const setAt = t - r.setAgo;
    return {
      shift: r.shift,
      override: r.override,
      overrideUntil: r.untilAfterSet === null ? null : new Date(setAt + r.untilAfterSet),
      overrideSetAt: r.noSetAt ? null : new Date(setAt),
      overrideBy: r.by,
    };
  });

describe('effective (properties)', () => {
  it('until is the first instant the presence value changes; null means it does not change for 8 days', () => {
    fc.assert(
      fc.property(presenceInputs, instant2026, fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 5, maxLength: 5 }), (make, t, fractions) => {
        const i = make(t);
        const now = effective(i, new Date(t));
        const presenceAt = (ms: number) => effective(i, new Date(ms)).presence;
        if (now.until === null) {
          for (const f of [...fractions, 1]) expect(presenceAt(t + Math.floor(f * WINDOW_8D))).toBe(now.presence);
          return;
        }
        const u = now.until.getTime();
        expect(u).toBeGreaterThan(t);
        expect(presenceAt(u - 1)).toBe(now.presence);
        for (const f of fractions) expect(presenceAt(Math.min(u - 1, t + Math.floor(f * (u - t))))).toBe(now.presence);
        expect(presenceAt(u)).not.toBe(now.presence);
      }),
      { numRuns: 300 },
    );
  });

  it("clock_out makes the endpoint out now, by the agent unless its human's out decides, and repeating it writes nothing", () => {
    fc.assert(
      fc.property(presenceInputs, instant2026, fc.integer({ min: 0, max: 2 * H }), (make, t, dt) => {
        const i = make(t);
        const w = planClockOut(i, new Date(t));
        const after = apply(i, w);
        const operatorOut = effective(i, new Date(t));
        const keptOperator = operatorOut.presence === 'out' && operatorOut.source === 'operator';
        expect(effective(after, new Date(t))).toMatchObject({ presence: 'out', source: keptOperator ? 'operator' : 'agent' });
        expect(planClockOut(after, new Date(t))).toEqual(w);
        const e = effective(after, new Date(t + dt));
        if (e.source === 'agent') expect(planClockOut(after, new Date(t + dt))).toEqual(w);
      }),
      { numRuns: 200 },
    );
  });

  it("clock_in makes the endpoint in now (or is refused over an operator's out), and an agent in override never outlives now + for", () => {
    fc.assert(
      fc.property(presenceInputs, instant2026, fc.integer({ min: 1, max: CLOCK_IN_MAX_MS }), (make, t, forMs) => {
        const i = make(t);
        const before = effective(i, new Date(t));
        if (before.source === 'operator' && before.presence === 'out') {
          refused(() => planClockIn(i, new Date(t), forMs));
          return;
        }
        const w = planClockIn(i, new Date(t), forMs);
        const after = apply(i, w);
        expect(effective(after, new Date(t)).presence).toBe('in');
        if (before.source === 'operator' || (before.source === 'agent' && i.override === 'in')) {
          expect(w).toEqual({ override: i.override, overrideUntil: i.overrideUntil, overrideSetAt: i.overrideSetAt, overrideBy: i.overrideBy });
        } else if (w.override !== null) {
          expect(w.override).toBe('in');
          expect(i.shift !== null && !isInShift(i.shift, new Date(t))).toBe(true);
          expect(overrideEnd(after)!.getTime()).toBeLessThanOrEqual(t + forMs);
        } else {
          expect(i.shift === null || isInShift(i.shift, new Date(t))).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('an operator setting decides now, with source operator', () => {
    fc.assert(
      fc.property(presenceInputs, instant2026, fc.constantFrom('in' as const, 'out' as const), fc.option(fc.integer({ min: 1, max: 30 * DAY }), { nil: null }), (make, t, p, d) => {
        const i = make(t);
        const w = planOperatorSet(i, new Date(t), p, d === null ? null : new Date(t + d), 'h_9');
        expect(effective(apply(i, w), new Date(t))).toMatchObject({ presence: p, source: 'operator' });
      }),
      { numRuns: 200 },
    );
  });
});

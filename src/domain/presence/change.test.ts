import { describe, expect, it } from 'vitest';
import { AGENT, operatorActor, SHIFT } from '../actor.ts';
import { changeReason, parseShift, type PresenceInputs } from './index.ts';

const shift = parseShift('Mon-Fri 09:00-13:00');
const none: PresenceInputs = { shift, override: null, overrideUntil: null, overrideSetAt: null, overrideBy: null };
const at = (iso: string) => new Date(iso);

describe('changeReason: why the presence history says it changed', () => {
  it("names the agent's verb by the direction it moved", () => {
    expect(changeReason({ to: 'in', by: AGENT, write: 'override', inputs: none, overrideEnded: false })).toBe('clock_in');
    expect(changeReason({ to: 'out', by: AGENT, write: 'override', inputs: none, overrideEnded: false })).toBe('clock_out');
  });

  it("tells a human's override from a human's shift edit", () => {
    const human = operatorActor('h1');
    expect(changeReason({ to: 'out', by: human, write: 'override', inputs: none, overrideEnded: false })).toBe('operator');
    expect(changeReason({ to: 'out', by: human, write: 'shift', inputs: none, overrideEnded: false })).toBe('shift_edit');
    // Found by the evaluator after a write it did not see claimed: still the human's doing.
    expect(changeReason({ to: 'in', by: human, write: null, inputs: none, overrideEnded: false })).toBe('operator');
  });

  it('is shift_start or shift_end at a boundary, also where an override ended at one', () => {
    expect(changeReason({ to: 'in', by: SHIFT, write: null, inputs: none, overrideEnded: false })).toBe('shift_start');
    expect(changeReason({ to: 'out', by: SHIFT, write: null, inputs: none, overrideEnded: false })).toBe('shift_end');
    // A clock-out on Monday evening lasts until Tuesday's shift start.
    const clockedOut: PresenceInputs = { ...none, override: 'out', overrideSetAt: at('2026-10-05T20:00:00Z'), overrideBy: 'agent' };
    expect(changeReason({ to: 'in', by: SHIFT, write: null, inputs: clockedOut, overrideEnded: true })).toBe('shift_start');
    // A human's in override inside the shift ends with it.
    const keptIn: PresenceInputs = { ...none, override: 'in', overrideSetAt: at('2026-10-05T10:00:00Z'), overrideBy: 'operator:h1' };
    expect(changeReason({ to: 'out', by: SHIFT, write: null, inputs: keptIn, overrideEnded: true })).toBe('shift_end');
  });

  it('is override_end when an override ran out away from a boundary, or with no shift', () => {
    const clockedIn: PresenceInputs = { ...none, override: 'in', overrideUntil: at('2026-10-05T15:00:00Z'), overrideSetAt: at('2026-10-05T14:00:00Z'), overrideBy: 'agent' };
    expect(changeReason({ to: 'out', by: SHIFT, write: null, inputs: clockedIn, overrideEnded: true })).toBe('override_end');
    const noShift: PresenceInputs = { ...clockedIn, shift: null, override: 'out', overrideBy: 'operator:h1' };
    expect(changeReason({ to: 'in', by: SHIFT, write: null, inputs: noShift, overrideEnded: true })).toBe('override_end');
  });
});

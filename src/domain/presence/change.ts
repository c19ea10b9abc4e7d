import type { PresenceActor } from '../actor.ts';
import { overrideEnd, type Presence, type PresenceInputs } from './effective.ts';
import { isInShift } from './shift.ts';

/**
 * Why an endpoint's effective presence changed, as its presence history records it (issue 39):
 *   clock_in / clock_out  the agent's own verbs;
 *   operator              a human set or cleared an override;
 *   shift_edit            a human set or cleared the shift;
 *   shift_start / end     time: a shift boundary (also where an override ended at one);
 *   override_end          time: an override ran out (its until) away from any shift boundary.
 * Unlike the digest's reason (which only an out -> in transition has), it tells the two
 * directions apart.
 */
export type PresenceChangeReason = 'clock_in' | 'clock_out' | 'operator' | 'shift_edit' | 'shift_start' | 'shift_end' | 'override_end';

export const PRESENCE_CHANGE_REASONS = ['clock_in', 'clock_out', 'operator', 'shift_edit', 'shift_start', 'shift_end', 'override_end'] as const satisfies readonly PresenceChangeReason[];

/** What changed the inputs just before the transition: a write of the override or of the shift; null when time did. */
export type PresenceWriteKind = 'override' | 'shift' | null;

/** True when the override stops deciding exactly at a boundary of its shift (a start or an end). */
function overrideEndsAtShiftBoundary(inputs: PresenceInputs): boolean {
  const end = overrideEnd(inputs);
  if (end === null || inputs.shift === null) return false;
  return isInShift(inputs.shift, end) !== isInShift(inputs.shift, new Date(end.getTime() - 1));
}

/**
 * The reason of a transition to `to` caused by `by` (who wrote, or the shift when no one did),
 * computed from the inputs it was decided on; `overrideEnded`: those inputs hold an override that
 * no longer decides.
 */
export function changeReason(c: { to: Presence; by: PresenceActor; write: PresenceWriteKind; inputs: PresenceInputs; overrideEnded: boolean }): PresenceChangeReason {
  switch (c.by.kind) {
    case 'agent':
      return c.to === 'in' ? 'clock_in' : 'clock_out';
    case 'operator':
      return c.write === 'shift' ? 'shift_edit' : 'operator';
    case 'shift':
      if (c.inputs.shift === null || (c.overrideEnded && !overrideEndsAtShiftBoundary(c.inputs))) return 'override_end';
      return c.to === 'in' ? 'shift_start' : 'shift_end';
  }
}

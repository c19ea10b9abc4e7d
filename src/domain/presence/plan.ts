import { actorLabel, AGENT, operatorActor } from '../actor.ts';
import { failedPrecondition, invalidArgument } from '../errors.ts';
import { rfc3339 } from '../time.ts';
import { CLOCK_IN_MAX_MS } from './duration.ts';
import { effective, overrideEnd, type Presence, type PresenceInputs } from './effective.ts';
import { isInShift, nextShiftBoundary } from './shift.ts';

/** The override columns to store: all null clears the override. */
export interface OverrideWrite {
  override: Presence | null;
  overrideUntil: Date | null;
  overrideSetAt: Date | null;
  /** actorLabel of who set it. */
  overrideBy: string | null;
}

export const CLEARED_OVERRIDE: Readonly<OverrideWrite> = Object.freeze({ override: null, overrideUntil: null, overrideSetAt: null, overrideBy: null });

const current = (i: PresenceInputs): OverrideWrite => ({
  override: i.override,
  overrideUntil: i.overrideUntil,
  overrideSetAt: i.overrideSetAt,
  overrideBy: i.overrideBy,
});

/**
 * clock_out (SPEC-0022 REQ "Presence Verbs"): an out override by the agent, with no end of its
 * own; with a shift it ends at the first shift boundary after now (start or end), without one it
 * lasts until clock_in or an operator change. Idempotent: when a live agent out override already
 * decides, the existing override is returned unchanged, so repeating the verb writes nothing.
 *
 * The human decides (DESIGN decision 8): over a live operator out override the operator's override
 * is kept and the current state answered. Replacing it with the agent's own out would let the
 * agent's next clock_in clear it, undoing its human's clock-out in two calls.
 */
export function planClockOut(inputs: PresenceInputs, now: Date): OverrideWrite {
  const eff = effective(inputs, now);
  if (eff.presence === 'out' && (eff.source === 'agent' || eff.source === 'operator')) return current(inputs);
  return { override: 'out', overrideUntil: null, overrideSetAt: new Date(now.getTime()), overrideBy: actorLabel(AGENT) };
}

/**
 * clock_in {for}: when the shift (if any) would put the endpoint out now, an in override by the
 * agent ending at the earlier of now + for and the next shift start; otherwise clear any
 * override (inside the shift, or with no shift, that is what "in" means). `forMs` comes from
 * parseClockInDuration (capped at 8 h).
 *
 * The human decides (ADR-0027): a live operator override is never cleared or shortened. An
 * operator's in already keeps the endpoint in, so it is returned unchanged; an operator's out is
 * refused with failed_precondition naming `operatorName` (how to call `override_by` to the agent)
 * and the override's end. Idempotent: while the agent's own in override is live, repeating the
 * verb returns it unchanged (no extension), so the 8 h cap bounds any repetition.
 */
export function planClockIn(inputs: PresenceInputs, now: Date, forMs: number, operatorName: string | null = inputs.overrideBy): OverrideWrite {
  if (!Number.isFinite(forMs) || forMs <= 0 || forMs > CLOCK_IN_MAX_MS) throw invalidArgument('for', 'must be greater than zero and at most 8h');
  const eff = effective(inputs, now);
  if (eff.source === 'operator') {
    if (eff.presence === 'out') throw operatorKeepsOut(inputs, operatorName);
    return current(inputs);
  }
  if (eff.source === 'agent' && inputs.override === 'in') return current(inputs);
  const { shift } = inputs;
  if (shift === null || isInShift(shift, now)) return { ...CLEARED_OVERRIDE };
  const nextStart = nextShiftBoundary(shift, now);
  const until = Math.min(now.getTime() + forMs, nextStart ? nextStart.getTime() : Infinity);
  return { override: 'in', overrideUntil: new Date(until), overrideSetAt: new Date(now.getTime()), overrideBy: actorLabel(AGENT) };
}

function operatorKeepsOut(inputs: PresenceInputs, operatorName: string | null) {
  const end = overrideEnd(inputs);
  const until = rfc3339(end) ?? null;
  return failedPrecondition(
    `clock_in refused: your operator ${operatorName ?? inputs.overrideBy} clocked this endpoint out ${until ? `until ${until}` : 'until they change it'}, ` +
      'and an agent cannot undo its human\'s clock-out. Pulls still work: list_todos and claim_next.',
    { set_by: inputs.overrideBy, until },
  );
}

/**
 * PUT /api/v1/endpoints/{ref}/presence: an override by `operator:<humanId>`, with no duration cap.
 * It still ends at the first shift boundary after now. `until` must be after now.
 */
export function planOperatorSet(_inputs: PresenceInputs, now: Date, presence: Presence, until: Date | null, humanId: string): OverrideWrite {
  if (presence !== 'in' && presence !== 'out') throw invalidArgument('presence', 'must be "in" or "out"');
  if (until !== null) {
    if (!(until instanceof Date) || Number.isNaN(until.getTime())) throw invalidArgument('until', 'must be an RFC 3339 timestamp or null');
    if (until.getTime() <= now.getTime()) throw invalidArgument('until', 'must be in the future');
  }
  if (typeof humanId !== 'string' || humanId === '') throw invalidArgument('human_id', 'must not be empty');
  return { override: presence, overrideUntil: until, overrideSetAt: new Date(now.getTime()), overrideBy: actorLabel(operatorActor(humanId)) };
}

/** DELETE /api/v1/endpoints/{ref}/presence: clears any override. */
export function planOperatorClear(): OverrideWrite {
  return { ...CLEARED_OVERRIDE };
}

import { parseActor } from '../actor.ts';
import { rfc3339 } from '../time.ts';
import { isInShift, nextShiftBoundary, type Shift } from './shift.ts';

export type Presence = 'in' | 'out';
export type PresenceSource = 'shift' | 'agent' | 'operator' | 'default';

/** The stored presence columns of an endpoint, as read from its row. */
export interface PresenceInputs {
  shift: Shift | null;
  override: Presence | null;
  overrideUntil: Date | null;
  /** The anchor of the override's end at the next shift boundary. */
  overrideSetAt: Date | null;
  /** `agent` or `operator:<human_id>`, as stored (domain/actor.ts renders and parses it). */
  overrideBy: string | null;
}

export interface EffectivePresence {
  presence: Presence;
  source: PresenceSource;
  /** The first instant strictly after now at which the presence value changes; null: never. */
  until: Date | null;
}

/**
 * When the override stops deciding, in ms: the earlier of override_until and the first shift
 * boundary after override_set_at. null: it never ends by itself. Without a set_at there is no
 * anchor, so only override_until ends it (the store always writes set_at with an override).
 */
function overrideEndMs(inputs: PresenceInputs): number | null {
  const until = inputs.overrideUntil ? inputs.overrideUntil.getTime() : null;
  const boundary = inputs.shift && inputs.overrideSetAt ? nextShiftBoundary(inputs.shift, inputs.overrideSetAt) : null;
  const b = boundary ? boundary.getTime() : null;
  if (until === null) return b;
  if (b === null) return until;
  return Math.min(until, b);
}

/** The instant the override stops deciding (whether or not it is live now); null if never. */
export function overrideEnd(inputs: PresenceInputs): Date | null {
  if (inputs.override === null) return null;
  const end = overrideEndMs(inputs);
  return end === null ? null : new Date(end);
}

/**
 * True when the override stops deciding exactly where its shift starts: the endpoint comes back
 * because the shift started (reason `shift_start`), whatever the override left behind.
 */
export function overrideEndsAtShiftStart(inputs: PresenceInputs): boolean {
  const end = overrideEnd(inputs);
  if (end === null || inputs.shift === null) return false;
  return isInShift(inputs.shift, end) && !isInShift(inputs.shift, new Date(end.getTime() - 1));
}

/** `until` as every wire shows it: whole seconds rounded up, never earlier than the real change. */
export function untilOnWire(until: Date | null): string | null {
  return until === null ? null : rfc3339(new Date(Math.ceil(until.getTime() / 1000) * 1000));
}

/** What decides without an override: the shift, else the default `in`. */
function base(shift: Shift | null, at: Date): Presence {
  return shift === null || isInShift(shift, at) ? 'in' : 'out';
}

/** `agent` for the agent; anything else that set an override is an operator (`operator:<id>`). */
const sourceOf = (by: string | null): PresenceSource => (parseActor(by)?.kind === 'agent' ? 'agent' : 'operator');

/**
 * The effective presence at `now` (SPEC-0022 REQ "Presence Model"): the one place the precedence
 * lives.
 *   1. An override decides while override_until is null or after now and no shift boundary lies
 *      between override_set_at and now (it ends at the first boundary after it was set);
 *   2. otherwise a shift decides: in inside it, out outside;
 *   3. otherwise in.
 * `until` is when the presence VALUE next changes (not merely its source): an out override that
 * ends where the shift is out too keeps the endpoint out until the shift next starts.
 */
export function effective(inputs: PresenceInputs, now: Date): EffectivePresence {
  const n = now.getTime();
  if (Number.isNaN(n)) throw new RangeError('effective: now is not a valid Date');
  const { shift, override } = inputs;

  if (override !== null) {
    const end = overrideEndMs(inputs);
    if (end === null || n < end) {
      const source = sourceOf(inputs.overrideBy);
      if (end === null) return { presence: override, source, until: null };
      const endDate = new Date(end);
      if (base(shift, endDate) !== override) return { presence: override, source, until: endDate };
      // From the end on the shift (or the default) decides, and agrees with the override there.
      return { presence: override, source, until: shift === null ? null : nextShiftBoundary(shift, endDate) };
    }
  }

  if (shift !== null) return { presence: isInShift(shift, now) ? 'in' : 'out', source: 'shift', until: nextShiftBoundary(shift, now) };
  return { presence: 'in', source: 'default', until: null };
}

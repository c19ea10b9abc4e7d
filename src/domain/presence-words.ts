import type { PresenceChangeReason } from './presence/change.ts';
import type { Presence, PresenceSource } from './presence/effective.ts';

/**
 * One vocabulary for an endpoint's state and presence, shared by the board and the CLI and
 * matching the API's fields (README, "Words for state and presence"):
 *
 * - state: `active` or `revoked` (the API's `state`, the database's `endpoints.state`);
 * - presence: `in` or `out`, with its source (the API's `presence.source`): `default` (no shift and
 *   no override: in), `shift`, `agent` (the agent clocked it) or `operator` (a human clocked it);
 * - "on shift" / "off shift" only when a shift is set and decides now (source `shift`).
 */

export type EndpointState = 'active' | 'revoked';

/** Why the presence is what it is, in a few words (never "on shift" unless the shift decides). */
export function presenceReason(p: { presence: Presence; source: PresenceSource }): string {
  switch (p.source) {
    case 'shift':
      return p.presence === 'in' ? 'on shift' : 'off shift';
    case 'agent':
      return `clocked ${p.presence} by its agent`;
    case 'operator':
      return `clocked ${p.presence} by a human`;
    case 'default':
      return 'no shift and no override';
  }
}

/** `in (shift)`: the presence and its source, as the CLI and the board print them. */
export const presenceWithSource = (p: { presence: Presence; source: PresenceSource }): string => `${p.presence} (${p.source})`;

/** Why a presence changed (presence history), in a few words for the board. */
export const CHANGE_REASON_WORDS: Record<PresenceChangeReason, string> = {
  clock_in: 'its agent clocked in',
  clock_out: 'its agent clocked out',
  operator: 'a human clocked it',
  shift_edit: 'a human changed the shift',
  shift_start: 'the shift started',
  shift_end: 'the shift ended',
  override_end: 'a clock-in or clock-out ran out',
};

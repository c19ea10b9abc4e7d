/**
 * Endpoint presence (SPEC-0022), pure: no I/O, no database, no clock reads. Every function takes
 * the instant it decides for. `effective` is the one place the precedence rule lives.
 */
export { CLOCK_IN_DEFAULT_MS, CLOCK_IN_MAX_MS, parseClockInDuration } from './duration.ts';
export { effective, overrideEnd, overrideEndsAtShiftStart, untilOnWire, type EffectivePresence, type Presence, type PresenceInputs, type PresenceSource } from './effective.ts';
export { CLEARED_OVERRIDE, planClockIn, planClockOut, planOperatorClear, planOperatorSet, type OverrideWrite } from './plan.ts';
export { BOUNDARY_LOOKAHEAD_MS, DAY_NAMES, isInShift, nextShiftBoundary, parseShift, type Shift, type ShiftWindow, type Weekday } from './shift.ts';
export { changeReason, PRESENCE_CHANGE_REASONS, type PresenceChangeReason, type PresenceWriteKind } from './change.ts';

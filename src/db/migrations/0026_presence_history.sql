-- Presence history (issue 39 item 2; ADR-0027 deferred it: only the latest change was stored).
-- One row per claimed effective-presence transition, written by the statement that claims it
-- (store/presence.ts claimPresenceTransitions), so a change is recorded exactly once across
-- instances and restarts, whether a write caused it (clock_in, clock_out, the operator, a shift
-- edit) or time did (a shift starting or ending, an override running out). A write that leaves
-- the effective presence as it was claims nothing and records nothing. Kept 30 days (the
-- retention loop), whatever SWITCHBOARD_RETENTION says.
--   at:          when the transition was claimed (the injected clock's now)
--   source:      what decides the presence from then on: shift, agent, operator or default
--   changed_by:  agent, operator:<human_id> or shift (as presence_changed_by)
--   reason:      clock_in, clock_out, operator, shift_edit, shift_start, shift_end, override_end
--   until:       when the presence next changes by itself, as known then (null: never)
CREATE TABLE presence_history (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id   uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  at            timestamptz NOT NULL,
  from_presence text NOT NULL CHECK (from_presence IN ('in', 'out')),
  to_presence   text NOT NULL CHECK (to_presence IN ('in', 'out')),
  source        text NOT NULL CHECK (source IN ('shift', 'agent', 'operator', 'default')),
  changed_by    text NOT NULL,
  reason        text NOT NULL,
  until         timestamptz
);

-- An endpoint's changes, newest first (the API, the CLI, the board's week).
CREATE INDEX presence_history_endpoint_at_idx ON presence_history (endpoint_id, at DESC, id DESC);
-- Retention picks the oldest rows across every endpoint.
CREATE INDEX presence_history_at_idx ON presence_history (at);

-- Who last wrote an endpoint's presence inputs and when (SPEC-0022 REQ "Presence Error Handling
-- and Audit"): an override set or cleared, or a shift set or cleared, by `agent` or
-- `operator:<human_id>`. presence_changed_at/by record the transitions; these record the writes,
-- including those that change no presence (a shift edit, an operator clock-out while already out).
ALTER TABLE endpoints
  ADD COLUMN presence_written_at timestamptz,
  ADD COLUMN presence_written_by text;

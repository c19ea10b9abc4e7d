-- Endpoint presence (SPEC-0022): a weekly shift, an override set by the agent or its human, and
-- the effective presence last acted upon (presence_seen), which the evaluator advances with a
-- conditional update so each transition is decided once across instances and restarts.
ALTER TABLE endpoints
  ADD COLUMN shift               text,
  ADD COLUMN presence_override   text CHECK (presence_override IN ('in','out')),
  ADD COLUMN override_until      timestamptz,
  ADD COLUMN override_set_at     timestamptz,
  ADD COLUMN override_by         text,
  ADD COLUMN presence_seen       text NOT NULL DEFAULT 'in' CHECK (presence_seen IN ('in','out')),
  ADD COLUMN presence_changed_at timestamptz,
  ADD COLUMN presence_changed_by text;

-- The evaluator only looks at endpoints whose presence can differ from the default.
CREATE INDEX endpoints_presence_watch_idx ON endpoints (id)
  WHERE state = 'active' AND (shift IS NOT NULL OR presence_override IS NOT NULL OR presence_seen <> 'in');

-- Which session hears a doorbell (issue 36): a session that has listed or called tools since initialize
-- ranks above one that never did (a proxy's probe), and every ring record says why its session was
-- chosen (domain/doorbell-choice.ts, RingChoiceReason). Rings recorded before this have no reason.
ALTER TABLE mcp_sessions ADD COLUMN called_tool boolean NOT NULL DEFAULT false;
ALTER TABLE doorbell_rings ADD COLUMN reason text
  CHECK (reason IN ('acknowledged_last', 'newest_stream', 'never_called_tool', 'unheard_only', 'no_stream'));

-- Sessions the janitor ended for idleness (no stream, no call for SWITCHBOARD_SESSION_IDLE), per
-- endpoint since it was vended, so `doctor` can say how many dead sessions were cleaned.
ALTER TABLE endpoints ADD COLUMN idle_sessions_ended bigint NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN idle_session_ended_at timestamptz;

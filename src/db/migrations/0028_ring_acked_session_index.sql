-- The unheard sweep marks a session unheard only if it acknowledged nothing since its last three
-- rings were sent (store/sessions.ts markUnheardSessionsUnscoped): rings acknowledged by a session,
-- by when. Without it each sweep read every ring kept (a week of them) into a hash: 577 ms of the
-- pass at 1,000,000 rings, 191 ms with it (bench/loops.ts, issue 40).
CREATE INDEX doorbell_rings_acked_session_idx ON doorbell_rings (acked_session_id, acked_at) WHERE acked_session_id IS NOT NULL;

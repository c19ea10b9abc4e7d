-- The expired-lease index was partial on state = 'claimed' alone, so the planner could use it for
-- any statement that says state = 'claimed' — heartbeat, complete, fail and release of one todo by
-- id. When statistics were taken while nothing was claimed, it looked free, and it was chosen over
-- the primary key: every such update then walked all claimed (and recently claimed) todos. The
-- same rows, indexed under a predicate only a lease comparison implies (a claimed todo always has
-- a lease: see the table's check), serve the reaper and claim_next and nothing else.
DROP INDEX todos_expired_lease_idx;
CREATE INDEX todos_expired_lease_idx ON todos (lease_expires_at) WHERE state = 'claimed' AND lease_expires_at IS NOT NULL;

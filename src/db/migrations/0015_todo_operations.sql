-- Issue 18 item 4: todo operations (cancel, retry, priority, delayed todos).
--
-- Additive and safe while older instances still run beside newer ones: new columns have defaults
-- (no table rewrite), the state check only widens, and the live-key index is left exactly as it
-- was, because every push names its predicate in ON CONFLICT; an index with another predicate
-- would make an older instance's every push fail ("no unique or exclusion constraint matching").
-- A canceled todo is still not live for that index: cancelling gives the todo's idempotency key
-- up (the row keeps it in its result), so a canceled row never holds a slot in it.

-- Higher runs first; -1000..1000.
ALTER TABLE todos ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE todos ADD CONSTRAINT todos_priority_range CHECK (priority BETWEEN -1000 AND 1000) NOT VALID;
ALTER TABLE todos VALIDATE CONSTRAINT todos_priority_range;

-- A delayed todo: pending, and not claimable or rung before run_at. The reaper clears run_at once
-- it has passed (and wakes the endpoint), so the claim scan below only ever walks due rows.
ALTER TABLE todos ADD COLUMN run_at timestamptz;

-- canceled (the A2A spelling): terminal, like done. The old check is narrower, so every existing
-- row passes the new one.
ALTER TABLE todos DROP CONSTRAINT todos_state_check;
ALTER TABLE todos ADD CONSTRAINT todos_state_check
  CHECK (state IN ('pending', 'claimed', 'done', 'failed', 'canceled')) NOT VALID;
ALTER TABLE todos VALIDATE CONSTRAINT todos_state_check;

-- claim_next: one ordered index scan per queue, highest priority first, then oldest, over due
-- pending rows only (a delayed row enters the index when the reaper clears its run_at).
DROP INDEX todos_claim_scan_idx;
CREATE INDEX todos_claim_scan_idx ON todos (endpoint_id, queue, priority DESC, created_at, seq)
  WHERE state = 'pending' AND run_at IS NULL;

-- The delayed rows, by when they come due: the reaper's release and claim_next's "due but not yet
-- released" branch.
CREATE INDEX todos_delayed_idx ON todos (run_at) WHERE state = 'pending' AND run_at IS NOT NULL;

-- Retention also removes canceled todos. The new predicate covers the old one, so an older
-- instance's retention statement can still use this index.
DROP INDEX todos_finished_idx;
CREATE INDEX todos_finished_idx ON todos (updated_at)
  WHERE state = 'done' OR state = 'canceled' OR (state = 'failed' AND next_retry_at IS NULL);

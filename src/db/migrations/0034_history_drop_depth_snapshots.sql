-- todo_history's depth snapshots (pending, claimed_depth at a bucket's end) have been neither
-- written nor read since migration 0031: a point's depth is the depth now less the changes after
-- it (pending_change, claimed_change). Dropping them is a change of the catalog only.
ALTER TABLE todo_history DROP COLUMN pending, DROP COLUMN claimed_depth;

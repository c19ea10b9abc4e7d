-- The heartbeat sweep's pick (store/todos/push.ts chargeDueRingsUnscoped): per receiving endpoint,
-- its pending todos that still have rings left, in ring order (never rung first, then the longest
-- since its last ring; oldest first), so the pick stops at an endpoint's first due ones instead of
-- reading all its pending work. A todo leaves it when claimed or on its last ring (the budget,
-- RING_BUDGET, written as the literal the pick's predicate uses). Issue 40: bench/loops.ts.
CREATE INDEX todos_ring_due_idx ON todos (endpoint_id, last_ringed_at NULLS FIRST, created_at, seq)
  WHERE state = 'pending' AND run_at IS NULL AND ring_attempts < 5;

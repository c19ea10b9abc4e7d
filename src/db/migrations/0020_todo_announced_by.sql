-- How a pending todo was last announced since it became ready (SPEC-0022, issue 34): by its own
-- ring ('ring': the push fan-out, a todo_ready wakeup or the heartbeat sweep) or by a digest that
-- counted it ('digest'), with last_ringed_at its time. A todo is announced by one or the other,
-- never both: the ready ring takes only a row no one announced, and a digest leaves out a row a
-- ring announced after the moment it summarizes. Re-queueing clears both, so the todo is new work.
ALTER TABLE todos ADD COLUMN last_ringed_by text CHECK (last_ringed_by IN ('ring', 'digest'));

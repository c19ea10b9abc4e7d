-- Issue 20: the todo indexes reviewed against the statements that use them (docs/performance.md,
-- "The todo table's indexes"). todos_sweep_idx ordered every pending todo by its last ring for a
-- sweep that no longer reads it that way: the sweep picks its receivers' todos by endpoint
-- (todos_endpoint_updated_idx) and ranks them per endpoint in memory. It cost one more index entry
-- on every push and every ring.
DROP INDEX IF EXISTS todos_sweep_idx;

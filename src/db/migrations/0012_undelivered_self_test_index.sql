-- Every instance looks for self-tests that are not delivered yet every 5 s (the overdue ring and
-- the no_session settlement); only those rows, a handful, need to be found without a scan.
CREATE INDEX doorbell_tests_undelivered_idx ON doorbell_tests (ring_due_at) WHERE delivery IS NULL;

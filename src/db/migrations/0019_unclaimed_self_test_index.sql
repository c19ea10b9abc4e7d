-- Every claim looks for the endpoint's ringing self-test (claim_next takes it before real work)
-- and stamps the test of a self-test todo it claims. Both look only at tests not claimed yet, a
-- handful at any time, while the table keeps every report for a week: without this index each
-- claim scanned the endpoint's reports or the whole table.
CREATE INDEX doorbell_tests_unclaimed_idx ON doorbell_tests (endpoint_id, todo_id) WHERE claimed_at IS NULL;

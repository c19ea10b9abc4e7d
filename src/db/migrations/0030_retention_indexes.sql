-- Retention at 100,000 endpoints (issue 40, bench/loops.ts): what each of its deletes goes by.
--
-- Events routing recorded without a todo (a ping, a delivery a rule dropped or failed on, a repeat
-- of a `once` subject), by arrival: deleted past the retention without reading the old events
-- that live todos keep (store/retention.ts deleteTodolessEventsUnscoped).
CREATE INDEX events_todoless_idx ON events (received_at)
  WHERE disposition IN ('dropped', 'faulted', 'repeat', 'recorded');

-- A client's grants: deleting a client cascades to them (and the retention's check that a client
-- holds none). Without it each deleted client read every grant: 2.5 s per batch of 1,000 clients
-- among 45,000 grants.
CREATE INDEX oauth_grants_client_idx ON oauth_grants (client_id);
-- Codes by expiry, revoked grants by revocation, clients by registration: the retention's picks.
CREATE INDEX oauth_codes_expiry_idx ON oauth_codes (expires_at);
CREATE INDEX oauth_grants_revoked_idx ON oauth_grants (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX oauth_clients_created_idx ON oauth_clients (created_at);

-- Issue 20: a delivery in one statement. The replay check (a signed body this webhook already
-- received within the window answers with what it made) moves from "look for an earlier event
-- under an advisory lock" (two more statements in a transaction) to a key claimed in the
-- delivery's own statement: one row per webhook and body, claimed by INSERT ... ON CONFLICT, which
-- serializes two concurrent copies of one body on the primary key. A key older than the window
-- (SWITCHBOARD_RETENTION) is claimed afresh by the next delivery of that body; retention deletes
-- the rest.
CREATE TABLE replay_keys (
  webhook_id  uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  body_sha256 bytea NOT NULL,
  -- When the delivery that holds the key arrived, and the event it made.
  received_at timestamptz NOT NULL,
  event_id    bigint NOT NULL,
  PRIMARY KEY (webhook_id, body_sha256)
);
CREATE INDEX replay_keys_received_at_idx ON replay_keys (received_at);

-- The keys of the events already kept: per webhook and body, the latest delivery's event.
INSERT INTO replay_keys (webhook_id, body_sha256, received_at, event_id)
SELECT DISTINCT ON (webhook_id, body_sha256) webhook_id, body_sha256, received_at, id
FROM events
WHERE webhook_id IS NOT NULL AND body_sha256 IS NOT NULL
ORDER BY webhook_id, body_sha256, received_at DESC, id DESC;

-- Indexes no statement uses, each one more write on every delivery: no statement looks events up
-- by body any more, and none ever filtered them by source (listings go by endpoint, retention by
-- arrival time).
DROP INDEX events_webhook_body_idx;
DROP INDEX events_received_idx;

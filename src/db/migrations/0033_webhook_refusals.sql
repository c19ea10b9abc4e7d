-- Deliveries a webhook refused (issue 39: a webhook's deliveries by outcome, refused among them).
-- A refused delivery writes no event (a bad signature stores nothing of what it sent), so its count
-- lives here: per webhook, minute and reason (the error code answered), added to by each
-- instance's tally a few seconds at a time (src/services/webhook-refusals.ts), kept as long as the
-- events (SWITCHBOARD_RETENTION; the retention loop).
CREATE TABLE webhook_refusals (
  webhook_id  uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  bucket      timestamptz NOT NULL,
  reason      text NOT NULL,
  n           integer NOT NULL CHECK (n > 0),
  PRIMARY KEY (webhook_id, bucket, reason)
);
-- The retention loop's walk, oldest first.
CREATE INDEX webhook_refusals_bucket_idx ON webhook_refusals (bucket);

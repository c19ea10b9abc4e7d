-- Issue 17 items 11 and 15.
-- A signed delivery's body hash: a captured body replayed under a new delivery id (or a
-- relabelled event header, neither of which is signed) collapses onto the todo it first made,
-- whatever that todo's state, for as long as the event is kept (SWITCHBOARD_RETENTION).
ALTER TABLE events ADD COLUMN body_sha256 bytea;
CREATE INDEX events_webhook_body_idx ON events (webhook_id, body_sha256, received_at) WHERE body_sha256 IS NOT NULL;

-- Retention: finished todos by their last change, events by arrival, and the todo an event made.
CREATE INDEX todos_finished_idx ON todos (updated_at) WHERE state = 'done' OR (state = 'failed' AND next_retry_at IS NULL);
CREATE INDEX events_received_at_idx ON events (received_at);
CREATE INDEX todos_event_idx ON todos (event_id) WHERE event_id IS NOT NULL;

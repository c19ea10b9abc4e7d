-- Webhook routing rules (issue 37): an ordered list of {name, when, action} per webhook, the
-- params its expressions read, and the action for a delivery no rule matched (null: the target
-- queue). Each event says what routing made of it (disposition) and why (routing: the trace,
-- {stage, rule_index, rule_name, action, ...}); each todo carries the trace that made it.
ALTER TABLE webhooks
  ADD COLUMN routing_rules   jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN routing_params  jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN routing_default jsonb;

ALTER TABLE events
  ADD COLUMN disposition text CHECK (disposition IN ('routed', 'dropped', 'faulted', 'repeat', 'recorded')),
  ADD COLUMN routing     jsonb;

ALTER TABLE todos ADD COLUMN routing jsonb;

-- The dry run replays a webhook's latest events.
CREATE INDEX events_webhook_idx ON events (webhook_id, received_at DESC, id DESC) WHERE webhook_id IS NOT NULL;

-- Notify hooks (SPEC-0024): outbound HTTPS calls that tell a consumer with no live MCP session
-- that work is waiting. Owned by one endpoint; secrets sealed like webhook secrets; health kept
-- on the row so the API and the agent can see why a hook went quiet.
CREATE TABLE notify_hooks (
  id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  endpoint_id             uuid NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  url                     text NOT NULL,
  secret                  text NOT NULL,
  prev_secret             text,
  prev_secret_expires_at  timestamptz,
  queues                  text[] NOT NULL DEFAULT '{}',
  ignore_presence         boolean NOT NULL DEFAULT false,
  enabled                 boolean NOT NULL DEFAULT true,
  disabled_reason         text CHECK (disabled_reason IN ('consecutive_failures', 'operator')),
  disabled_at             timestamptz,
  consecutive_failures    integer NOT NULL DEFAULT 0,
  last_attempt_at         timestamptz,
  last_status             integer,
  last_error              text,
  created_by              text NOT NULL,
  created_at              timestamptz NOT NULL,
  rotated_at              timestamptz
);
CREATE INDEX notify_hooks_endpoint_idx ON notify_hooks (endpoint_id, created_at);

-- The cluster's MCP sessions (issue 15). Any instance answers a POST or DELETE for any live
-- session; the GET stream stays on the instance that accepted it, named by stream_instance.
-- Every instance heartbeats its row in instances; deleting a dead instance's row clears the
-- streams it held (on delete set null), so doorbells and counts stop counting them.
CREATE TABLE instances (
  id            text PRIMARY KEY,
  started_at    timestamptz NOT NULL,
  heartbeat_at  timestamptz NOT NULL,
  version       text NOT NULL
);

CREATE TABLE mcp_sessions (
  id                text PRIMARY KEY,
  -- Creation order, for the cap's "seen longest ago" when last_seen_at ties.
  seq               bigint GENERATED ALWAYS AS IDENTITY,
  endpoint_id       uuid NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  protocol_version  text NOT NULL,
  client_name       text NOT NULL,
  client_version    text NOT NULL,
  initialized       boolean NOT NULL DEFAULT false,
  created_at        timestamptz NOT NULL,
  last_seen_at      timestamptz NOT NULL,
  stream_instance   text REFERENCES instances(id) ON DELETE SET NULL,
  stream_opened_at  timestamptz,
  -- A session that never opened a stream expires sooner (issue 17): it cannot be rung.
  ever_streamed     boolean NOT NULL DEFAULT false,
  -- Its last 3 rings went unheard with no acknowledgement from it since (SPEC-0025 REQ-5).
  unheard           boolean NOT NULL DEFAULT false,
  last_ack_at       timestamptz
);
CREATE INDEX mcp_sessions_endpoint_idx ON mcp_sessions (endpoint_id);
CREATE INDEX mcp_sessions_stream_idx ON mcp_sessions (stream_instance) WHERE stream_instance IS NOT NULL;
CREATE INDEX mcp_sessions_idle_idx ON mcp_sessions (last_seen_at) WHERE stream_instance IS NULL;

-- One creation or wakeup ring per todo per minute across every instance.
CREATE TABLE ring_gates (
  todo_id  text PRIMARY KEY,
  rung_at  timestamptz NOT NULL
);

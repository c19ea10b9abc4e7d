-- Doorbell acknowledgement and the self-test (SPEC-0025). A ring is recorded only after a
-- doorbell was written to a session; it ends acknowledged (a claim or ack_doorbell) or unheard
-- (its window passed first). window_seconds is fixed at send time, so every instance sweeps a
-- ring by the same rule.
CREATE TABLE doorbell_rings (
  ring_id           text PRIMARY KEY CHECK (ring_id ~ '^rg_[0-9A-HJKMNP-TV-Z]{26}$'),
  endpoint_id       uuid NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  session_id        text NOT NULL,
  todo_id           text,
  kind              text NOT NULL CHECK (kind IN ('todo', 'digest', 'test')),
  queue             text,
  synthetic         boolean NOT NULL DEFAULT false,
  window_seconds    integer NOT NULL CHECK (window_seconds > 0),
  sent_at           timestamptz NOT NULL,
  acked_at          timestamptz,
  ack_via           text CHECK (ack_via IN ('claim', 'ack')),
  acked_session_id  text,
  unheard_at        timestamptz,
  CHECK ((kind = 'digest') = (todo_id IS NULL))
);
CREATE INDEX doorbell_rings_open_todo_idx ON doorbell_rings (endpoint_id, todo_id) WHERE acked_at IS NULL;
CREATE INDEX doorbell_rings_open_digest_idx ON doorbell_rings (endpoint_id, sent_at) WHERE acked_at IS NULL AND kind = 'digest';
CREATE INDEX doorbell_rings_unheard_sweep_idx ON doorbell_rings (sent_at) WHERE acked_at IS NULL AND unheard_at IS NULL;
CREATE INDEX doorbell_rings_session_idx ON doorbell_rings (session_id, sent_at DESC);
CREATE INDEX doorbell_rings_sent_idx ON doorbell_rings (sent_at);

CREATE TABLE doorbell_tests (
  test_id               text PRIMARY KEY CHECK (test_id ~ '^dt_[0-9A-HJKMNP-TV-Z]{26}$'),
  endpoint_id           uuid NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  todo_id               text NOT NULL,
  wait_seconds          integer NOT NULL CHECK (wait_seconds BETWEEN 10 AND 300),
  created_at            timestamptz NOT NULL,
  ring_due_at           timestamptz NOT NULL,
  expires_at            timestamptz NOT NULL,
  server_version        text NOT NULL,
  stream_attached       boolean NOT NULL,
  channel_capability    jsonb NOT NULL,
  -- The instance that took the test ring (claimed with a conditional update), then what came of it.
  delivering_instance   text,
  delivery              text CHECK (delivery IN ('written', 'no_session', 'no_stream', 'write_failed')),
  delivered_at          timestamptz,
  delivered_session_id  text,
  client_name           text,
  ring_id               text,
  claimed_at            timestamptz
);
CREATE INDEX doorbell_tests_endpoint_idx ON doorbell_tests (endpoint_id, created_at DESC);
CREATE INDEX doorbell_tests_expiry_idx ON doorbell_tests (expires_at);

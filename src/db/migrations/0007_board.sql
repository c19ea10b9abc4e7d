-- The board (the web UI for humans). A browser session is a random cookie kept only as its
-- SHA-256; it lasts 12 hours from sign-in, whatever happens meanwhile. A sign-in link is minted
-- on the server host (switchboard admin login-link), kept as its SHA-256 too, valid 15 minutes
-- and spent by one conditional update.
CREATE TABLE web_sessions (
  token_hash  text PRIMARY KEY,
  human_id    uuid NOT NULL REFERENCES humans(id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL
);
CREATE INDEX web_sessions_human_idx ON web_sessions (human_id);
CREATE INDEX web_sessions_expiry_idx ON web_sessions (expires_at);

CREATE TABLE login_links (
  token_hash  text PRIMARY KEY,
  human_id    uuid NOT NULL REFERENCES humans(id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX login_links_expiry_idx ON login_links (expires_at);

-- The board's live updates ask, every 2 s per signed-in human, which of their todos changed.
CREATE INDEX todos_endpoint_updated_idx ON todos (endpoint_id, updated_at);

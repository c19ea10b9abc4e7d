-- Switchboard as its own OAuth 2.1 authorization server (issue 38): clients that connect by URL alone
-- register themselves (RFC 7591), a human approves a grant on the board, and the grant's tokens open
-- one resource: one endpoint's MCP URL, or /api/v1 acting as the human. Every secret is stored as its
-- SHA-256 hash. A grant is one token family: a reused code or refresh token revokes it whole.
CREATE TABLE oauth_clients (
  client_id     text PRIMARY KEY,
  client_name   text NOT NULL,
  redirect_uris text[] NOT NULL,
  created_at    timestamptz NOT NULL
);

CREATE TABLE oauth_grants (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  client_id    text NOT NULL REFERENCES oauth_clients (client_id) ON DELETE CASCADE,
  human_id     uuid NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
  -- null for an API grant (resource <base>/api): the token acts as the human.
  endpoint_id  uuid REFERENCES endpoints (id) ON DELETE CASCADE,
  resource     text NOT NULL,
  created_at   timestamptz NOT NULL,
  last_used_at timestamptz,
  revoked_at   timestamptz,
  revoked_why  text
);
CREATE INDEX oauth_grants_endpoint_idx ON oauth_grants (endpoint_id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX oauth_grants_human_idx ON oauth_grants (human_id);

CREATE TABLE oauth_codes (
  code_hash      text PRIMARY KEY,
  grant_id       uuid NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
  redirect_uri   text NOT NULL,
  code_challenge text NOT NULL,
  expires_at     timestamptz NOT NULL,
  used_at        timestamptz
);
CREATE INDEX oauth_codes_grant_idx ON oauth_codes (grant_id);

CREATE TABLE oauth_tokens (
  token_hash text PRIMARY KEY,
  grant_id   uuid NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
  kind       text NOT NULL CHECK (kind IN ('access', 'refresh')),
  expires_at timestamptz NOT NULL,
  -- A refresh token is spent by its one rotation; presenting it again revokes the grant.
  used_at    timestamptz
);
CREATE INDEX oauth_tokens_grant_idx ON oauth_tokens (grant_id);
CREATE INDEX oauth_tokens_expiry_idx ON oauth_tokens (expires_at);

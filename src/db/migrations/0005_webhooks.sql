-- Webhooks owned by an endpoint (ingestion, SPEC-0001 minimal v1). The ingest URL's token is
-- the routing key and, for token-trust webhooks, the credential: only its SHA-256 is stored,
-- like every other bearer secret, so the URL is shown once at create and rotate. Signing
-- secrets must be recoverable for HMAC: AES-256-GCM when SWITCHBOARD_SECRET_ENCRYPTION_KEY is
-- set, plaintext otherwise (with a startup warning).
CREATE TABLE webhooks (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  endpoint_id        uuid NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  source_type        text NOT NULL CHECK (source_type IN ('github', 'gitea', 'generic')),
  trust_mode         text NOT NULL CHECK (trust_mode IN ('signed', 'token')),
  target_queue       text NOT NULL,
  ingest_token_hash  text NOT NULL UNIQUE,
  ingest_token_hint  text NOT NULL,
  signing_secret     text,
  created_by         text NOT NULL,
  created_at         timestamptz NOT NULL,
  rotated_at         timestamptz,
  last_delivery_at   timestamptz,
  CHECK ((trust_mode = 'signed') = (signing_secret IS NOT NULL))
);
CREATE INDEX webhooks_endpoint_idx ON webhooks (endpoint_id, created_at);

-- How many webhooks an endpoint's agent may manage itself (the vend-time ceiling).
ALTER TABLE endpoints ADD COLUMN webhook_max integer NOT NULL DEFAULT 1 CHECK (webhook_max >= 0);

ALTER TABLE events
  ADD COLUMN webhook_id  uuid REFERENCES webhooks(id) ON DELETE SET NULL,
  ADD COLUMN endpoint_id uuid REFERENCES endpoints(id) ON DELETE CASCADE;
CREATE INDEX events_endpoint_idx ON events (endpoint_id, received_at DESC, id DESC);

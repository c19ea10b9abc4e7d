-- Humans own agents; agents own endpoints; endpoints own todos. Every agent-facing read
-- and write carries endpoint_id, and every human-facing one reaches endpoints through
-- agents.owner_human_id.

create table humans (
  id            uuid primary key default gen_random_uuid(),
  handle        text not null unique check (handle ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
  display_name  text,
  email         text,
  created_at    timestamptz not null default now()
);

-- Personal access tokens (sbp_...). Only the SHA-256 and a display prefix are kept.
create table human_tokens (
  id            uuid primary key default gen_random_uuid(),
  human_id      uuid not null references humans(id) on delete cascade,
  name          text not null default '',
  token_hash    text not null unique,
  token_prefix  text not null,
  created_at    timestamptz not null default now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
create index human_tokens_human_idx on human_tokens (human_id, created_at desc);

create table agents (
  id              uuid primary key default gen_random_uuid(),
  owner_human_id  uuid not null references humans(id) on delete cascade,
  name            text not null,
  description     text,
  created_at      timestamptz not null default now()
);
create index agents_owner_idx on agents (owner_human_id);

create table endpoints (
  id                 uuid primary key default gen_random_uuid(),
  agent_id           uuid not null references agents(id) on delete cascade,
  slug               text not null unique check (slug ~ '^[a-z0-9-]+$'),
  credential_hash    text not null unique,
  credential_prefix  text not null,
  scope_queues       text[] not null default '{}',
  scope_verbs        text[] not null default '{}',
  state              text not null default 'active' check (state in ('active', 'revoked')),
  created_at         timestamptz not null default now(),
  revoked_at         timestamptz,
  last_seen_at       timestamptz
);
create index endpoints_agent_idx on endpoints (agent_id);

-- One row per accepted producer delivery. Push eligibility is decided from the event's trust.
create table events (
  id             bigint generated always as identity primary key,
  source         text not null,
  family         text not null check (family in ('webhook', 'operator')),
  event_type     text,
  external_id    text,
  trust_mode     text not null check (trust_mode in ('signed', 'token', 'open', 'operator')),
  verified       boolean not null default false,
  verify_detail  text,
  content_type   text,
  headers        jsonb not null default '{}'::jsonb,
  payload        bytea,
  payload_size   integer not null default 0,
  received_at    timestamptz not null default now()
);
create index events_received_idx on events (source, received_at desc);

create table todos (
  id                text primary key check (id ~ '^td_[0-9a-f-]{36}$'),
  -- Tie-breaker for FIFO order when two todos share a created_at.
  seq               bigint generated always as identity,
  endpoint_id       uuid not null references endpoints(id) on delete cascade,
  queue             text not null,
  source            text,
  kind              text,
  title             text not null,
  payload           jsonb not null default '{}'::jsonb,
  payload_size      integer generated always as (octet_length(payload::text)) stored,
  event_id          bigint references events(id) on delete set null,
  idempotency_key   text,
  assignee          text,
  state             text not null default 'pending'
                      check (state in ('pending', 'claimed', 'done', 'failed')),
  owner             text,
  lease_expires_at  timestamptz,
  attempt           integer not null default 0,
  max_attempts      integer not null default 5 check (max_attempts > 0),
  result            jsonb,
  created_at        timestamptz not null,
  updated_at        timestamptz not null,
  claimed_at        timestamptz,
  completed_at      timestamptz,
  next_retry_at     timestamptz,
  last_ringed_at    timestamptz,
  ring_attempts     integer not null default 0,
  -- Self-test rows; every todo read filters them unless it opts in.
  synthetic         boolean not null default false,
  check (state <> 'claimed' or lease_expires_at is not null)
);

-- Dedup over live rows: pending, claimed, or failed with an open retry window.
create unique index todos_live_key_idx on todos (endpoint_id, idempotency_key)
  where idempotency_key is not null and state <> 'done' and (state <> 'failed' or next_retry_at is not null);
create index todos_claim_scan_idx on todos (endpoint_id, queue, created_at, seq) where state = 'pending';
create index todos_list_idx on todos (endpoint_id, created_at desc, seq desc);
create index todos_expired_lease_idx on todos (lease_expires_at) where state = 'claimed';
create index todos_due_retry_idx on todos (next_retry_at) where state = 'failed' and next_retry_at is not null;
create index todos_sweep_idx on todos (last_ringed_at nulls first, created_at) where state = 'pending';

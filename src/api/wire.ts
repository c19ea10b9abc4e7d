/**
 * The JSON the /api/v1 routes answer with, shared by the handlers (which are checked against
 * these with `satisfies`) and the CLI (which reads them). Times are RFC 3339 strings. Type-only:
 * importing this file loads no server code.
 */
import type { BridgeServerEntry, HttpServerEntry, McpJson } from '../domain/connect-instructions.ts';
import type { Presence, PresenceSource } from '../domain/presence/index.ts';
import type { Verdict } from '../services/doorbell/self-tests.ts';

export type { ErrorEnvelope } from '../web/errors.ts';
export type { PresenceView } from '../services/presence.ts';
export type { TodoDetail, TodoState, TodoStateFilter, TodoSummary } from '../services/todos.ts';
import type { TodoState, TodoSummary } from '../services/todos.ts';

/** GET /healthz with `Accept: application/json` (outside /api/v1, read by `doctor`). */
export interface HealthView {
  status: string;
  version?: string;
}

/** GET /me */
export interface MeView {
  id: string;
  handle: string;
  display_name: string | null;
  email: string | null;
}

/** One endpoint: GET /endpoints (a list of them), GET /endpoints/{ref}. */
export interface EndpointView {
  id: string;
  slug: string;
  agent_name: string;
  /** `active`, or `revoked` (final). The board and the CLI use these words too (README, "Words for state and presence"). */
  state: 'active' | 'revoked';
  queues: string[];
  verbs: string[];
  mcp_url: string;
  created_at: string;
  revoked_at: string | null;
  last_seen_at: string | null;
  /**
   * `in` or `out`, and what decides it: `default` (no shift, no override), `shift`, `agent` or
   * `operator` (an override). "On shift" means source `shift` and presence `in`, nothing else.
   */
  presence: { presence: Presence; source: PresenceSource; until: string | null };
  shift: string | null;
  /** Sessions attached to the instance that answered. */
  sessions: number;
  unheard_sessions: number;
}

/**
 * POST /endpoints: the endpoint, its credential (shown this once, here only) and how to connect
 * (domain/connect-instructions.ts). The snippets name ${SWITCHBOARD_AGENT_TOKEN}, never the token.
 */
export interface VendResult extends EndpointView {
  token: string;
  /** .mcp.json, direct Streamable HTTP: tools. */
  mcp_json: McpJson<HttpServerEntry>;
  /** .mcp.json through `switchboard bridge` (stdio): tools and doorbells. */
  mcp_json_bridge: McpJson<BridgeServerEntry>;
  /** The instructions as plain text, the same the CLI prints; no credential in it. */
  connect: string;
}

/** POST /endpoints/{ref}/revoke */
export interface RevokeResult extends EndpointView {
  todos_dead_lettered: number;
}

/** POST /endpoints/{ref}/todos: 201 when created, 200 when a live todo with the same key answered. */
export interface PushResult {
  id: string;
  endpoint_id: string;
  slug: string;
  queue: string;
  state: TodoState;
  created: boolean;
  event_id: number | null;
}

/**
 * GET /endpoints/{ref}/todos: a page, newest first. `next_cursor` (opaque) asks for the next page
 * as `?cursor=`; null on the last page. GET /endpoints/{ref}/todos/{id}, and POST .../cancel and
 * .../retry, answer one TodoDetail.
 */
export interface TodoList {
  todos: TodoSummary[];
  next_cursor: string | null;
}

export interface ChannelCapability {
  server_advertised: boolean;
  sessions: { client_name: string; client_version: string; stream_open: boolean }[];
  note: string;
}

/** POST /endpoints/{ref}/doorbell-tests */
export interface DoorbellTestStarted {
  test_id: string;
  todo_id: string;
  report_after: string;
  server_version: string;
  stream_attached: boolean;
  channel_capability: ChannelCapability;
}

/** GET /endpoints/{ref}/doorbell-tests/{test_id} */
export interface DoorbellTestReport {
  test_id: string;
  todo_id: string;
  wait_seconds: number;
  server_version: string;
  stream_attached: boolean;
  /** As recorded at start (ChannelCapability for reports this version wrote). */
  channel_capability: unknown;
  delivered: { written: boolean; at: string | null; session_id: string | null };
  claimed_within_seconds: number | null;
  verdict: Verdict;
  hints: string[];
}

/** A webhook as listed: never its secrets, only a hint of its ingest URL. */
export interface WebhookView {
  webhook_id: string;
  endpoint_id: string;
  source_type: string;
  trust_mode: 'signed' | 'token';
  target_queue: string;
  ingest_url_hint: string;
  created_by: string;
  created_at: string;
  rotated_at: string | null;
  last_delivery_at: string | null;
}

/** POST /endpoints/{ref}/webhooks, POST /webhooks/{id}/rotate: the URL (and secret) shown this once. */
export interface MintedWebhookView extends WebhookView {
  ingest_url: string;
  signing_secret?: string;
}

/** GET /endpoints/{ref}/webhooks */
export interface WebhookList {
  webhooks: WebhookView[];
}

/** DELETE /webhooks/{id} */
export interface WebhookDeleted {
  webhook_id: string;
  deleted: boolean;
}

/** One delivery: GET /events?endpoint=REF */
export interface EventView {
  id: string;
  source: string;
  event_type: string | null;
  external_id: string | null;
  trust_mode: string;
  verified: boolean;
  verify_detail: string | null;
  content_type: string | null;
  headers: Record<string, string>;
  payload_size: number;
  webhook_id: string | null;
  received_at: string;
  todo_id: string | null;
  disposition: 'routed' | 'recorded';
}

export interface EventList {
  events: EventView[];
}

/** A notify hook as listed (a query string in its URL is shown redacted). */
export interface HookView {
  hook_id: string;
  url: string;
  queues: string[];
  ignore_presence: boolean;
  enabled: boolean;
  disabled_reason: 'consecutive_failures' | 'operator' | null;
  disabled_at: string | null;
  consecutive_failures: number;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
}

/** POST /endpoints/{ref}/hooks, POST /hooks/{id}/rotate: the signing secret shown this once. */
export interface MintedHookView extends HookView {
  signing_secret: string;
}

/** GET /endpoints/{ref}/hooks */
export interface HookList {
  hooks: HookView[];
  ceiling: { max: number; used: number };
}

/** DELETE /hooks/{id} */
export interface HookDeleted {
  hook_id: string;
  deleted: boolean;
}

/**
 * The JSON the /api/v1 routes answer with: one zod schema per answer, and its TypeScript type
 * (`z.output` of it, under the name the handlers and the CLI import). The handlers are checked
 * against the types (return types and `satisfies`), and the OpenAPI document
 * (GET /api/v1/openapi.json) describes each success answer with the schema, so the two cannot
 * drift. Times are RFC 3339 strings. Loads zod only and imports no server code (the error
 * envelope's type aside): the CLI reads this file, and so does the type check of a client
 * generated from the document. Where a type here mirrors one the domain or the services build
 * (a todo, a presence, a verdict), wire-mirrors.ts checks at compile time that the two are equal.
 */
import { z } from 'zod';

export type { ErrorEnvelope } from '../web/errors.ts';

/** Every time on the wire (domain/time.ts rfc3339). A component of its own: the pattern is long. */
const timestamp = z.iso.datetime().meta({ id: 'Timestamp', description: 'RFC 3339 in UTC, e.g. 2025-01-31T09:00:00Z' });
const count = z.number().int().nonnegative();

const presence = z.enum(['in', 'out']);
const presenceSource = z.enum(['shift', 'agent', 'operator', 'default']);
const todoState = z.enum(['pending', 'claimed', 'done', 'failed', 'canceled']);
const verdict = z.enum(['pending', 'pass', 'no_session', 'no_stream', 'write_failed', 'unheard']);

export type TodoState = z.output<typeof todoState>;

/** GET /healthz with `Accept: application/json` (outside /api/v1, read by `doctor`). */
export const healthViewSchema = z.object({ status: z.string(), version: z.string().optional() }).meta({ id: 'HealthView' });
export type HealthView = z.output<typeof healthViewSchema>;

/** GET /me */
export const meViewSchema = z
  .object({ id: z.string(), handle: z.string(), display_name: z.string().nullable(), email: z.string().nullable() })
  .meta({ id: 'MeView', description: 'The human the token belongs to' });
export type MeView = z.output<typeof meViewSchema>;

/** One endpoint: GET /endpoints (a list of them), GET /endpoints/{ref}. */
export const endpointViewSchema = z
  .object({
    id: z.string(),
    slug: z.string(),
    agent_name: z.string(),
    // The board and the CLI use these words too (README, "Words for state and presence").
    state: z.enum(['active', 'revoked']).describe('`active`, or `revoked` (final)'),
    queues: z.array(z.string()),
    verbs: z.array(z.string()),
    mcp_url: z.string(),
    created_at: timestamp,
    revoked_at: timestamp.nullable(),
    last_seen_at: timestamp.nullable(),
    presence: z
      .object({ presence, source: presenceSource, until: timestamp.nullable() })
      .describe(
        '`in` or `out`, and what decides it: `default` (no shift, no override), `shift`, `agent` or `operator` (an override). "On shift" means source `shift` and presence `in`, nothing else.',
      ),
    shift: z.string().nullable(),
    sessions: count.describe('Live sessions across the cluster: a stream open, or a call within SWITCHBOARD_SESSION_IDLE'),
    unheard_sessions: count,
    idle_sessions_ended: count.describe('Sessions ended for idleness (no stream, no call for SWITCHBOARD_SESSION_IDLE) since the endpoint was vended'),
  })
  .meta({ id: 'EndpointView', description: 'One of your endpoints' });
export type EndpointView = z.output<typeof endpointViewSchema>;

export const endpointListSchema = z.array(endpointViewSchema);

const httpServerEntry = z.object({ type: z.literal('http'), url: z.string(), headers: z.object({ Authorization: z.string() }) });
const bridgeServerEntry = z.object({ command: z.string(), args: z.array(z.string()), env: z.record(z.string(), z.string()) });
const mcpJson = <E extends z.ZodType>(entry: E) => z.object({ mcpServers: z.record(z.string(), entry) });

/**
 * POST /endpoints: the endpoint, its credential (shown this once, here only) and how to connect
 * (domain/connect-instructions.ts). The snippets name ${SWITCHBOARD_AGENT_TOKEN}, never the token.
 */
export const vendResultSchema = endpointViewSchema
  .extend({
    token: z.string().describe('The endpoint\'s credential, shown this once'),
    mcp_json: mcpJson(httpServerEntry).describe('.mcp.json, direct Streamable HTTP: tools'),
    mcp_json_bridge: mcpJson(bridgeServerEntry).describe('.mcp.json through `switchboard bridge` (stdio): tools and doorbells'),
    connect: z.string().describe('The instructions as plain text, the same the CLI prints; no credential in it'),
  })
  .meta({ id: 'VendResult', description: 'The endpoint vended, its credential and how to connect' });
export type VendResult = z.output<typeof vendResultSchema>;

/** POST /endpoints/{ref}/revoke */
export const revokeResultSchema = endpointViewSchema.extend({ todos_dead_lettered: count }).meta({ id: 'RevokeResult' });
export type RevokeResult = z.output<typeof revokeResultSchema>;

/** POST /endpoints/{ref}/todos: 201 when created, 200 when a live todo with the same key answered. */
export const pushResultSchema = z
  .object({
    id: z.string(),
    endpoint_id: z.string(),
    slug: z.string(),
    queue: z.string(),
    state: todoState,
    created: z.boolean().describe('False when a live todo with the same key answered'),
    event_id: z.number().int().nullable(),
  })
  .meta({ id: 'PushResult' });
export type PushResult = z.output<typeof pushResultSchema>;

/** Why a delivery became what it did (domain/routing/route.ts RouteTrace). */
export const routeTraceSchema = z
  .object({
    stage: z.enum(['rule', 'default']),
    rule_index: z.number().int().nullable(),
    rule_name: z.string().nullable(),
    action: z.enum(['queue', 'drop', 'fanout', 'fault']),
    queue: z.string().optional(),
    endpoints: z.array(z.string()).optional(),
    once: z.boolean().optional(),
    cause: z.enum(['error', 'not_bool', 'rule_budget', 'delivery_budget']).optional(),
    message: z.string().optional(),
  })
  .meta({ id: 'RouteTrace' });
export type RouteTraceView = z.output<typeof routeTraceSchema>;

/** The compact form a listing carries (store/todos/row.ts summarizeTodo): never the payload. */
export const todoSummarySchema = z
  .object({
    id: z.string(),
    queue: z.string(),
    source: z.string().optional(),
    kind: z.string().optional(),
    title: z.string(),
    state: todoState,
    owner: z.string().optional(),
    assignee: z.string().optional(),
    attempt: count,
    max_attempts: count,
    lease_expires_at: timestamp.optional().describe('Only while claimed'),
    next_retry_at: timestamp.optional().describe('Only while a failed todo waits for its retry'),
    created_at: timestamp,
    payload_size: count,
    priority: z.number().int().optional().describe('Only when not 0'),
    run_at: timestamp.optional().describe('Only while a delayed todo waits'),
    dead: z.literal(true).optional().describe('Only on a dead letter'),
  })
  .meta({ id: 'TodoSummary' });
export type TodoSummary = z.output<typeof todoSummarySchema>;

/** One todo in full, for its owner (store/todos/row.ts detailTodo): every lifecycle field, the payload and the result. */
export const todoDetailSchema = todoSummarySchema
  .omit({ priority: true, run_at: true, dead: true, next_retry_at: true, lease_expires_at: true })
  .extend({
    endpoint_id: z.string(),
    priority: z.number().int(),
    run_at: timestamp.nullable().describe('While a delayed todo waits: when it becomes claimable'),
    dead: z.boolean().describe('A dead letter: failed, no retry coming'),
    next_retry_at: timestamp.nullable(),
    lease_expires_at: timestamp.nullable(),
    claimed_at: timestamp.nullable(),
    completed_at: timestamp.nullable(),
    updated_at: timestamp,
    payload: z.unknown().describe('Any JSON'),
    result: z.unknown().describe('Any JSON; null until the todo is done'),
    routing: routeTraceSchema.nullable().describe("Why it exists: the routing trace of the webhook delivery that made it (the rule, or the default); null for an operator's push"),
  })
  .meta({ id: 'TodoDetail' });
export type TodoDetail = z.output<typeof todoDetailSchema>;

/**
 * GET /endpoints/{ref}/todos: a page, newest first. `next_cursor` (opaque) asks for the next page
 * as `?cursor=`; null on the last page. GET /endpoints/{ref}/todos/{id}, and POST .../cancel and
 * .../retry, answer one TodoDetail.
 */
export const todoListSchema = z
  .object({ todos: z.array(todoSummarySchema), next_cursor: z.string().nullable().describe('Pass as `?cursor=` for the next page; null on the last') })
  .meta({ id: 'TodoList' });
export type TodoList = z.output<typeof todoListSchema>;

/** GET/PUT/DELETE /endpoints/{ref}/presence, PUT /endpoints/{ref}/shift (services/presence.ts). */
export const presenceViewSchema = z
  .object({
    presence,
    source: presenceSource,
    until: timestamp.nullable(),
    shift: z.string().nullable(),
    pending: count.describe('Todos an agent could claim now'),
  })
  .meta({ id: 'PresenceView' });
export type PresenceView = z.output<typeof presenceViewSchema>;

/** Why a presence changed (domain/presence/change.ts): the agent's verbs, a human's write, or time. */
const presenceChangeReason = z.enum(['clock_in', 'clock_out', 'operator', 'shift_edit', 'shift_start', 'shift_end', 'override_end']);

/** One change of an endpoint's effective presence, as presence history keeps it (30 days). */
export const presenceChangeSchema = z
  .object({
    at: timestamp.describe('When the change was decided (claimed): at the write, or at the first evaluation after a boundary'),
    from: presence,
    to: presence,
    source: presenceSource.describe('What decides from this change on'),
    by: z.string().describe('`agent`, `operator:<human id>`, or `shift` (a boundary, or an override running out)'),
    by_handle: z.string().nullable().describe("The operator's handle when `by` names a human; null otherwise"),
    reason: presenceChangeReason.describe(
      '`clock_in`/`clock_out` (the agent), `operator` (a human set or cleared an override), `shift_edit` (a human changed the shift), `shift_start`/`shift_end` (a boundary), `override_end` (an override ran out)',
    ),
    until: timestamp.nullable().describe('When the presence next changes by itself, as known at the change; null: not by itself'),
  })
  .meta({ id: 'PresenceChange' });
export type PresenceChange = z.output<typeof presenceChangeSchema>;

/** GET /endpoints/{ref}/presence/history: newest first. */
export const presenceHistorySchema = z
  .object({
    since: timestamp.describe('The oldest time asked for (default 7 days ago); history is kept 30 days'),
    changes: z.array(presenceChangeSchema),
  })
  .meta({ id: 'PresenceHistory' });
export type PresenceHistory = z.output<typeof presenceHistorySchema>;

export const channelCapabilitySchema = z
  .object({
    server_advertised: z.boolean(),
    sessions: z.array(z.object({ client_name: z.string(), client_version: z.string(), stream_open: z.boolean() })),
    note: z.string(),
  })
  .meta({ id: 'ChannelCapability' });
export type ChannelCapability = z.output<typeof channelCapabilitySchema>;

/** POST /endpoints/{ref}/doorbell-tests */
export const doorbellTestStartedSchema = z
  .object({
    test_id: z.string(),
    todo_id: z.string(),
    report_after: timestamp,
    server_version: z.string(),
    stream_attached: z.boolean(),
    channel_capability: channelCapabilitySchema,
  })
  .meta({ id: 'DoorbellTestStarted' });
export type DoorbellTestStarted = z.output<typeof doorbellTestStartedSchema>;

/** GET /endpoints/{ref}/doorbell-tests/{test_id} */
export const doorbellTestReportSchema = z
  .object({
    test_id: z.string(),
    todo_id: z.string(),
    wait_seconds: z.number(),
    server_version: z.string(),
    stream_attached: z.boolean(),
    channel_capability: z.unknown().describe('As recorded at start (a ChannelCapability for reports this version wrote)'),
    delivered: z.object({ written: z.boolean(), at: timestamp.nullable(), session_id: z.string().nullable() }),
    claimed_within_seconds: z.number().nullable(),
    verdict,
    hints: z.array(z.string()),
  })
  .meta({ id: 'DoorbellTestReport' });
export type DoorbellTestReport = z.output<typeof doorbellTestReportSchema>;

const routeActionSchema = z.union([z.object({ drop: z.literal(true) }), z.object({ queue: z.string(), endpoints: z.array(z.string()).optional(), once: z.boolean().optional() })]);

/** GET, PUT /endpoints/{ref}/webhooks/{id}/rules, and POST .../rules/test. */
export const webhookRulesSchema = z
  .object({
    webhook_id: z.string(),
    rules: z.array(z.object({ name: z.string(), when: z.string(), action: routeActionSchema })),
    params: z.record(z.string(), z.unknown()),
    default_action: routeActionSchema.nullable().describe('For a delivery no rule matched; null: a todo in target_queue'),
    target_queue: z.string(),
    dry_run: z
      .array(
        z.object({
          event_id: z.string(),
          event: z.string().nullable(),
          received_at: timestamp.optional(),
          routed: z.boolean().describe('false for a delivery recorded before routing (a ping, a test delivery): the rules never see it'),
          would: z.object({ action: z.enum(['queue', 'drop', 'fanout', 'fault']), queue: z.string().nullable(), endpoints: z.array(z.string()), trace: routeTraceSchema }),
          did: z.object({ disposition: z.string().nullable(), todos: z.array(z.object({ queue: z.string(), slug: z.string() })), trace: z.unknown() }),
        }),
      )
      .optional()
      .describe('On a write or a test: the 50 latest events replayed, what each would become beside what it became'),
  })
  .meta({ id: 'WebhookRules' });
export type WebhookRules = z.output<typeof webhookRulesSchema>;

/** A webhook as listed: never its secrets, only a hint of its ingest URL. */
export const webhookViewSchema = z
  .object({
    webhook_id: z.string(),
    endpoint_id: z.string(),
    source_type: z.string(),
    trust_mode: z.enum(['signed', 'token']),
    target_queue: z.string(),
    ingest_url_hint: z.string(),
    created_by: z.string(),
    created_at: timestamp,
    rotated_at: timestamp.nullable(),
    last_delivery_at: timestamp.nullable(),
  })
  .meta({ id: 'WebhookView' });
export type WebhookView = z.output<typeof webhookViewSchema>;

/** POST /endpoints/{ref}/webhooks, POST /webhooks/{id}/rotate: the URL (and secret) shown this once. */
export const mintedWebhookViewSchema = webhookViewSchema
  .extend({
    ingest_url: z.string().describe('Shown this once'),
    signing_secret: z.string().optional().describe('For github and gitea; shown this once'),
  })
  .meta({ id: 'MintedWebhookView' });
export type MintedWebhookView = z.output<typeof mintedWebhookViewSchema>;

/** GET /endpoints/{ref}/webhooks */
export const webhookListSchema = z.object({ webhooks: z.array(webhookViewSchema) }).meta({ id: 'WebhookList' });
export type WebhookList = z.output<typeof webhookListSchema>;

/** DELETE /webhooks/{id} */
export const webhookDeletedSchema = z.object({ webhook_id: z.string(), deleted: z.boolean() }).meta({ id: 'WebhookDeleted' });
export type WebhookDeleted = z.output<typeof webhookDeletedSchema>;

/** One delivery: GET /events?endpoint=REF */
export const eventViewSchema = z
  .object({
    id: z.string(),
    source: z.string(),
    event_type: z.string().nullable(),
    external_id: z.string().nullable(),
    trust_mode: z.string(),
    verified: z.boolean(),
    verify_detail: z.string().nullable(),
    content_type: z.string().nullable(),
    headers: z.record(z.string(), z.string()),
    payload_size: count,
    webhook_id: z.string().nullable(),
    received_at: timestamp,
    todo_id: z.string().nullable(),
    disposition: z.enum(['routed', 'recorded', 'dropped', 'faulted', 'repeat']).describe('What routing made of it: `routed` (todos made), `recorded` (a ping), `dropped` by a rule, `faulted` (a rule failed: no todo, 503), `repeat` (a `once` subject already had a live todo)'),
    routing: routeTraceSchema.nullable().describe('Why: the routing trace'),
  })
  .meta({ id: 'EventView' });
export type EventView = z.output<typeof eventViewSchema>;

export const eventListSchema = z.object({ events: z.array(eventViewSchema) }).meta({ id: 'EventList' });
export type EventList = z.output<typeof eventListSchema>;

/** A notify hook as listed (a query string in its URL is shown redacted). */
export const hookViewSchema = z
  .object({
    hook_id: z.string(),
    url: z.string(),
    queues: z.array(z.string()),
    ignore_presence: z.boolean(),
    enabled: z.boolean(),
    disabled_reason: z.enum(['consecutive_failures', 'operator']).nullable(),
    disabled_at: timestamp.nullable(),
    consecutive_failures: count,
    last_attempt_at: timestamp.nullable(),
    last_status: z.number().int().nullable(),
    last_error: z.string().nullable(),
    created_at: timestamp,
  })
  .meta({ id: 'HookView' });
export type HookView = z.output<typeof hookViewSchema>;

/** POST /endpoints/{ref}/hooks, POST /hooks/{id}/rotate: the signing secret shown this once. */
export const mintedHookViewSchema = hookViewSchema.extend({ signing_secret: z.string().describe('Shown this once') }).meta({ id: 'MintedHookView' });
export type MintedHookView = z.output<typeof mintedHookViewSchema>;

/** GET /endpoints/{ref}/hooks */
export const hookListSchema = z
  .object({ hooks: z.array(hookViewSchema), ceiling: z.object({ max: count, used: count }) })
  .meta({ id: 'HookList' });
export type HookList = z.output<typeof hookListSchema>;

/** DELETE /hooks/{id} */
export const hookDeletedSchema = z.object({ hook_id: z.string(), deleted: z.boolean() }).meta({ id: 'HookDeleted' });
export type HookDeleted = z.output<typeof hookDeletedSchema>;

/** One OAuth grant of an endpoint as the API shows it: who holds it and when it was last used; never a token. */
export const grantViewSchema = z
  .object({
    id: z.string(),
    client_id: z.string(),
    client_name: z.string().describe('As the client named itself at registration (unverified)'),
    created_at: z.string(),
    last_used_at: z.string().nullable(),
  })
  .meta({ id: 'Grant' });
export type GrantView = z.output<typeof grantViewSchema>;
/** GET /endpoints/{ref}/grants */
export const grantListSchema = z.object({ grants: z.array(grantViewSchema) }).meta({ id: 'GrantList' });
/** DELETE /endpoints/{ref}/grants/{id} */
export const grantRevokedSchema = z.object({ grant_id: z.string(), revoked: z.literal(true) }).meta({ id: 'GrantRevoked' });
export type GrantRevoked = z.output<typeof grantRevokedSchema>;

/** One point of queue history (GET /endpoints/{ref}/history). */
export const historyPointSchema = z
  .object({
    t: z.string().describe('The start of the point (RFC 3339)'),
    created: z.number().int(),
    claimed: z.number().int(),
    completed: z.number().int(),
    failed: z.number().int().describe('Failures, retried or not'),
    dead: z.number().int().describe('Failures with no retry left'),
    pending: z.number().int().describe("Depth at the point's end"),
    claimed_depth: z.number().int(),
    wait_p50_ms: z.number().nullable().describe('Claim wait (created to claimed), median, as a histogram bin bound'),
    wait_p95_ms: z.number().nullable(),
    rings_sent: z.number().int(),
    heard_claim: z.number().int().describe('Rings sent in this point later acknowledged by a claim'),
    heard_ack: z.number().int().describe('... or by ack_doorbell'),
    unheard: z.number().int(),
    digests: z.number().int(),
  })
  .meta({ id: 'HistoryPoint' });
export const historyViewSchema = z
  .object({ range: z.enum(['1h', '24h', '7d']), step_seconds: z.number().int(), from: z.string(), to: z.string(), points: z.array(historyPointSchema) })
  .meta({ id: 'History' });
export type HistoryViewWire = z.output<typeof historyViewSchema>;

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../lib/clock.ts';
import { SwitchboardError } from '../domain/errors.ts';
import { mcpUrl } from '../domain/mcp-client.ts';
import { connectInstructions, connectText } from '../domain/connect-instructions.ts';
import { CONNECT_GUIDE_PATH } from '../domain/guides.ts';
import type { Endpoint, EndpointService } from '../services/endpoints.ts';
import { rfc3339 } from '../domain/time.ts';
import type { TodoService } from '../services/todos.ts';
import type { OperatorPresence } from '../services/presence-operator.ts';
import { inputsOf } from '../services/presence.ts';
import { effective, untilOnWire } from '../domain/presence/index.ts';
import { humanGuard } from './auth.ts';
import { endpointListSchema, endpointViewSchema, meViewSchema, revokeResultSchema, vendResultSchema, type EndpointView, type MeView, type RevokeResult, type VendResult } from './wire.ts';
import type { Humans } from '../services/humans.ts';
import { registerDoorbellTestRoutes } from './doorbell-tests.ts';
import { registerPresenceRoutes } from './presence.ts';
import type { SelfTests } from '../services/doorbell/self-tests.ts';
import type { Webhooks } from '../services/webhooks.ts';
import { registerWebhookRoutes } from './webhooks.ts';
import { registerHookRoutes } from './notify-hooks.ts';
import type { NotifyHooks } from '../services/notify-hooks.ts';
import { sendError } from '../web/errors.ts';
import type { AuthFailures } from '../web/auth-failures.ts';
import { RateLimiter } from '../lib/rate-limit.ts';
import { parseInput } from '../domain/validate.ts';
import { registerTodoRoutes } from './todos.ts';
import { doc, registerOpenApi } from './openapi.ts';
import { VERSION } from '../lib/version.ts';

export interface ApiDeps {
  humans: Humans;
  clock: Clock;
  /** The public base URL; a function because a test server learns its port only after listening. */
  baseUrl: () => string;
  endpoints: EndpointService;
  todos: TodoService;
  operatorPresence: OperatorPresence;
  selfTests: SelfTests;
  webhooks: Webhooks;
  hooks: NotifyHooks;
  /** Instance-local: how many sessions of the endpoint are attached here, and how many are unheard. */
  /** Per endpoint, its sessions across the cluster and how many are unheard. */
  sessionCounts?: (endpointIds: readonly string[]) => Promise<Map<string, SessionCountView>>;
  /** The per-address limit on failed authentications, shared with the board and /mcp. */
  authFailures: AuthFailures;
}

/** Per personal token: reads 20/s (burst 40), writes 5/s (burst 20). */
export const API_READ_LIMIT = { rate: 20, burst: 40 };
export const API_WRITE_LIMIT = { rate: 5, burst: 20 };
export const API_BODY_LIMIT = 64 * 1024;

export function endpointOut(
  e: Endpoint,
  baseUrl: string,
  now: Date,
  counts: { sessions: number; unheard_sessions: number } = { sessions: 0, unheard_sessions: 0 },
): EndpointView {
  const eff = effective(inputsOf(e), now);
  return {
    id: e.id,
    slug: e.slug,
    agent_name: e.agent_name,
    state: e.state,
    queues: e.scope_queues,
    verbs: e.scope_verbs,
    mcp_url: mcpUrl(baseUrl, e.slug),
    created_at: rfc3339(e.created_at),
    revoked_at: rfc3339(e.revoked_at) ?? null,
    last_seen_at: rfc3339(e.last_seen_at) ?? null,
    presence: { presence: eff.presence, source: eff.source, until: untilOnWire(eff.until) },
    shift: e.shift,
    sessions: counts.sessions,
    unheard_sessions: counts.unheard_sessions,
  };
}

const vendBody = z
  .object({
    name: z.string({ error: 'is required and must be a string' }),
    queues: z.array(z.string(), { error: 'must be an array of queue names' }).optional(),
    verbs: z.array(z.string(), { error: 'must be an array of verb names' }).optional(),
  })
  .strict();

/** One endpoint's sessions across the cluster, as the endpoint views carry them. */
export interface SessionCountView {
  sessions: number;
  unheard_sessions: number;
}

export function registerApi(app: FastifyInstance, deps: ApiDeps): void {
  const { clock, endpoints } = deps;
  const base = deps.baseUrl;
  const countsOf = async (endpointIds: readonly string[]) => (await deps.sessionCounts?.(endpointIds)) ?? new Map<string, SessionCountView>();
  const noSessions: SessionCountView = { sessions: 0, unheard_sessions: 0 };
  const readLimiter = new RateLimiter(API_READ_LIMIT, clock);
  const writeLimiter = new RateLimiter(API_WRITE_LIMIT, clock);

  registerOpenApi(app, { prefix: '/api/v1', version: VERSION, baseUrl: base });
  app.register(
    async (api) => {
      api.addHook('onRequest', humanGuard(deps.humans, deps.authFailures));
      api.addHook('onRequest', async (req: FastifyRequest) => {
        const write = req.method !== 'GET' && req.method !== 'HEAD';
        const wait = (write ? writeLimiter : readLimiter).take(req.humanTokenId!);
        if (wait > 0) {
          throw new SwitchboardError('rate_limited', `too many ${write ? 'writes' : 'reads'} with this token; retry in ${wait} s`, {
            retry_after: wait,
          });
        }
      });

      // JSON in: without this, fastify's built-in text/plain parser hands a handler a string (a 400)
      // where every other non-JSON body gets 415.
      api.removeContentTypeParser('text/plain');
      // An unknown route under /api/v1 gets its 404 from this context, so the guard above runs first:
      // without a token it is the same 401 as any other route.
      api.setNotFoundHandler(async (_req, reply) => sendError(reply, new SwitchboardError('not_found', 'no such route')));

      const human = (req: FastifyRequest) => req.human!;
      const ref = (req: FastifyRequest) => (req.params as { ref: string }).ref;

      api.get('/me', doc({ tag: 'account', summary: 'The human the token belongs to', ok: { status: 200, description: '{id, handle, display_name, email}' }, response: meViewSchema }), async (req): Promise<MeView> => {
        const h = human(req);
        return { id: h.id, handle: h.handle, display_name: h.display_name, email: h.email };
      });

      api.post(
        '/endpoints',
        doc({
          tag: 'endpoints',
          summary: 'Vend an endpoint: an MCP URL and its credential for one agent',
          body: vendBody,
          ok: { status: 201, description: 'The endpoint, its `token` (shown once), `mcp_json`, `mcp_json_bridge` and `connect` instructions' },
          response: vendResultSchema,
        }),
        async (req, reply: FastifyReply) => {
        const body = parseInput(vendBody, req.body ?? {});
        const { endpoint, credential } = await endpoints.vend(human(req).id, body);
        const out = endpointOut(endpoint, base(), clock.now());
        const connect = connectInstructions({ mcpUrl: out.mcp_url, slug: out.slug, guideUrl: base() + CONNECT_GUIDE_PATH });
        return reply.code(201).send({
          ...out,
          token: credential,
          mcp_json: connect.http.mcpJson,
          mcp_json_bridge: connect.bridge.mcpJson,
          connect: connectText(connect),
        } satisfies VendResult);
      });

      api.get('/endpoints', doc({ tag: 'endpoints', summary: 'Your endpoints, with presence and the cluster\'s session counts', ok: { status: 200, description: 'An array of endpoints' }, response: endpointListSchema }), async (req): Promise<EndpointView[]> => {
        const rows = await endpoints.listOwn(human(req).id);
        const counts = await countsOf(rows.map((e) => e.id));
        return rows.map((e) => endpointOut(e, base(), clock.now(), counts.get(e.id) ?? noSessions));
      });

      api.get('/endpoints/:ref', doc({ tag: 'endpoints', summary: 'One of your endpoints', ok: { status: 200, description: 'The endpoint' }, response: endpointViewSchema }), async (req): Promise<EndpointView> => {
        const e = await endpoints.requireOwn(human(req).id, ref(req));
        const counts = await countsOf([e.id]);
        return endpointOut(e, base(), clock.now(), counts.get(e.id) ?? noSessions);
      });

      api.post('/endpoints/:ref/revoke', doc({ tag: 'endpoints', summary: 'Revoke an endpoint: its credential stops working and its live todos are dead-lettered', ok: { status: 200, description: 'The endpoint and `todos_dead_lettered`' }, response: revokeResultSchema }), async (req): Promise<RevokeResult> => {
        const { endpoint, deadLettered } = await endpoints.revoke(human(req).id, ref(req));
        return { ...endpointOut(endpoint, base(), clock.now()), todos_dead_lettered: deadLettered };
      });

      registerTodoRoutes(api, { endpoints, todos: deps.todos, human });
      registerPresenceRoutes(api, { endpoints, operatorPresence: deps.operatorPresence });
      registerDoorbellTestRoutes(api, { endpoints, selfTests: deps.selfTests });
      registerWebhookRoutes(api, { endpoints, webhooks: deps.webhooks });
      registerHookRoutes(api, { endpoints, hooks: deps.hooks });

    },
    { prefix: '/api/v1' },
  );
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import { SwitchboardError, invalidArgument } from '../domain/errors.ts';
import { IDEMPOTENCY_KEY_MAX_BYTES, LIST_DEFAULT_LIMIT, TITLE_MAX_BYTES } from '../domain/lifecycle.ts';
import { validateQueueName } from '../domain/scope.ts';
import {
  endpointRevoked,
  listOwnEndpoints,
  resolveOwnEndpoint,
  revokeOwnEndpoint,
  vendEndpoint,
  type Endpoint,
} from '../store/endpoints.ts';
import type { Human } from '../store/humans.ts';
import { rfc3339 } from '../domain/time.ts';
import { TODO_STATES, insertEventAndTodo, listTodos, summarizeTodo, type TodoRow } from '../store/todos.ts';
import { inputsOf, type PresenceService } from '../services/presence.ts';
import { effective } from '../domain/presence/index.ts';
import { humanGuard } from './auth.ts';
import { Humans } from '../services/humans.ts';
import { registerDoorbellTestRoutes } from './doorbell-tests.ts';
import { registerPresenceRoutes } from './presence.ts';
import type { SelfTests } from '../services/doorbell/self-tests.ts';
import type { Webhooks } from '../services/webhooks.ts';
import { registerWebhookRoutes } from './webhooks.ts';
import { registerHookRoutes } from './notify-hooks.ts';
import type { NotifyHooks } from '../services/notify-hooks.ts';
import { sendError } from '../web/errors.ts';
import { RateLimiter } from '../web/rate-limit.ts';
import { limitParam, parseInput } from '../domain/validate.ts';

export interface ApiDeps {
  sql: Sql;
  clock: Clock;
  /** The public base URL; a function because a test server learns its port only after listening. */
  baseUrl: () => string;
  /** Runs after a revocation commits: this instance drops the endpoint's sessions at once. */
  onEndpointRevoked?: (endpointId: string) => void;
  /** Runs after a new push-eligible todo commits: rings one of its endpoint's sessions here. */
  onTodoReady?: (todo: TodoRow) => void;
  presence: PresenceService;
  selfTests: SelfTests;
  webhooks: Webhooks;
  hooks: NotifyHooks;
  /** Instance-local: how many sessions of the endpoint are attached here, and how many are unheard. */
  sessionCounts?: (endpointId: string) => { sessions: number; unheard_sessions: number };
}

/** Per personal token: reads 20/s (burst 40), writes 5/s (burst 20). */
export const API_READ_LIMIT = { rate: 20, burst: 40 };
export const API_WRITE_LIMIT = { rate: 5, burst: 20 };
export const API_BODY_LIMIT = 64 * 1024;

export const mcpUrl = (baseUrl: string, slug: string) => `${baseUrl}/mcp/${slug}`;

export function endpointOut(
  e: Endpoint,
  baseUrl: string,
  now: Date,
  counts: { sessions: number; unheard_sessions: number } = { sessions: 0, unheard_sessions: 0 },
) {
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
    presence: { presence: eff.presence, source: eff.source, until: rfc3339(eff.until) ?? null },
    shift: e.shift,
    sessions: counts.sessions,
    unheard_sessions: counts.unheard_sessions,
  };
}

/** The client wiring for `.mcp.json`; server key `switchboard`. */
export function mcpJson(url: string, credential: string) {
  return { mcpServers: { switchboard: { type: 'http', url, headers: { Authorization: `Bearer ${credential}` } } } };
}

const byteLength = (s: string) => Buffer.byteLength(s, 'utf8');
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

const vendBody = z
  .object({
    name: z.string({ error: 'is required and must be a string' }),
    queues: z.array(z.string(), { error: 'must be an array of queue names' }).optional(),
    verbs: z.array(z.string(), { error: 'must be an array of verb names' }).optional(),
  })
  .strict();

const pushBody = z
  .object({
    title: z.string({ error: 'is required and must be a string' }),
    queue: z.string({ error: 'must be a string' }).optional(),
    kind: z
      .string({ error: 'must be a string' })
      .min(1, 'must not be empty')
      .max(64, 'must be at most 64 characters')
      .regex(/^[A-Za-z0-9._:-]+$/, 'must be letters, digits, ".", "_", ":" or "-"')
      .optional(),
    payload: z.json({ error: 'must be JSON' }).optional(),
    key: z.string({ error: 'must be a string' }).optional(),
  })
  .strict();

const listQuery = z
  .object({
    state: z.enum(TODO_STATES as [string, ...string[]], { error: `must be one of ${TODO_STATES.join(', ')}` }).optional(),
    queue: z.string().optional(),
    limit: limitParam,
  })
  .strict();

function validateTitle(raw: string): string {
  const title = raw.trim();
  if (title === '') throw invalidArgument('title', 'must not be empty');
  if (byteLength(title) > TITLE_MAX_BYTES) throw invalidArgument('title', `must be at most ${TITLE_MAX_BYTES} bytes; put detail in payload`);
  if (CONTROL.test(title)) throw invalidArgument('title', 'must be one line without control characters');
  return title;
}

function resolvePushQueue(endpoint: Endpoint, requested: string | undefined): string {
  if (requested === undefined) {
    if (endpoint.scope_queues.length === 1) return endpoint.scope_queues[0]!;
    throw invalidArgument('queue', `required, because endpoint ${endpoint.slug} has several queues (${endpoint.scope_queues.join(', ')})`);
  }
  validateQueueName('queue', requested);
  if (!endpoint.scope_queues.includes(requested)) {
    throw invalidArgument('queue', `"${requested}" is not one of endpoint ${endpoint.slug}'s queues (${endpoint.scope_queues.join(', ')})`);
  }
  return requested;
}

function describeHuman(h: Human): string {
  return `${h.display_name ?? h.email ?? h.handle} (${h.id})`;
}

export function registerApi(app: FastifyInstance, deps: ApiDeps): void {
  const { sql, clock } = deps;
  const base = deps.baseUrl;
  const countsOf = (endpointId: string) => deps.sessionCounts?.(endpointId) ?? { sessions: 0, unheard_sessions: 0 };
  const readLimiter = new RateLimiter(API_READ_LIMIT, clock);
  const writeLimiter = new RateLimiter(API_WRITE_LIMIT, clock);

  app.register(
    async (api) => {
      api.addHook('onRequest', humanGuard(new Humans({ sql, clock })));
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

      const human = (req: FastifyRequest): Human => req.human!;
      const ref = (req: FastifyRequest) => (req.params as { ref: string }).ref;

      api.get('/me', async (req) => {
        const h = human(req);
        return { id: h.id, handle: h.handle, display_name: h.display_name, email: h.email };
      });

      api.post('/endpoints', async (req, reply: FastifyReply) => {
        const body = parseInput(vendBody, req.body ?? {});
        const { endpoint, credential } = await vendEndpoint(sql, human(req).id, body, clock.now());
        const out = endpointOut(endpoint, base(), clock.now());
        return reply.code(201).send({ ...out, token: credential, mcp_json: mcpJson(out.mcp_url, credential) });
      });

      api.get('/endpoints', async (req) => {
        const rows = await listOwnEndpoints(sql, human(req).id);
        return rows.map((e) => endpointOut(e, base(), clock.now(), countsOf(e.id)));
      });

      api.get('/endpoints/:ref', async (req) => {
        const e = await resolveOwnEndpoint(sql, human(req).id, ref(req));
        return endpointOut(e, base(), clock.now(), countsOf(e.id));
      });

      api.post('/endpoints/:ref/revoke', async (req) => {
        const { endpoint, deadLettered } = await revokeOwnEndpoint(sql, human(req).id, ref(req), clock.now());
        deps.onEndpointRevoked?.(endpoint.id);
        return { ...endpointOut(endpoint, base(), clock.now()), todos_dead_lettered: deadLettered };
      });

      api.post('/endpoints/:ref/todos', async (req, reply: FastifyReply) => {
        const h = human(req);
        const endpoint = await resolveOwnEndpoint(sql, h.id, ref(req));
        const body = parseInput(pushBody, req.body ?? {});
        if (endpoint.state !== 'active') throw endpointRevoked(endpoint);
        const title = validateTitle(body.title);
        const queue = resolvePushQueue(endpoint, body.queue);
        if (body.key !== undefined && (body.key === '' || byteLength(body.key) > IDEMPOTENCY_KEY_MAX_BYTES)) {
          throw invalidArgument('key', `must be 1-${IDEMPOTENCY_KEY_MAX_BYTES} bytes`);
        }
        const { todo, created, eventId, pushEligible } = await insertEventAndTodo(
          sql,
          {
            source: 'operator',
            family: 'operator',
            trustMode: 'operator',
            verified: true,
            verifyDetail: `operator-authored over /api/v1 by ${describeHuman(h)}`,
            externalId: body.key ?? null,
          },
          {
            endpointId: endpoint.id,
            queue,
            title,
            source: 'operator',
            kind: body.kind ?? 'operator',
            payload: body.payload ?? {},
            idempotencyKey: body.key ?? null,
          },
          clock.now(),
        );
        if (created && pushEligible) deps.onTodoReady?.(todo);
        return reply.code(created ? 201 : 200).send({
          id: todo.id,
          endpoint_id: endpoint.id,
          slug: endpoint.slug,
          queue: todo.queue,
          state: todo.state,
          created,
          event_id: eventId === null ? null : Number(eventId),
        });
      });

      registerPresenceRoutes(api, { sql, clock, presence: deps.presence });
      registerDoorbellTestRoutes(api, { sql, selfTests: deps.selfTests });
      registerWebhookRoutes(api, { sql, webhooks: deps.webhooks });
      registerHookRoutes(api, { sql, hooks: deps.hooks });

      api.get('/endpoints/:ref/todos', async (req) => {
        const endpoint = await resolveOwnEndpoint(sql, human(req).id, ref(req));
        const q = parseInput(listQuery, req.query ?? {}, 'query');
        if (q.queue !== undefined) validateQueueName('queue', q.queue);
        const rows = await listTodos(sql, endpoint.id, {
          queue: q.queue,
          state: q.state as (typeof TODO_STATES)[number] | undefined,
          limit: q.limit ?? LIST_DEFAULT_LIMIT,
        });
        return { todos: rows.map(summarizeTodo) };
      });
    },
    { prefix: '/api/v1' },
  );
}

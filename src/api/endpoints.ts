import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../lib/clock.ts';
import { mcpUrl } from '../domain/mcp-client.ts';
import { connectInstructions, connectText } from '../domain/connect-instructions.ts';
import { CONNECT_GUIDE_PATH } from '../domain/guides.ts';
import type { Endpoint, EndpointService } from '../services/endpoints.ts';
import { rfc3339 } from '../domain/time.ts';
import { inputsOf } from '../services/presence.ts';
import { effective, untilOnWire } from '../domain/presence/index.ts';
import { parseInput } from '../domain/validate.ts';
import { doc } from './openapi.ts';
import { endpointListSchema, endpointViewSchema, revokeResultSchema, vendResultSchema, type EndpointView, type RevokeResult, type VendResult } from './wire.ts';

/** One endpoint's sessions across the cluster, as the endpoint views carry them. */
export interface SessionCountView {
  sessions: number;
  unheard_sessions: number;
  idle_sessions_ended: number;
}

const NO_SESSIONS: SessionCountView = { sessions: 0, unheard_sessions: 0, idle_sessions_ended: 0 };

export interface EndpointRouteDeps {
  clock: Clock;
  /** The public base URL; a function because a test server learns its port only after listening. */
  baseUrl: () => string;
  endpoints: EndpointService;
  /** Per endpoint, its sessions across the cluster and how many are unheard. */
  sessionCounts?: (endpointIds: readonly string[]) => Promise<Map<string, SessionCountView>>;
}

export function endpointOut(
  e: Endpoint,
  baseUrl: string,
  now: Date,
  counts: SessionCountView = NO_SESSIONS,
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
    idle_sessions_ended: counts.idle_sessions_ended,
  };
}

const vendBody = z
  .object({
    name: z.string({ error: 'is required and must be a string' }),
    queues: z.array(z.string(), { error: 'must be an array of queue names' }).optional(),
    verbs: z.array(z.string(), { error: 'must be an array of verb names' }).optional(),
  })
  .strict();

/** Vending, listing, reading and revoking the owning human's endpoints (same guard and limits as all of /api/v1). */
export function registerEndpointRoutes(api: FastifyInstance, deps: EndpointRouteDeps): void {
  const { clock, endpoints } = deps;
  const base = deps.baseUrl;
  const countsOf = async (endpointIds: readonly string[]) => (await deps.sessionCounts?.(endpointIds)) ?? new Map<string, SessionCountView>();
  const human = (req: FastifyRequest) => req.human!;
  const ref = (req: FastifyRequest) => (req.params as { ref: string }).ref;

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
    },
  );

  api.get('/endpoints', doc({ tag: 'endpoints', summary: 'Your endpoints, with presence and the cluster\'s session counts', ok: { status: 200, description: 'An array of endpoints' }, response: endpointListSchema }), async (req): Promise<EndpointView[]> => {
    const rows = await endpoints.listOwn(human(req).id);
    const counts = await countsOf(rows.map((e) => e.id));
    return rows.map((e) => endpointOut(e, base(), clock.now(), counts.get(e.id) ?? NO_SESSIONS));
  });

  api.get('/endpoints/:ref', doc({ tag: 'endpoints', summary: 'One of your endpoints', ok: { status: 200, description: 'The endpoint' }, response: endpointViewSchema }), async (req): Promise<EndpointView> => {
    const e = await endpoints.requireOwn(human(req).id, ref(req));
    const counts = await countsOf([e.id]);
    return endpointOut(e, base(), clock.now(), counts.get(e.id) ?? NO_SESSIONS);
  });

  api.post('/endpoints/:ref/revoke', doc({ tag: 'endpoints', summary: 'Revoke an endpoint: its credential stops working and its live todos are dead-lettered', ok: { status: 200, description: 'The endpoint and `todos_dead_lettered`' }, response: revokeResultSchema }), async (req): Promise<RevokeResult> => {
    const { endpoint, deadLettered } = await endpoints.revoke(human(req).id, ref(req));
    return { ...endpointOut(endpoint, base(), clock.now()), todos_dead_lettered: deadLettered };
  });
}

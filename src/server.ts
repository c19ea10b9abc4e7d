import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { SwitchboardError } from './domain/errors.ts';
import { registerMcp, sendRpcFailure } from './mcp/transport.ts';
import { registerIngest } from './ingest-http/routes.ts';
import type { Metrics } from './lib/metrics.ts';
import type { OidcLogin } from './board/oidc.ts';
import { BOARD_CSP, registerBoard } from './board/plugin.ts';
import { constantTimeEqual } from './lib/secrets.ts';
import type { EndpointCredentials } from './services/endpoint-credentials.ts';
import type { Session, SessionRegistry } from './sessions/registry.ts';
import type { AgentServices } from './mcp/tools/index.ts';
import type { BoardReads } from './services/board-reads.ts';
import type { EndpointService } from './services/endpoints.ts';
import type { Humans } from './services/humans.ts';
import type { HealthView } from './api/wire.ts';
import type { IngestService } from './services/ingest.ts';
import type { OperatorPresence } from './services/presence-operator.ts';
import type { TodoService } from './services/todos.ts';
import { pingDatabase } from './store/health.ts';
import type { Sql } from './db/connect.ts';
import type { BucketPolicy } from './lib/rate-limit.ts';
import { VERSION } from './lib/version.ts';
import { API_BODY_LIMIT, registerApi } from './api/plugin.ts';
import { bearerToken } from './web/bearer.ts';
import { classifyAndLog, sendError } from './web/errors.ts';
import { sendBoardError } from './board/error-page.ts';

export interface ServerDeps extends AgentServices {
  /** For the health check only; everything else reaches the database through a service. */
  sql: Sql;
  humans: Humans;
  baseUrl: () => string;
  sessions: SessionRegistry;
  credentials: EndpointCredentials;
  metrics: Metrics;
  /** The scrape credential; undefined keeps /metrics closed. */
  metricsToken: string | undefined;
  /** Instance-local session counts for an endpoint (the API lists them). */
  sessionCounts: (endpointId: string) => { sessions: number; unheard_sessions: number };
  endpoints: EndpointService;
  todos: TodoService;
  operatorPresence: OperatorPresence;
  ingest: IngestService;
  boardReads: BoardReads;
  /** Hostnames the MCP routes accept in Host when listening on loopback (DNS-rebinding guard). */
  allowedHosts?: readonly string[];
  mcpLimits?: { ip?: BucketPolicy; endpoint?: BucketPolicy };
  /** Overrides the per-IP webhook ingest limit (benchmarks lift it). */
  ingestLimit?: BucketPolicy;
  /** The board's deaf-consumer warning: whether a session's recent doorbell writes all failed. */
  isDeaf?: (session: Session) => boolean;
  /** Board sign-in through an OpenID Connect provider, when configured. */
  oidc?: OidcLogin | null;
}

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'strict-origin-when-cross-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/** The security headers and no-store, each unless the route set its own. */
function withSecurityHeaders(reply: FastifyReply): FastifyReply {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) {
    if (!reply.hasHeader(k)) reply.header(k, v);
  }
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  return reply;
}

export function buildServer(deps: ServerDeps): FastifyInstance {
  const app = Fastify({
    // Our own request log (below) names the route pattern, never the raw URL or headers.
    logger: false,
    bodyLimit: API_BODY_LIMIT,
    return503OnClosing: true,
    // Refusals before routing (bad percent-encoding, an over-long segment) in the wire of the path's surface.
    // These replies skip the hooks, so they get the security headers here.
    frameworkErrors: (err, req, raw) => {
      const e = classifyAndLog(err, deps.log, { method: req.method }, 'request');
      const reply = raw as FastifyReply;
      if (req.url.startsWith('/mcp/')) return sendRpcFailure(withSecurityHeaders(reply), e);
      if (req.url.startsWith('/api/') || req.url.startsWith('/webhooks/')) return sendError(withSecurityHeaders(reply), e);
      return sendBoardError(withSecurityHeaders(reply.header('content-security-policy', BOARD_CSP)), e, undefined);
    },
  });

  app.addHook('onSend', async (_req, reply) => void withSecurityHeaders(reply));

  app.addHook('onResponse', async (req, reply) => {
    deps.log.debug(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'http request',
    );
  });

  app.setErrorHandler(async (err, req, reply) =>
    sendError(reply, classifyAndLog(err, deps.log, { method: req.method, route: req.routeOptions.url }, 'request')),
  );

  app.setNotFoundHandler(async (_req, reply) => sendError(reply, new SwitchboardError('not_found', 'no such route')));

  app.get('/healthz', async (req, reply) => {
    try {
      await pingDatabase(deps.sql);
    } catch (err) {
      deps.log.warn({ err: (err as Error).message }, 'health check: database unreachable');
      return reply.code(503).type('text/plain; charset=utf-8').send('db down\n');
    }
    if (prefersJson(req.headers.accept)) return reply.send({ status: 'ok', version: VERSION } satisfies HealthView);
    return reply.type('text/plain; charset=utf-8').send(`ok ${VERSION}\n`);
  });

  // Prometheus scrape: its own bearer credential; every refusal is the same empty 401.
  app.get('/metrics', async (req, reply) => {
    const presented = bearerToken(req);
    if (!deps.metricsToken || !presented || !constantTimeEqual(presented, deps.metricsToken)) {
      return reply.code(401).header('www-authenticate', 'Bearer realm="switchboard-metrics"').send('');
    }
    return reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });

  registerApi(app, {
    humans: deps.humans,
    clock: deps.clock,
    baseUrl: deps.baseUrl,
    endpoints: deps.endpoints,
    todos: deps.todos,
    operatorPresence: deps.operatorPresence,
    selfTests: deps.selfTests,
    webhooks: deps.webhooks,
    hooks: deps.hooks,
    sessionCounts: deps.sessionCounts,
  });
  registerIngest(app, { clock: deps.clock, ingest: deps.ingest, limit: deps.ingestLimit });
  registerBoard(app, {
    humans: deps.humans,
    clock: deps.clock,
    log: deps.log,
    baseUrl: deps.baseUrl,
    sessions: deps.sessions,
    endpoints: deps.endpoints,
    operatorPresence: deps.operatorPresence,
    reads: deps.boardReads,
    selfTests: deps.selfTests,
    webhooks: deps.webhooks,
    isDeaf: deps.isDeaf,
    oidc: deps.oidc ?? null,
  });
  registerMcp(app, {
    clock: deps.clock,
    todoWork: deps.todoWork,
    agentPresence: deps.agentPresence,
    log: deps.log,
    sessions: deps.sessions,
    credentials: deps.credentials,
    presence: deps.presence,
    acks: deps.acks,
    selfTests: deps.selfTests,
    webhooks: deps.webhooks,
    hooks: deps.hooks,
    allowedHosts: deps.allowedHosts,
    limits: deps.mcpLimits,
  });
  return app;
}

/** True when an Accept header ranks application/json above text/plain. */
export function prefersJson(accept: string | undefined): boolean {
  if (!accept) return false;
  let json = 0;
  let text = 0;
  for (const part of accept.split(',')) {
    const [range, ...params] = part.trim().toLowerCase().split(';');
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const q = qParam ? Number(qParam.slice(2)) || 0 : 1;
    if (range === 'application/json') json = Math.max(json, q);
    if (range === 'text/plain' || range === 'text/*' || range === '*/*') text = Math.max(text, range === 'text/plain' ? q : q - 0.001);
  }
  return json > 0 && json > text;
}

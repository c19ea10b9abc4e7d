import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { SwitchboardError } from './domain/errors.ts';
import { registerMcp, sendRpcFailure } from './mcp/transport.ts';
import { registerIngest } from './ingest-http/routes.ts';
import { registerOAuthRoutes } from './oauth-http/routes.ts';
import { BOARD_CSP, registerBoard } from './board/plugin.ts';
import type { OidcLogin } from './board/oidc.ts';
import { preferredType } from './lib/accept.ts';
import { constantTimeEqual } from './lib/secrets.ts';
import type { HealthView } from './api/wire.ts';
import type { Services } from './compose.ts';
import type { ReadinessReport } from './services/readiness.ts';
import type { BucketPolicy } from './lib/rate-limit.ts';
import { VERSION } from './lib/version.ts';
import { API_BODY_LIMIT, registerApi } from './api/plugin.ts';
import { bearerToken } from './web/bearer.ts';
import { AuthFailures } from './web/auth-failures.ts';
import { classifyAndLog, sendError } from './web/errors.ts';
import { sendBoardError } from './board/error-page.ts';

/** How long a client has to send a whole request; Node checks it about every 30 s. */
export const REQUEST_TIMEOUT_MS = 30_000;

/** What the HTTP side needs besides the services. */
export interface WebOptions {
  /** The public base URL; a function because a test server learns its port only after listening. */
  baseUrl: () => string;
  /** The scrape credential; undefined keeps /metrics closed. */
  metricsToken: string | undefined;
  /** Hostnames the MCP routes accept in Host when listening on loopback (DNS-rebinding guard). */
  allowedHosts?: readonly string[];
  mcpLimits?: { ip?: BucketPolicy; endpoint?: BucketPolicy };
  /** Overrides the per-address limit on refused webhook deliveries (tests shrink it, benchmarks lift it). */
  ingestLimit?: BucketPolicy;
  /** Valid deliveries per second to one webhook (SWITCHBOARD_INGEST_RATE). */
  ingestRate?: number;
  /** Overrides the per-IP limit on failed authentications (benchmarks lift it). */
  authFailureLimit?: BucketPolicy;
  /**
   * Proxies whose X-Forwarded-For is believed (addresses and CIDRs): a request whose socket peer is
   * one of them is keyed, in every per-address limit, by the client address the proxy forwarded.
   */
  trustedProxies?: readonly string[];
  /** What /healthz (the database ping) and /readyz (every check) ask. */
  readiness: { check(): Promise<ReadinessReport>; ping(): Promise<void> };
  /** The board's sign-in through an OpenID Connect provider; null or absent when SWITCHBOARD_OIDC_ISSUER is unset. */
  oidc?: OidcLogin | null;
}

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'strict-origin-when-cross-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/** Sent only when the public base URL is https: a plain-http deployment (localhost, tests) stays reachable. */
const HSTS = 'max-age=31536000';

/** The security headers (HSTS under https) and no-store, each unless the route set its own. */
function withSecurityHeaders(reply: FastifyReply, https: boolean): FastifyReply {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) {
    if (!reply.hasHeader(k)) reply.header(k, v);
  }
  if (https && !reply.hasHeader('strict-transport-security')) reply.header('strict-transport-security', HSTS);
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  return reply;
}

/** The fastify instance with every surface mounted on the instance's services. */
export function buildServer(s: Services, web: WebOptions): FastifyInstance {
  const { clock, log } = s.base;
  /** The cluster's live sessions of each endpoint, how many of them are unheard, and how many idle ones ended. */
  const sessionCounts = async (endpointIds: readonly string[]) =>
    new Map(
      [...(await s.directory.countsOf(endpointIds))].map(([id, c]) => [id, { sessions: c.sessions, unheard_sessions: c.unheard, idle_sessions_ended: c.idleEnded }]),
    );
  // One bucket per client address for failed authentications, across /api/v1, the board and /mcp.
  const authFailures = new AuthFailures(clock, web.authFailureLimit);
  const https = () => web.baseUrl().startsWith('https://');
  const app = Fastify({
    // Our own request log (below) names the route pattern, never the raw URL or headers.
    logger: false,
    bodyLimit: API_BODY_LIMIT,
    return503OnClosing: true,
    // req.ip: the socket peer, or the address a trusted proxy forwarded (the rightmost untrusted one).
    trustProxy: web.trustedProxies?.length ? [...web.trustedProxies] : false,
    // A request (headers and body) must arrive whole within this time, or its connection is
    // closed: a sender trickling a body cannot hold a socket and its buffer for ever. Responses,
    // the long-lived event streams included, are not limited by it.
    requestTimeout: REQUEST_TIMEOUT_MS,
    // Refusals before routing (bad percent-encoding, an over-long segment) in the wire of the path's surface.
    // These replies skip the hooks, so they get the security headers here.
    frameworkErrors: (err, req, raw) => {
      const e = classifyAndLog(err, log, { method: req.method }, 'request');
      const reply = raw as FastifyReply;
      if (req.url.startsWith('/mcp/')) return sendRpcFailure(withSecurityHeaders(reply, https()), e);
      if (req.url.startsWith('/api/') || req.url.startsWith('/webhooks/')) return sendError(withSecurityHeaders(reply, https()), e);
      return sendBoardError(withSecurityHeaders(reply.header('content-security-policy', BOARD_CSP), https()), e, undefined);
    },
  });

  app.addHook('onSend', async (_req, reply) => void withSecurityHeaders(reply, https()));

  // The access log: the route's template, never the path (paths carry sign-in link tokens).
  app.addHook('onResponse', async (req, reply) => {
    log.info(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'http request',
    );
  });

  app.setErrorHandler(async (err, req, reply) =>
    sendError(reply, classifyAndLog(err, log, { method: req.method, route: req.routeOptions.url }, 'request')),
  );

  app.setNotFoundHandler(async (_req, reply) => sendError(reply, new SwitchboardError('not_found', 'no such route')));

  app.get('/healthz', async (req, reply) => {
    try {
      await web.readiness.ping();
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'health check: database unreachable');
      return reply.code(503).type('text/plain; charset=utf-8').send('db down\n');
    }
    if (prefersJson(req.headers.accept)) return reply.send({ status: 'ok', version: VERSION } satisfies HealthView);
    return reply.type('text/plain; charset=utf-8').send(`ok ${VERSION}\n`);
  });

  // Liveness: the process answers. A load balancer or orchestrator restarts on this, never on the database.
  app.get('/livez', async (_req, reply) => reply.type('text/plain; charset=utf-8').send('ok\n'));

  // Readiness: send traffic here only while the database answers, migrations are applied and LISTEN hears.
  app.get('/readyz', async (_req, reply) => {
    const report = await web.readiness.check();
    if (!report.ready) log.warn({ checks: report.checks }, 'not ready');
    return reply.code(report.ready ? 200 : 503).send(report);
  });

  // Prometheus scrape: its own bearer credential; every refusal is the same empty 401.
  app.get('/metrics', async (req, reply) => {
    const presented = bearerToken(req);
    if (!web.metricsToken || !presented || !constantTimeEqual(presented, web.metricsToken)) {
      return reply.code(401).header('www-authenticate', 'Bearer realm="switchboard-metrics"').send('');
    }
    return reply.type(s.metrics.registry.contentType).send(await s.metrics.registry.metrics());
  });

  const shared = { ...s, clock, log, baseUrl: web.baseUrl, authFailures };
  registerApi(app, { ...shared, sessionCounts });
  registerIngest(app, { clock, ingest: s.ingest, failureLimit: web.ingestLimit, ratePerWebhook: web.ingestRate });
  registerBoard(app, {
    ...shared,
    oidc: web.oidc ?? null,
    sessionsOf: async (endpointIds) => {
      const each = await s.directory.sessionsOfEach(endpointIds);
      const lastRings = await s.acks.lastRingsOf([...each.values()].flat().map((r) => r.id));
      return new Map(
        [...each].map(([id, rows]) => [
          id,
          rows.map((r) => {
            const here = s.sessions.peek(r.id);
            return {
              id: r.id,
              client: `${r.client_name} ${r.client_version}`.trim(),
              stream: r.stream_instance !== null,
              unheard: r.unheard,
              deaf: here ? s.doorbell.isDeaf(here) : false,
              lastRing: lastRings.get(r.id) ?? null,
            };
          }),
        ]),
      );
    },
  });
  registerMcp(app, { ...shared, allowedHosts: web.allowedHosts, limits: web.mcpLimits });
  registerOAuthRoutes(app, { oauth: s.oauth, clock, log });
  return app;
}

/**
 * True when an Accept header ranks application/json above text/plain (lib/accept.ts): a tie goes
 * to text unless JSON is named more specifically (`application/json, *\/*` is JSON, `*\/*` text).
 */
export function prefersJson(accept: string | undefined): boolean {
  return preferredType(accept, ['text/plain', 'application/json']) === 'application/json';
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SwitchboardError } from '../domain/errors.ts';
import { bearerToken } from '../web/bearer.ts';
import type { AuthFailures } from '../web/auth-failures.ts';
import { classifyAndLog, fromFastifyError } from '../web/errors.ts';
import { isAcceptable } from '../lib/accept.ts';
import { RateLimiter, type BucketPolicy } from '../lib/rate-limit.ts';
import {
  INVALID_REQUEST,
  PARSE_ERROR,
  SESSION_NOT_FOUND,
  TRANSPORT_ERROR,
  classifyMessage,
  rpcFailure,
  rpcError,
  rpcResult,
  type JsonRpcResponse,
} from './jsonrpc.ts';
import { neutralizeText } from '../domain/neutralize.ts';
import {
  handleSessionRequest,
  initializeResult,
  isSupportedProtocolVersion,
  negotiateProtocolVersion,
} from './protocol.ts';
import type { EndpointCredentials } from '../services/endpoint-credentials.ts';
import type { Session, SessionEndpoint, SessionRegistry } from '../sessions/registry.ts';
import type { SessionDirectory } from '../services/session-directory.ts';
import type { CallCancellations } from '../services/call-cancellations.ts';
import type { AgentServices } from './tools/index.ts';
import type { OAuthServer } from '../services/oauth.ts';
import { isSlug } from '../domain/oauth/resource.ts';

export const MCP_BODY_LIMIT = 1024 * 1024;
/** Before authentication, per client address. */
export const MCP_IP_LIMIT: BucketPolicy = { rate: 50, burst: 100 };
/** After authentication, per endpoint: POSTs and stream (re)establishment alike. */
export const MCP_ENDPOINT_LIMIT: BucketPolicy = { rate: 20, burst: 40 };
export const MCP_REALM = 'Bearer realm="switchboard"';

export interface McpDeps extends AgentServices {
  sessions: SessionRegistry;
  directory: SessionDirectory;
  /** The calls being answered, ended by notifications/cancelled (from any instance) or their session's end. */
  calls: CallCancellations;
  credentials: EndpointCredentials;
  /** Hostnames a loopback listener accepts in Host (the DNS-rebinding guard); undefined disables it. */
  allowedHosts?: readonly string[];
  limits?: { ip?: BucketPolicy; endpoint?: BucketPolicy };
  /** The per-address limit on failed authentications, shared with /api/v1 and the board. */
  authFailures: AuthFailures;
  /** The 401's resource_metadata (OAuth discovery). */
  oauth: Pick<OAuthServer, 'resourceMetadataUrl'>;
}

declare module 'fastify' {
  interface FastifyRequest {
    mcpEndpoint?: SessionEndpoint;
    /** The OAuth grant of the request's access token; null for an sbk_ credential. */
    mcpGrantId?: string | null;
    /** When the request's OAuth access token expires (null: an sbk_ credential). */
    mcpAccessExpiresAt?: Date | null;
  }
}

/** The OAuth access the request carried becomes the session's: revoking its grant, or its expiry, ends what it opened. */
function carryAccess(session: Session, req: FastifyRequest): void {
  session.oauthGrantId = req.mcpGrantId ?? null;
  session.oauthExpiresAt = req.mcpAccessExpiresAt ?? null;
}

/** The body limit named in the refusal, so a client knows what fits. */
function tooLarge(err: unknown): SwitchboardError | null {
  const mapped = fromFastifyError(err);
  return mapped?.code === 'payload_too_large' ? new SwitchboardError('payload_too_large', `the body limit is ${MCP_BODY_LIMIT} bytes`) : mapped;
}

/** A transport-level refusal: an HTTP status with a JSON-RPC error body. */
class TransportRefusal extends Error {
  constructor(
    readonly status: number,
    readonly rpcCode: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

function sendRpc(reply: FastifyReply, status: number, body: JsonRpcResponse, headers: Record<string, string> = {}): FastifyReply {
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  return reply.code(status).type('application/json').send(body);
}

export function sendRpcFailure(reply: FastifyReply, e: SwitchboardError): FastifyReply {
  const failure = rpcFailure(e);
  return sendRpc(reply, failure.status, failure.body, failure.headers);
}

function headerValue(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Whether the request's Accept takes `type`: exactly or by a wildcard, with q above 0 (lib/accept.ts). No Accept takes nothing. */
function accepts(req: FastifyRequest, type: string): boolean {
  return isAcceptable(headerValue(req, 'accept'), type);
}

/** Streamable HTTP at /mcp/{slug}: POST for JSON-RPC, GET for the notification stream, DELETE to end. */
export function registerMcp(app: FastifyInstance, deps: McpDeps): void {
  const { sessions, log } = deps;
  const ipLimiter = new RateLimiter(deps.limits?.ip ?? MCP_IP_LIMIT, deps.clock);
  const endpointLimiter = new RateLimiter(deps.limits?.endpoint ?? MCP_ENDPOINT_LIMIT, deps.clock);

  app.register(async (mcp) => {
    // Bodies arrive raw so a bad one becomes a JSON-RPC parse error, not an HTTP API envelope.
    mcp.removeAllContentTypeParsers();
    mcp.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MCP_BODY_LIMIT }, (_req, body, done) => done(null, body));

    mcp.setErrorHandler(async (err, req, reply) => {
      if (err instanceof TransportRefusal) return sendRpc(reply, err.status, rpcError(null, err.rpcCode, err.message), err.headers);
      return sendRpcFailure(reply, classifyAndLog(err, log, { method: req.method }, 'mcp request', tooLarge));
    });

    mcp.addHook('onRequest', async (req) => {
      if (deps.allowedHosts) {
        const host = (headerValue(req, 'host') ?? '').replace(/:\d+$/, '').replace(/^\[|\]$/g, '').toLowerCase();
        if (!deps.allowedHosts.includes(host)) throw new TransportRefusal(403, TRANSPORT_ERROR, `Forbidden: Host ${JSON.stringify(host)} is not served here`);
      }
      const ipWait = ipLimiter.take(req.ip);
      if (ipWait > 0) throw new TransportRefusal(429, TRANSPORT_ERROR, 'Too Many Requests', { 'retry-after': String(ipWait) });

      const token = bearerToken(req);
      const slug = (req.params as { slug?: string }).slug ?? '';
      const attempt = token ? await deps.authFailures.attempt(req.ip, () => deps.credentials.resolve(token, slug)) : { value: null };
      if ('retryAfter' in attempt) throw new TransportRefusal(429, TRANSPORT_ERROR, 'Too Many Requests: too many failed authentications from this address', { 'retry-after': String(attempt.retryAfter) });
      const endpoint = attempt.value;
      if (!endpoint) {
        // RFC 9728 §5.1: an OAuth client given only this URL learns where to get a token for it. A
        // path no endpoint could have has no metadata (404 there), so the challenge names none.
        throw new TransportRefusal(401, TRANSPORT_ERROR, 'Unauthorized: a valid endpoint credential (sbk_...) or OAuth access token for this URL is required', {
          'www-authenticate': isSlug(slug) ? `${MCP_REALM}, resource_metadata="${deps.oauth.resourceMetadataUrl(`/mcp/${slug}`)}"` : MCP_REALM,
        });
      }
      const wait = endpointLimiter.take(endpoint.id);
      if (wait > 0) throw new TransportRefusal(429, TRANSPORT_ERROR, 'Too Many Requests', { 'retry-after': String(wait) });
      req.mcpGrantId = endpoint.oauth_grant_id ?? null;
      req.mcpAccessExpiresAt = endpoint.oauth_expires_at ?? null;
      req.mcpEndpoint = {
        id: endpoint.id,
        slug: endpoint.slug,
        agentId: endpoint.agent_id,
        agentName: endpoint.agent_name,
        queues: endpoint.scope_queues,
        verbs: endpoint.scope_verbs,
        webhookMax: endpoint.webhook_max,
      };
    });

    /** The session named by Mcp-Session-Id, bound to the authenticated endpoint, wherever it was created. */
    const requireSession = async (req: FastifyRequest): Promise<Session> => {
      const sid = headerValue(req, 'mcp-session-id');
      if (!sid) throw new TransportRefusal(400, TRANSPORT_ERROR, 'Bad Request: Mcp-Session-Id header is required');
      const version = headerValue(req, 'mcp-protocol-version');
      if (version !== undefined && !isSupportedProtocolVersion(version)) {
        throw new TransportRefusal(400, TRANSPORT_ERROR, `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(version)}`);
      }
      const session = await deps.directory.resolve(sid, req.mcpEndpoint!);
      if (!session) throw new TransportRefusal(404, SESSION_NOT_FOUND, 'Session not found');
      // A revoked grant ends the sessions its tokens last spoke for (Revocations, oauth_grant_revoked).
      carryAccess(session, req);
      return session;
    };

    mcp.post('/mcp/:slug', async (req, reply) => {
      const contentType = (headerValue(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
      if (contentType !== 'application/json') {
        throw new TransportRefusal(415, TRANSPORT_ERROR, 'Unsupported Media Type: Content-Type must be application/json');
      }
      if (!accepts(req, 'application/json') || !accepts(req, 'text/event-stream')) {
        throw new TransportRefusal(406, TRANSPORT_ERROR, 'Not Acceptable: Accept must include application/json and text/event-stream');
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse((req.body as Buffer | undefined)?.toString('utf8') ?? '');
      } catch {
        return sendRpc(reply, 400, rpcError(null, PARSE_ERROR, 'Parse error: the body is not valid JSON'));
      }
      if (Array.isArray(parsed)) return sendRpc(reply, 400, rpcError(null, INVALID_REQUEST, 'Invalid Request: batches are not supported'));
      const incoming = classifyMessage(parsed);
      if (incoming.kind === 'invalid') return sendRpc(reply, 400, rpcError(incoming.id, INVALID_REQUEST, `Invalid Request: ${incoming.reason}`));

      if (incoming.kind === 'request' && incoming.message.method === 'initialize') {
        if (headerValue(req, 'mcp-session-id')) {
          return sendRpc(reply, 400, rpcError(incoming.message.id, INVALID_REQUEST, 'Invalid Request: initialize starts a new session; send it without Mcp-Session-Id'));
        }
        const params = incoming.message.params ?? {};
        const info = (params.clientInfo ?? {}) as { name?: unknown; version?: unknown };
        const version = negotiateProtocolVersion(params.protocolVersion);
        // Presence is loaded before the session can be rung.
        const session = await deps.directory.create(req.mcpEndpoint!, version, {
          name: neutralizeText(info.name) || 'unknown',
          version: neutralizeText(info.version),
        });
        carryAccess(session, req);
        log.info({ slug: session.endpoint.slug, session: session.id, client: session.clientInfo, protocol: version, oauth: session.oauthGrantId !== null }, 'mcp session created');
        reply.header('mcp-session-id', session.id);
        return sendRpc(reply, 200, rpcResult(incoming.message.id, initializeResult(version)));
      }

      const session = await requireSession(req);
      sessions.touch(session);
      if (incoming.kind !== 'request') {
        if (incoming.kind === 'notification' && incoming.message.method === 'notifications/initialized') session.initialized = true;
        if (incoming.kind === 'notification' && incoming.message.method === 'notifications/cancelled') {
          const requestId = incoming.message.params?.requestId;
          if (typeof requestId === 'string' || typeof requestId === 'number') deps.calls.cancel(session.id, requestId);
        }
        return reply.code(202).send();
      }
      // A client that lists or calls tools is an agent's, not a proxy's probe, which initializes,
      // opens a stream and sends nothing else (mcp-remote's; domain/doorbell-choice.ts).
      if (incoming.message.method.startsWith('tools/')) session.calledTool = true;
      // Ended by a cancel, the session's end, or (below) the client going away before its answer.
      const call = deps.calls.begin(session.id, incoming.message.id);
      const gone = () => {
        if (!reply.raw.writableFinished) call.abort();
      };
      reply.raw.once('close', gone);
      session.inFlight++;
      try {
        const answer = await handleSessionRequest(deps, session, incoming.message, { call, keepAlive: () => sessions.touch(session) });
        // A call ended early (its session ended, the server is stopping, it was cancelled): the
        // connection closes after the answer, so a stopping server is not left waiting on it.
        if (call.aborted) reply.header('connection', 'close');
        return sendRpc(reply, 200, answer);
      } finally {
        session.inFlight--;
        sessions.touch(session);
        reply.raw.off('close', gone);
        call.end();
      }
    });

    mcp.get('/mcp/:slug', async (req, reply) => {
      if (!accepts(req, 'text/event-stream')) {
        throw new TransportRefusal(406, TRANSPORT_ERROR, 'Not Acceptable: Accept must include text/event-stream');
      }
      const session = await requireSession(req);
      if (!(await deps.directory.claimStream(session))) throw new TransportRefusal(404, SESSION_NOT_FOUND, 'Session not found');
      reply.hijack();
      deps.directory.openStream(session, reply.raw);
    });

    mcp.delete('/mcp/:slug', async (req, reply) => {
      const session = await requireSession(req);
      await deps.directory.close(session, 'deleted by client');
      return reply.code(204).send();
    });

    for (const method of ['PUT', 'PATCH', 'OPTIONS'] as const) {
      mcp.route({
        method,
        url: '/mcp/:slug',
        handler: async (_req, reply) => sendRpc(reply, 405, rpcError(null, TRANSPORT_ERROR, 'Method Not Allowed'), { allow: 'GET, POST, DELETE' }),
      });
    }
  });
}

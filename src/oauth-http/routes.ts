import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../lib/log.ts';
import { RateLimiter } from '../lib/rate-limit.ts';
import { OAuthError, isOAuthError } from '../domain/oauth/errors.ts';
import { isSlug } from '../domain/oauth/resource.ts';
import type { OAuthServer } from '../services/oauth.ts';

/** Per client IP, on registration and the token endpoint together (they need no credential). */
export const OAUTH_PUBLIC_LIMIT = { rate: 5, burst: 20 };
/** Registration and token requests are small: 64 KiB is generous. */
export const OAUTH_BODY_LIMIT = 64 * 1024;

export interface OAuthRouteDeps {
  oauth: OAuthServer;
  clock: Clock;
  log: Logger;
}

/** The client-facing OAuth routes (no cookie, no CSRF): metadata, registration and the token endpoint. */
export function registerOAuthRoutes(app: FastifyInstance, deps: OAuthRouteDeps): void {
  const { oauth } = deps;
  const limiter = new RateLimiter(OAUTH_PUBLIC_LIMIT, deps.clock);

  app.register(async (r) => {
    r.removeAllContentTypeParsers();
    r.addContentTypeParser('*', { parseAs: 'string', bodyLimit: OAUTH_BODY_LIMIT }, (_req, body, done) => done(null, body));

    // Browser-based clients (an inspector in a tab) discover, register and exchange from another origin.
    r.addHook('onRequest', async (req, reply) => {
      reply.header('access-control-allow-origin', '*');
      if (req.method === 'OPTIONS') {
        reply.header('access-control-allow-methods', 'GET, POST, OPTIONS');
        reply.header('access-control-allow-headers', 'content-type, authorization, mcp-protocol-version');
        reply.header('access-control-max-age', '600');
      }
    });

    r.setErrorHandler(async (err, _req, reply) => {
      const status = (err as { statusCode?: number }).statusCode;
      if (status === 413) return sendOAuthError(reply, new OAuthError('invalid_request', `the body limit is ${OAUTH_BODY_LIMIT} bytes`, 413));
      if (isOAuthError(err)) return sendOAuthError(reply, err);
      deps.log.error({ err: (err as Error).message }, 'oauth request failed');
      return sendOAuthError(reply, new OAuthError('temporarily_unavailable', 'the server could not answer; retry', 503));
    });

    const limited = async (req: FastifyRequest, reply: FastifyReply) => {
      const wait = limiter.take(req.ip);
      if (wait > 0) {
        reply.header('retry-after', String(wait));
        return sendOAuthError(reply, new OAuthError('temporarily_unavailable', `too many requests from this address; retry in ${wait} s`, 429));
      }
    };

    const preflight = async (_req: FastifyRequest, reply: FastifyReply) => reply.code(204).send();
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource/api', '/.well-known/oauth-protected-resource/mcp/:slug', '/oauth/register', '/oauth/token']) {
      r.options(path, preflight);
    }

    r.get('/.well-known/oauth-authorization-server', async (_req, reply) => reply.header('cache-control', 'public, max-age=300').send(oauth.metadata()));
    r.get('/.well-known/oauth-protected-resource/api', async (_req, reply) => reply.header('cache-control', 'public, max-age=300').send(oauth.resourceMetadata(null)));
    r.get('/.well-known/oauth-protected-resource/mcp/:slug', async (req, reply) => {
      const { slug } = req.params as { slug: string };
      // Static: no lookup, so it tells nobody whether an endpoint exists.
      if (!isSlug(slug)) return sendOAuthError(reply, new OAuthError('invalid_request', 'no such resource', 404));
      return reply.header('cache-control', 'public, max-age=300').send(oauth.resourceMetadata(slug));
    });

    r.post('/oauth/register', { preHandler: limited }, async (req, reply) => {
      if (!isJson(req)) throw new OAuthError('invalid_client_metadata', 'Content-Type must be application/json');
      let body: unknown;
      try {
        body = JSON.parse(req.body as string);
      } catch {
        throw new OAuthError('invalid_client_metadata', 'the body is not valid JSON');
      }
      const registered = await oauth.register(body);
      return reply.code(201).header('cache-control', 'no-store').send(registered);
    });

    r.post('/oauth/token', { preHandler: limited }, async (req, reply) => {
      if (!contentTypeIs(req, 'application/x-www-form-urlencoded')) throw new OAuthError('invalid_request', 'Content-Type must be application/x-www-form-urlencoded');
      const form = new URLSearchParams(req.body as string);
      const params: Record<string, string> = {};
      for (const [k, v] of form) {
        if (k in params) throw new OAuthError('invalid_request', `${k} is given more than once`);
        params[k] = v;
      }
      const tokens = await oauth.token(params);
      return reply.header('cache-control', 'no-store').header('pragma', 'no-cache').send(tokens);
    });
  });
}

function contentTypeIs(req: FastifyRequest, type: string): boolean {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === type;
}
const isJson = (req: FastifyRequest) => contentTypeIs(req, 'application/json');

export function sendOAuthError(reply: FastifyReply, err: OAuthError): FastifyReply {
  return reply.code(err.status).header('cache-control', 'no-store').type('application/json; charset=utf-8').send(err.toJSON());
}

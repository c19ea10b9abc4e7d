import type { FastifyReply, FastifyRequest } from 'fastify';
import { SwitchboardError } from '../domain/errors.ts';
import type { Human, Humans } from '../services/humans.ts';
import type { OAuthServer } from '../services/oauth.ts';
import { OAUTH_ACCESS_TOKEN_PREFIX as ACCESS_TOKEN_PREFIX } from '../lib/secrets.ts';
import { bearerToken } from '../web/bearer.ts';
import { sendError } from '../web/errors.ts';
import type { AuthFailures } from '../web/auth-failures.ts';

declare module 'fastify' {
  interface FastifyRequest {
    human?: Human;
    humanTokenId?: string;
  }
}

export const API_REALM = 'Bearer realm="switchboard-api"';

/**
 * Why a 401 refused the caller, in the envelope's `reason`: `missing` (no Bearer token),
 * `endpoint_credential` (an sbk_ credential, which opens only its MCP endpoint), `revoked` (this
 * very sbp_ token existed and was revoked: only its holder can learn that, by presenting it), or
 * `unknown` (any other token: mistyped, or from another server). It never says whether an sbk_
 * credential is live. The CLI turns it into advice (`switchboard doctor`).
 */
export type RefusalReason = 'missing' | 'endpoint_credential' | 'revoked' | 'unknown';

export function refusalReason(token: string | null): RefusalReason {
  if (!token) return 'missing';
  return token.startsWith('sbk_') ? 'endpoint_credential' : 'unknown';
}

const REFUSALS: Record<RefusalReason, string> = {
  missing: 'a valid personal access token (sbp_...) or OAuth access token is required (switchboard login --url URL)',
  endpoint_credential: 'an endpoint credential (sbk_...) opens only its MCP endpoint; /api/v1 needs a personal access token (sbp_...)',
  revoked: 'this personal access token was revoked; mint a new one (switchboard admin token create <handle>)',
  unknown: 'a valid personal access token (sbp_...) or OAuth access token is required (switchboard login --url URL)',
};

/**
 * The /api/v1 guard: only a personal token (sbp_...) opens it. Every refusal is a 401 with the
 * same realm and code; its `reason` (above) is all that differs. An address that keeps presenting
 * tokens that fail gets 429 before the lookup runs (AuthFailures).
 */
export function humanGuard(humans: Humans, failures: AuthFailures, oauth: Pick<OAuthServer, 'humanFor' | 'resourceMetadataUrl'>) {
  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const token = bearerToken(req);
    // An OAuth access token (sba_...) of an API grant, or a personal access token (sbp_...).
    const authenticate = (t: string) => (t.startsWith(ACCESS_TOKEN_PREFIX) ? oauth.humanFor(t) : humans.authenticateToken(t));
    const attempt = token ? await failures.attempt(req.ip, () => authenticate(token)) : { value: null };
    if ('retryAfter' in attempt) {
      await sendError(reply, new SwitchboardError('rate_limited', `too many failed authentications from this address; retry in ${attempt.retryAfter} s`, { retry_after: attempt.retryAfter }));
      return;
    }
    const resolved = attempt.value;
    if (!resolved) {
      // RFC 9728 §5.1: where an OAuth client learns how to get a token for this API.
      reply.header('WWW-Authenticate', `${API_REALM}, resource_metadata="${oauth.resourceMetadataUrl('/api')}"`);
      // Only on a failed sbp_ token, which already spent from the address's failure budget.
      const reason = token?.startsWith('sbp_') && (await humans.tokenWasRevoked(token)) ? 'revoked' : refusalReason(token);
      await sendError(reply, new SwitchboardError('unauthenticated', REFUSALS[reason], { reason }));
      return;
    }
    req.human = resolved.human;
    req.humanTokenId = resolved.tokenId;
  };
}

import type { FastifyReply, FastifyRequest } from 'fastify';
import { SwitchboardError } from '../domain/errors.ts';
import type { Human, Humans } from '../services/humans.ts';
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
 * The /api/v1 guard: only a personal token (sbp_...) opens it. Every refusal, whatever the
 * reason, is the same 401, so the answer never tells a caller which kind of token it held. An
 * address that keeps presenting tokens that fail gets 429 before the lookup runs (AuthFailures).
 */
export function humanGuard(humans: Humans, failures: AuthFailures) {
  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const token = bearerToken(req);
    const attempt = token ? await failures.attempt(req.ip, () => humans.authenticateToken(token)) : { value: null };
    if ('retryAfter' in attempt) {
      await sendError(reply, new SwitchboardError('rate_limited', `too many failed authentications from this address; retry in ${attempt.retryAfter} s`, { retry_after: attempt.retryAfter }));
      return;
    }
    const resolved = attempt.value;
    if (!resolved) {
      reply.header('WWW-Authenticate', API_REALM);
      await sendError(reply, new SwitchboardError('unauthenticated', 'a valid personal access token (sbp_...) is required'));
      return;
    }
    req.human = resolved.human;
    req.humanTokenId = resolved.tokenId;
  };
}

import type { FastifyReply, FastifyRequest } from 'fastify';
import { SwitchboardError } from '../domain/errors.ts';
import type { Human, Humans } from '../services/humans.ts';
import { bearerToken } from '../web/bearer.ts';
import { sendError } from '../web/errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    human?: Human;
    humanTokenId?: string;
  }
}

export const API_REALM = 'Bearer realm="switchboard-api"';

/**
 * The /api/v1 guard: only a personal token (sbp_...) opens it. Every refusal, whatever the
 * reason, is the same 401, so the answer never tells a caller which kind of token it held.
 */
export function humanGuard(humans: Humans) {
  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const token = bearerToken(req);
    const resolved = token ? await humans.authenticateToken(token) : null;
    if (!resolved) {
      reply.header('WWW-Authenticate', API_REALM);
      await sendError(reply, new SwitchboardError('unauthenticated', 'a valid personal access token (sbp_...) is required'));
      return;
    }
    req.human = resolved.human;
    req.humanTokenId = resolved.tokenId;
  };
}

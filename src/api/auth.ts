import type { FastifyReply, FastifyRequest } from 'fastify';
import { SwitchboardError } from '../domain/errors.ts';
import type { Human, Humans } from '../services/humans.ts';
import { sendError } from '../web/errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    human?: Human;
    humanTokenId?: string;
  }
}

export const API_REALM = 'Bearer realm="switchboard-api"';

function bearer(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (!h) return null;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(h);
  return m ? m[1]! : null;
}

/**
 * The /api/v1 guard: only a personal token (sbp_...) opens it. Every refusal, whatever the
 * reason, is the same 401, so the answer never tells a caller which kind of token it held.
 */
export function humanGuard(humans: Humans) {
  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const token = bearer(req);
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

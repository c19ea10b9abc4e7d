import type { FastifyRequest } from 'fastify';

/** The credential of `Authorization: Bearer <token>` (scheme in any case), or null when absent or malformed. */
export function bearerToken(req: FastifyRequest): string | null {
  const raw = req.headers.authorization;
  const header = Array.isArray(raw) ? raw[0] : raw;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return m ? m[1]! : null;
}

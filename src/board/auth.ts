import type { FastifyReply, FastifyRequest } from 'fastify';
import { WEB_SESSION_TTL_MS, type Human } from '../services/humans.ts';
import { csrfToken } from './csrf.ts';

export const SESSION_COOKIE = 'sb_session';

/** The signed-in human of a board request, with the cookie value that proved it. */
export interface BoardSession {
  human: Human;
  token: string;
  csrf: string;
  expiresAt: Date;
}

declare module 'fastify' {
  interface FastifyRequest {
    boardSession?: BoardSession;
  }
}

export function boardSession(human: Human, token: string, expiresAt: Date): BoardSession {
  return { human, token, csrf: csrfToken(token), expiresAt };
}

/** The value of one cookie, or undefined. Malformed pairs are skipped. */
export function readCookie(req: FastifyRequest, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    if (pair.slice(0, eq).trim() !== name) continue;
    const value = pair.slice(eq + 1).trim();
    try {
      return decodeURIComponent(value);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** HttpOnly, SameSite=Lax, Path=/, 12 h; Secure when the public base URL is https. */
function cookieAttributes(secure: boolean, maxAgeSeconds: number): string {
  return `Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}

export function setSessionCookie(reply: FastifyReply, token: string, secure: boolean): void {
  reply.header('set-cookie', `${SESSION_COOKIE}=${token}; ${cookieAttributes(secure, Math.floor(WEB_SESSION_TTL_MS / 1000))}`);
}

export function clearSessionCookie(reply: FastifyReply, secure: boolean): void {
  reply.header('set-cookie', `${SESSION_COOKIE}=; ${cookieAttributes(secure, 0)}`);
}

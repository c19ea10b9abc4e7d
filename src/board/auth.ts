import type { FastifyReply, FastifyRequest } from 'fastify';
import { WEB_SESSION_TTL_MS, type Human } from '../services/humans.ts';
import { csrfToken } from './csrf.ts';

export const SESSION_COOKIE = 'sb_session';

/**
 * Under an https base URL the session cookie is `__Host-sb_session`: the browser then takes it only
 * with Secure, Path=/ and no Domain, so neither a sibling subdomain nor a plain-http response can
 * set or shadow it. Plain http (localhost, tests) keeps `sb_session`, which a browser could not
 * store under that prefix.
 */
export const sessionCookieName = (secure: boolean): string => (secure ? `__Host-${SESSION_COOKIE}` : SESSION_COOKIE);

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

/** HttpOnly, SameSite=Lax, Path=/, no Domain, 12 h; Secure when the public base URL is https. */
function cookieAttributes(secure: boolean, maxAgeSeconds: number): string {
  return `Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}

export function setSessionCookie(reply: FastifyReply, token: string, secure: boolean): void {
  reply.header('set-cookie', `${sessionCookieName(secure)}=${token}; ${cookieAttributes(secure, Math.floor(WEB_SESSION_TTL_MS / 1000))}`);
}

export function clearSessionCookie(reply: FastifyReply, secure: boolean): void {
  reply.header('set-cookie', `${sessionCookieName(secure)}=; ${cookieAttributes(secure, 0)}`);
}

/** Where a sign-in returns to: only the consent page, so an OAuth client's request survives the sign-in. */
export const RETURN_TO_COOKIE = 'sb_return_to';
const RETURN_TO_MAX_AGE_SECONDS = 15 * 60;
const RETURNABLE = /^\/oauth\/authorize\?[^\\\s]*$/;

/** Remembers a request the sign-in should return to (the consent page only). */
export function rememberReturnTo(reply: FastifyReply, url: string, secure: boolean): void {
  if (!RETURNABLE.test(url) || url.length > 4000) return;
  reply.header('set-cookie', `${RETURN_TO_COOKIE}=${encodeURIComponent(url)}; ${cookieAttributes(secure, RETURN_TO_MAX_AGE_SECONDS)}`);
}

/** After a sign-in: the remembered consent page (cleared), or the board's front page. */
export function takeReturnTo(req: FastifyRequest, reply: FastifyReply, secure: boolean): string {
  const remembered = readCookie(req, RETURN_TO_COOKIE);
  if (remembered === undefined) return '/';
  reply.header('set-cookie', `${RETURN_TO_COOKIE}=; ${cookieAttributes(secure, 0)}`);
  return RETURNABLE.test(remembered) ? remembered : '/';
}

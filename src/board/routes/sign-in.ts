import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../lib/log.ts';
import type { Humans } from '../../services/humans.ts';
import { RateLimiter } from '../../lib/rate-limit.ts';
import { clearSessionCookie, readCookie, setSessionCookie, takeReturnTo } from '../auth.ts';
import { sendPage } from '../error-page.ts';
import { OIDC_STATE_COOKIE, OIDC_STATE_TTL_MS, OidcError, type OidcLogin } from '../oidc.ts';
import { loginConfirmPage, loginDeadPage, loginHelpPage, messagePage, oidcFailedPage } from '../pages.ts';

/** Per client IP: the public sign-in routes (a link's page and its confirmation, provider start and callback). */
export const BOARD_SIGN_IN_LIMIT = { rate: 1, burst: 20 };

export interface SignInRouteDeps {
  humans: Humans;
  clock: Clock;
  log: Logger;
  baseUrl: () => string;
  /** Sign-in through an OpenID Connect provider; null when SWITCHBOARD_OIDC_ISSUER is unset. */
  oidc?: OidcLogin | null;
  /** After sign-out or a sign-in that replaced the session: end this instance's live-update streams of it. */
  onSignOut: (sessionToken: string) => void;
}

/** Signing in (one-time link, OpenID Connect) and out. The session lookup itself is the board's onRequest hook. */
export function registerSignInRoutes(board: FastifyInstance, deps: SignInRouteDeps): void {
  const { humans, clock, log } = deps;
  const oidc = deps.oidc ?? null;
  const now = () => clock.now();
  const secure = () => deps.baseUrl().startsWith('https://');
  const signInLimiter = new RateLimiter(BOARD_SIGN_IN_LIMIT, clock);

  const publicRoute = { config: { boardPublic: true } };
  /** Public routes that spend a link or talk to the provider: limited per client IP. */
  const signInRoute = {
    config: { boardPublic: true },
    preHandler: async (req: FastifyRequest, reply: FastifyReply) => {
      const wait = signInLimiter.take(req.ip);
      if (wait > 0) {
        reply.header('retry-after', String(wait));
        return sendPage(reply, 429, messagePage({ title: 'Slow down' }, 'Too many sign-in attempts', `Retry in ${wait} s.`));
      }
    },
  };

  // -------------------------------------------------------------------------------------------
  // Sign-in by a one-time link (minted with `switchboard admin login-link HANDLE`)

  board.get('/login', publicRoute, async (req, reply) => {
    if (req.boardSession) return reply.redirect('/', 303);
    return sendPage(reply, 200, loginHelpPage(oidc ? { host: new URL(oidc.issuer).host } : undefined));
  });

  // The link's GET only shows a button: a link scanner that fetches it spends nothing.
  board.get('/login/:token', signInRoute, async (req, reply) => {
    const { token } = req.params as { token: string };
    reply.header('referrer-policy', 'no-referrer');
    if (!(await humans.loginLinkUsable(token))) return sendPage(reply, 404, loginDeadPage());
    return sendPage(reply, 200, loginConfirmPage(token));
  });

  board.post('/login/:token', signInRoute, async (req, reply) => {
    const { token } = req.params as { token: string };
    reply.header('referrer-policy', 'no-referrer');
    // Login CSRF: only a form of this origin may spend a link.
    if (crossSite(req)) return sendPage(reply, 403, messagePage({ title: 'Forbidden' }, 'Refused', 'A sign-in link can only be confirmed from its own page.'));
    const opened = await humans.signInByLink(token, req.boardSession?.token);
    if (!opened) return sendPage(reply, 404, loginDeadPage());
    // The replaced session's streams end now (other instances see it gone at their next look).
    if (req.boardSession) deps.onSignOut(req.boardSession.token);
    setSessionCookie(reply, opened.sessionToken, secure());
    log.info({ human_id: opened.humanId }, 'board sign-in by link');
    return reply.redirect(takeReturnTo(req, reply, secure()), 303);
  });

  // -------------------------------------------------------------------------------------------
  // Sign-in through an OpenID Connect provider (SWITCHBOARD_OIDC_*)

  const oidcCookie = (value: string, maxAgeSeconds: number) =>
    `${OIDC_STATE_COOKIE}=${value}; Path=/auth; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure() ? '; Secure' : ''}`;
  const notConfigured = 'OIDC not configured (set SWITCHBOARD_OIDC_ISSUER and SWITCHBOARD_OIDC_CLIENT_ID, or sign in with a link from switchboard admin login-link).';

  board.get('/auth/login', signInRoute, async (_req, reply) => {
    if (!oidc) return sendPage(reply, 503, oidcFailedPage(notConfigured, false));
    try {
      const started = await oidc.start(now());
      reply.header('set-cookie', oidcCookie(started.cookie, OIDC_STATE_TTL_MS / 1000));
      reply.header('cache-control', 'no-store');
      return reply.redirect(started.url, 302);
    } catch (err) {
      if (err instanceof OidcError) return sendPage(reply, err.status, oidcFailedPage(err.message, true));
      throw err;
    }
  });

  board.get('/auth/callback', signInRoute, async (req, reply) => {
    reply.header('referrer-policy', 'no-referrer');
    reply.header('cache-control', 'no-store');
    if (!oidc) return sendPage(reply, 503, oidcFailedPage(notConfigured, false));
    // The state cookie is single use: cleared whatever the outcome (Fastify appends Set-Cookie values).
    reply.header('set-cookie', oidcCookie('', 0));
    const query = new URLSearchParams(req.url.slice(req.url.indexOf('?') + 1 || req.url.length));
    let identity;
    try {
      identity = await oidc.finish(query, readCookie(req, OIDC_STATE_COOKIE), now());
    } catch (err) {
      if (err instanceof OidcError) return sendPage(reply, err.status, oidcFailedPage(err.message, true));
      throw err;
    }
    const opened = await humans.signInByOidc(identity, req.boardSession?.token);
    if (req.boardSession) deps.onSignOut(req.boardSession.token);
    const { human, created, linked } = opened;
    setSessionCookie(reply, opened.sessionToken, secure());
    log.info({ human_id: human.id, handle: human.handle, created, linked }, 'board sign-in by oidc');
    return reply.redirect(takeReturnTo(req, reply, secure()), 302);
  });

  board.post('/logout', async (req, reply) => {
    const s = req.boardSession!;
    await humans.signOut(s.human.id, s.token);
    deps.onSignOut(s.token);
    clearSessionCookie(reply, secure());
    return reply.redirect('/login', 303);
  });
}

/** True for a request a browser says came from another site (Sec-Fetch-Site, else Origin vs Host). */
function crossSite(req: FastifyRequest): boolean {
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site !== 'same-origin' && site !== 'none';
  const origin = req.headers.origin;
  if (!origin || origin === 'null') return origin === 'null';
  try {
    return new URL(origin).host !== req.headers.host;
  } catch {
    return true;
  }
}

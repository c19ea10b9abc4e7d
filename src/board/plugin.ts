import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import type { BoardReads } from '../services/board-reads.ts';
import type { EndpointService } from '../services/endpoints.ts';
import type { OperatorPresence } from '../services/presence-operator.ts';
import type { PresenceHistory } from '../services/presence-history.ts';
import type { SelfTests } from '../services/doorbell/self-tests.ts';
import { classifyAndLog } from '../web/errors.ts';
import type { AuthFailures } from '../web/auth-failures.ts';
import { sendBoardError, sendPage } from './error-page.ts';
import { RateLimiter } from '../lib/rate-limit.ts';
import type { Webhooks } from '../services/webhooks.ts';
import type { OAuthServer } from '../services/oauth.ts';
import type { WebhookRouting } from '../services/webhook-routing.ts';
import type { NotifyHooks } from '../services/notify-hooks.ts';
import type { TodoService } from '../services/todos.ts';
import type { Logger } from '../lib/log.ts';
import { writeEventStreamHead } from '../lib/sse.ts';
import type { SessionInfo } from './views/endpoints.ts';
import { hashSecret } from '../lib/secrets.ts';
import type { Humans } from '../services/humans.ts';
import { boardSession, rememberReturnTo, clearSessionCookie, readCookie, sessionCookieName } from './auth.ts';
import type { OidcLogin } from './oidc.ts';
import { csrfValid } from './csrf.ts';
import { HTMX_ASSET, UPLOT_ASSET, UPLOT_CSS_ASSET, messagePage } from './pages.ts';
import { BoardEvents } from './sse.ts';
import { field, formOf, parseForm } from './form.ts';
import { endpointRenderer, registerEndpointRoutes } from './routes/endpoints.ts';
import { registerIntegrationRoutes } from './routes/integrations.ts';
import { registerRoutingRoutes } from './routes/routing.ts';
import { registerTodoActionRoutes } from './routes/todo-actions.ts';
import { registerSignInRoutes } from './routes/sign-in.ts';
import { registerConsentRoutes } from './routes/oauth-consent.ts';
import { BOARD_CSP } from './csp.ts';
import { registerTodoRoutes, todoRenderer } from './routes/todos.ts';
import { registerChartRoutes } from './routes/charts.ts';
import type { HistoryService } from '../services/history.ts';
import { CONNECT_GUIDE_PATH } from '../domain/guides.ts';
import { guidePage } from './views/docs.ts';

export { BOARD_CSP } from './csp.ts';

/** Per signed-in human: state-changing requests only. */
export const BOARD_POST_LIMIT = { rate: 3, burst: 30 };
export { BOARD_SIGN_IN_LIMIT } from './routes/sign-in.ts';

export interface BoardDeps {
  humans: Humans;
  clock: Clock;
  log: Logger;
  baseUrl: () => string;
  /** The cluster's sessions of each endpoint, as the cards list them. */
  sessionsOf: (endpointIds: readonly string[]) => Promise<Map<string, SessionInfo[]>>;
  endpoints: EndpointService;
  operatorPresence: OperatorPresence;
  /** Each endpoint's presence changes (its page's "Presence this week"). */
  presenceHistory: PresenceHistory;
  boardReads: BoardReads;
  selfTests: SelfTests;
  webhooks: Webhooks;
  /** Webhook routing rules: the rules page's read, save and try. */
  webhookRouting: WebhookRouting;
  hooks: NotifyHooks;
  todos: TodoService;
  /** How often live updates look for changes (default 2 s). */
  eventsPollMs?: number;
  /** Sign-in through an OpenID Connect provider; null when SWITCHBOARD_OIDC_ISSUER is unset. */
  oidc?: OidcLogin | null;
  /** The per-address limit on failed authentications (dead session cookies), shared with /api/v1 and /mcp. */
  authFailures: AuthFailures;
  /** The OAuth authorization server: the consent page, and the grants on an endpoint's page. */
  oauth: OAuthServer;
  /** Queue history: the charts and their tables. */
  history: HistoryService;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Board routes reachable without a session (sign-in and static files). */
    boardPublic?: boolean;
    /** Static files: no session lookup at all. */
    boardStatic?: boolean;
    /** A JSON route of the board (the charts' data): refusals are JSON, never a redirect to sign-in. */
    boardJson?: boolean;
  }
}

/**
 * The board: server-rendered pages for the humans who own endpoints, behind a session cookie and
 * a CSRF token on every state-changing form. It calls the same store functions and services as
 * /api/v1 (vend, revoke, presence, shift, self-test, push, webhooks and their routing rules, notify hooks), so every
 * decision is made in one place.
 */
export function registerBoard(app: FastifyInstance, deps: BoardDeps): void {
  const { clock, log, humans } = deps;
  const secure = () => deps.baseUrl().startsWith('https://');
  const postLimiter = new RateLimiter(BOARD_POST_LIMIT, clock);
  const events = new BoardEvents({
    endpoints: deps.endpoints,
    reads: deps.boardReads,
    clock,
    log,
    sessions: humans,
    pollMs: deps.eventsPollMs,
    sessionCounts: async (ids) =>
      new Map([...(await deps.sessionsOf(ids))].map(([id, of]) => [id, { sessions: of.length, unheard_sessions: of.filter((s) => s.unheard).length }])),
  });
  const asset = (name: string) => readFileSync(new URL(`./static/${name}`, import.meta.url));
  const css = asset('board.css');
  const js = asset('board.js');
  const htmx = asset(`vendor/${HTMX_ASSET}`);
  const charts = asset('charts.js');
  const uplot = asset(`vendor/${UPLOT_ASSET}`);
  const uplotCss = asset(`vendor/${UPLOT_CSS_ASSET}`);
  const connectGuide = guidePage(readFileSync(new URL('../../docs/connect.md', import.meta.url), 'utf8'));

  // Open event streams would hold the HTTP server open: end them before it closes.
  app.addHook('preClose', async () => events.closeAll());

  app.register(async (board) => {
    board.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      done(null, parseForm(body as string));
    });

    board.addHook('onRequest', async (req, reply) => {
      reply.header('content-security-policy', BOARD_CSP);
      if (req.routeOptions.config.boardStatic) return;
      const token = readCookie(req, sessionCookieName(secure()));
      if (token) {
        const attempt = await deps.authFailures.attempt(req.ip, () => humans.findWebSession(token));
        if ('retryAfter' in attempt) {
          reply.header('retry-after', String(attempt.retryAfter));
          if (req.routeOptions.url === '/events' || req.routeOptions.config.boardJson) return reply.code(429).type('text/plain; charset=utf-8').send('too many failed sign-ins\n');
          return sendPage(reply, 429, messagePage({ title: 'Slow down' }, 'Too many failed sign-ins', `Retry in ${attempt.retryAfter} s.`));
        }
        const found = attempt.value;
        if (found) req.boardSession = boardSession(found.human, token, found.expiresAt);
        // A cookie proven dead is cleared.
        else clearSessionCookie(reply, secure());
      }
      if (req.boardSession || req.routeOptions.config.boardPublic) return;
      if (req.method === 'GET' || req.method === 'HEAD') {
        if (req.routeOptions.url === '/events' || req.routeOptions.config.boardJson) return reply.code(401).type('text/plain; charset=utf-8').send('sign in first\n');
        // An OAuth client's consent request comes back after the sign-in, not to the front page.
        rememberReturnTo(reply, req.url, secure());
        return reply.redirect('/login', 303);
      }
      return sendPage(reply, 403, messagePage({ title: 'Forbidden' }, 'Not signed in', 'Your session ended. Sign in again and retry.'));
    });

    // Every state-changing request: the session's CSRF token (form field or X-CSRF-Token), then the per-human limit.
    board.addHook('preHandler', async (req, reply) => {
      if (req.method === 'GET' || req.method === 'HEAD' || req.routeOptions.config.boardPublic) return;
      const s = req.boardSession!;
      const presented = field(formOf(req), 'csrf_token') ?? req.headers['x-csrf-token'];
      if (!csrfValid(s.token, presented)) {
        return sendPage(reply, 403, messagePage({ title: 'Forbidden', session: s }, 'Refused', 'This form is stale or did not come from this board (missing or wrong CSRF token). Go back, reload and try again.'));
      }
      const wait = postLimiter.take(s.human.id);
      if (wait > 0) {
        reply.header('retry-after', String(wait));
        return sendPage(reply, 429, messagePage({ title: 'Slow down', session: s }, 'Too many changes', `Retry in ${wait} s.`));
      }
    });

    board.setErrorHandler(async (err, req, reply) =>
      sendBoardError(reply, classifyAndLog(err, log, { method: req.method, route: req.routeOptions.url }, 'board'), req.boardSession),
    );

    const staticRoute = { config: { boardPublic: true, boardStatic: true } };
    board.get('/static/board.css', staticRoute, async (_req, reply) =>
      reply.type('text/css; charset=utf-8').header('cache-control', 'no-cache').send(css),
    );
    board.get('/static/board.js', staticRoute, async (_req, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').send(js),
    );
    board.get('/static/charts.js', staticRoute, async (_req, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').send(charts),
    );
    const immutable = 'public, max-age=31536000, immutable';
    board.get(`/static/${HTMX_ASSET}`, staticRoute, async (_req, reply) => reply.type('text/javascript; charset=utf-8').header('cache-control', immutable).send(htmx));
    board.get(`/static/${UPLOT_ASSET}`, staticRoute, async (_req, reply) => reply.type('text/javascript; charset=utf-8').header('cache-control', immutable).send(uplot));
    board.get(`/static/${UPLOT_CSS_ASSET}`, staticRoute, async (_req, reply) => reply.type('text/css; charset=utf-8').header('cache-control', immutable).send(uplotCss));

    // The connect guide is public: self-test hints link it for people who are not signed in.
    board.get(CONNECT_GUIDE_PATH, staticRoute, async (_req, reply) =>
      reply.type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(connectGuide),
    );

    registerSignInRoutes(board, { ...deps, onSignOut: (token) => events.closeSession(hashSecret(token)) });
    // The pages' read models go by the name the routes use.
    const pages = { ...deps, reads: deps.boardReads };
    registerEndpointRoutes(board, pages);
    const { renderEndpoint } = endpointRenderer(pages);
    registerIntegrationRoutes(board, { ...pages, renderEndpoint });
    registerRoutingRoutes(board, pages);
    registerConsentRoutes(board, pages);
    registerTodoRoutes(board, pages);
    registerChartRoutes(board, pages);
    registerTodoActionRoutes(board, { ...pages, renderEndpoint, renderTodo: todoRenderer(pages).renderTodo });

    // -------------------------------------------------------------------------------------------
    // Live updates

    board.get('/events', { exposeHeadRoute: false }, async (req, reply) => {
      const s = req.boardSession!;
      const sessionKey = hashSecret(s.token);
      if (!events.canOpen(sessionKey)) return reply.code(429).type('text/plain; charset=utf-8').send('too many open event streams\n');
      reply.hijack();
      const res = reply.raw;
      writeEventStreamHead(res, { 'content-security-policy': BOARD_CSP });
      res.write('retry: 5000\n\n');
      events.subscribe(s.human.id, { token: s.token, key: sessionKey }, res, s.expiresAt);
    });
  });
}

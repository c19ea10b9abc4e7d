import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import { inputsOf } from '../services/presence.ts';
import type { BoardReads } from '../services/board-reads.ts';
import type { Endpoint, EndpointService } from '../services/endpoints.ts';
import type { OperatorPresence } from '../services/presence-operator.ts';
import { TODO_STATES, type TodoState } from '../services/todos.ts';
import type { SelfTests } from '../services/doorbell/self-tests.ts';
import { SwitchboardError, invalidArgument, isSwitchboardError } from '../domain/errors.ts';
import { HTTP_STATUS, classifyAndLog } from '../web/errors.ts';
import { notFoundPage, sendBoardError, sendPage } from './error-page.ts';
import { RateLimiter } from '../web/rate-limit.ts';
import type { Webhooks } from '../services/webhooks.ts';
import type { Logger } from '../lib/log.ts';
import { writeEventStreamHead } from '../lib/sse.ts';
import type { Session, SessionRegistry } from '../sessions/registry.ts';
import { effective, type EffectivePresence, type Presence } from '../domain/presence/index.ts';
import { mcpJson, mcpUrl } from '../domain/mcp-client.ts';
import { validateQueueName } from '../domain/scope.ts';
import { hashSecret } from '../lib/secrets.ts';
import type { Humans } from '../services/humans.ts';
import { SESSION_COOKIE, boardSession, clearSessionCookie, readCookie, setSessionCookie, type BoardSession } from './auth.ts';
import { OIDC_STATE_COOKIE, OIDC_STATE_TTL_MS, OidcError, type OidcLogin } from './oidc.ts';
import { csrfValid } from './csrf.ts';
import { path } from './html.ts';
import {
  HTMX_ASSET,
  alreadyVendedPage,
  endpointPage,
  endpointsPage,
  loginConfirmPage,
  loginDeadPage,
  loginHelpPage,
  messagePage,
  oidcFailedPage,
  revokeConfirmPage,
  todoPage,
  todosPage,
  vendedPage,
  type CardData,
  type CardErrors,
  type FieldError,
  type ReportView,
  type TodoListView,
} from './pages.ts';
import { BoardEvents } from './sse.ts';

/** The board's own policy: its pages load only same-origin CSS and JS, and no inline script or style. */
export const BOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** Per signed-in human: state-changing requests only. */
export const BOARD_POST_LIMIT = { rate: 3, burst: 30 };
/** Per client IP: the public sign-in routes (a link's page and its confirmation, provider start and callback). */
export const BOARD_SIGN_IN_LIMIT = { rate: 1, burst: 20 };
const TODOS_PAGE_LIMIT = 100;
const VEND_REQUEST = /^[A-Za-z0-9_-]{16,64}$/;

export interface BoardDeps {
  humans: Humans;
  clock: Clock;
  log: Logger;
  baseUrl: () => string;
  sessions: SessionRegistry;
  endpoints: EndpointService;
  operatorPresence: OperatorPresence;
  reads: BoardReads;
  selfTests: SelfTests;
  webhooks: Webhooks;
  /** Whether a session's recent doorbell writes all failed (the deaf-consumer warning). */
  isDeaf?: (session: Session) => boolean;
  /** How often live updates look for changes (default 2 s). */
  eventsPollMs?: number;
  /** Sign-in through an OpenID Connect provider; null when SWITCHBOARD_OIDC_ISSUER is unset. */
  oidc?: OidcLogin | null;
}

type Form = Record<string, string | string[]>;

/** application/x-www-form-urlencoded → fields; a repeated name becomes an array. */
function parseForm(body: string): Form {
  const out: Form = {};
  for (const [k, v] of new URLSearchParams(body)) {
    const had = out[k];
    out[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return out;
}

const formOf = (req: FastifyRequest): Form => (req.body && typeof req.body === 'object' ? (req.body as Form) : {});
function field(form: Form, name: string): string | undefined {
  const v = form[name];
  return Array.isArray(v) ? v[0] : v;
}
function fields(form: Form, name: string): string[] {
  const v = form[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

const DURATION = /^(?:(\d+)h)?(?:(\d+)m)?$/;

/** The presence form's `until`: empty (no end), a duration from now like 90m or 2h, or an RFC 3339 time. */
function parseUntil(raw: string | undefined, now: Date): Date | null {
  const text = (raw ?? '').trim();
  if (text === '') return null;
  const d = DURATION.exec(text);
  let until: Date;
  if (d && (d[1] || d[2])) until = new Date(now.getTime() + (Number(d[1] ?? 0) * 60 + Number(d[2] ?? 0)) * 60_000);
  else if (/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/i.test(text)) until = new Date(text);
  else throw invalidArgument('until', 'must be a duration like 90m or 2h, or an RFC 3339 time like 2026-12-01T17:00:00Z');
  if (Number.isNaN(until.getTime())) throw invalidArgument('until', 'is not a valid time');
  return until;
}

const fieldErrorOf = (err: SwitchboardError): FieldError => ({
  field: typeof err.details.field === 'string' ? err.details.field : 'form',
  message: err.message,
});

const isInvalid = (err: unknown): err is SwitchboardError => isSwitchboardError(err) && err.code === 'invalid_argument';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Board routes reachable without a session (sign-in and static files). */
    boardPublic?: boolean;
    /** Static files: no session lookup at all. */
    boardStatic?: boolean;
  }
}

/**
 * The board: server-rendered pages for the humans who own endpoints, behind a session cookie and
 * a CSRF token on every state-changing form. It calls the same store functions and services as
 * /api/v1 (vend, revoke, presence, shift, self-test), so every decision is made in one place.
 */
export function registerBoard(app: FastifyInstance, deps: BoardDeps): void {
  const { clock, log, humans } = deps;
  const secure = () => deps.baseUrl().startsWith('https://');
  const postLimiter = new RateLimiter(BOARD_POST_LIMIT, clock);
  const signInLimiter = new RateLimiter(BOARD_SIGN_IN_LIMIT, clock);
  const oidc = deps.oidc ?? null;
  const events = new BoardEvents({
    endpoints: deps.endpoints,
    reads: deps.reads,
    clock,
    log,
    pollMs: deps.eventsPollMs,
    sessionCounts: (id) => {
      const of = deps.sessions.sessionsOf(id);
      return { sessions: of.length, unheard_sessions: of.filter((s) => s.unheard).length };
    },
  });
  const asset = (name: string) => readFileSync(new URL(`./static/${name}`, import.meta.url));
  const css = asset('board.css');
  const js = asset('board.js');
  const htmx = asset(`vendor/${HTMX_ASSET}`);

  // Open event streams would hold the HTTP server open: end them before it closes.
  app.addHook('preClose', async () => events.closeAll());

  app.register(async (board) => {
    board.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      done(null, parseForm(body as string));
    });

    board.addHook('onRequest', async (req, reply) => {
      reply.header('content-security-policy', BOARD_CSP);
      if (req.routeOptions.config.boardStatic) return;
      const token = readCookie(req, SESSION_COOKIE);
      if (token) {
        const found = await humans.findWebSession(token);
        if (found) req.boardSession = boardSession(found.human, token, found.expiresAt);
        // A cookie proven dead is cleared.
        else clearSessionCookie(reply, secure());
      }
      if (req.boardSession || req.routeOptions.config.boardPublic) return;
      if (req.method === 'GET' || req.method === 'HEAD') {
        if (req.routeOptions.url === '/events') return reply.code(401).type('text/plain; charset=utf-8').send('sign in first\n');
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

    const staticRoute = { config: { boardPublic: true, boardStatic: true } };
    board.get('/static/board.css', staticRoute, async (_req, reply) =>
      reply.type('text/css; charset=utf-8').header('cache-control', 'no-cache').send(css),
    );
    board.get('/static/board.js', staticRoute, async (_req, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').send(js),
    );
    board.get(`/static/${HTMX_ASSET}`, staticRoute, async (_req, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=31536000, immutable').send(htmx),
    );

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
      setSessionCookie(reply, opened.sessionToken, secure());
      log.info({ human_id: opened.humanId }, 'board sign-in by link');
      return reply.redirect('/', 303);
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
      const { human, created, linked } = opened;
      setSessionCookie(reply, opened.sessionToken, secure());
      log.info({ human_id: human.id, handle: human.handle, created, linked }, 'board sign-in by oidc');
      return reply.redirect('/', 302);
    });

    board.post('/logout', async (req, reply) => {
      const s = req.boardSession!;
      await humans.deleteWebSession(s.token);
      events.closeSession(hashSecret(s.token));
      clearSessionCookie(reply, secure());
      return reply.redirect('/login', 303);
    });

    // -------------------------------------------------------------------------------------------
    // Endpoints

    const now = () => clock.now();
    const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;
    const idParam = (req: FastifyRequest) => (req.params as { id: string }).id;

    const cardData = (e: Endpoint): CardData => ({
      endpoint: e,
      presence: effective(inputsOf(e), now()),
      mcpUrl: mcpUrl(deps.baseUrl(), e.slug),
      sessions: deps.sessions.sessionsOf(e.id).map((s) => ({
        id: s.id,
        client: `${s.clientInfo.name} ${s.clientInfo.version}`.trim(),
        stream: s.stream !== null,
        unheard: s.unheard,
        deaf: deps.isDeaf?.(s) ?? false,
      })),
    });

    async function renderEndpoints(reply: FastifyReply, s: BoardSession, status: number, opts: Parameters<typeof endpointsPage>[3] = {}) {
      const rows = await deps.endpoints.listOwn(s.human.id);
      return sendPage(reply, status, endpointsPage(s, rows.map(cardData), now(), opts));
    }

    async function renderEndpoint(reply: FastifyReply, s: BoardSession, e: Endpoint, status: number, opts: { errs?: CardErrors; reportError?: string } = {}) {
      const [latest] = await deps.reads.latestSelfTests([e.id]);
      let report: ReportView | null = null;
      if (latest) {
        const r = await deps.selfTests.report(e.id, latest.test_id);
        report = { ...r, started_at: latest.created_at };
      }
      const page = endpointPage(s, cardData(e), now(), {
        report,
        reportError: opts.reportError,
        webhooks: await deps.webhooks.list(e.id),
        events: await deps.webhooks.events(e.id, 5),
        errs: opts.errs,
        live: status === 200 && !opts.errs && !opts.reportError,
      });
      return sendPage(reply, status, page);
    }

    /** One of the caller's endpoints that is still active; another human's answers like a missing one. */
    const activeEndpoint = (req: FastifyRequest): Promise<Endpoint> => deps.endpoints.requireOwnActive(humanOf(req).human.id, idParam(req));

    /** After a card form: back to the page it was sent from (one of two fixed paths). */
    const cardHome = (req: FastifyRequest, e: Endpoint) =>
      field(formOf(req), 'return') === 'list' ? `/#endpoint-${e.id}` : path('/endpoints', e.id);

    /** A refused card form: the same page again, with the error under its field. */
    async function cardRefused(req: FastifyRequest, reply: FastifyReply, e: Endpoint, err: SwitchboardError, shiftValue?: string) {
      const s = humanOf(req);
      const errs: CardErrors = { error: fieldErrorOf(err), shiftValue };
      if (field(formOf(req), 'return') === 'list') return renderEndpoints(reply, s, 400, { errorsFor: { id: e.id, errs } });
      return renderEndpoint(reply, s, e, 400, { errs });
    }

    board.get('/', async (req, reply) => renderEndpoints(reply, humanOf(req), 200));
    board.get('/endpoints', async (_req, reply) => reply.redirect('/', 303));

    board.post('/endpoints', async (req, reply) => {
      const s = humanOf(req);
      const form = formOf(req);
      const name = field(form, 'name') ?? '';
      const queuesText = field(form, 'queues');
      const verbs = fields(form, 'verbs');
      const queues = queuesText === undefined ? undefined : queuesText.split(/[\s,]+/).filter((q) => q !== '');
      const request = field(form, 'vend_request');
      const vendRequest = request !== undefined && VEND_REQUEST.test(request) ? request : undefined;
      try {
        const { endpoint, credential } = await deps.endpoints.vend(s.human.id, { name, queues, verbs, vendRequest });
        const url = mcpUrl(deps.baseUrl(), endpoint.slug);
        log.info({ slug: endpoint.slug, human_id: s.human.id }, 'endpoint vended on the board');
        return sendPage(
          reply,
          201,
          vendedPage(s, {
            id: endpoint.id,
            name: endpoint.agent_name,
            slug: endpoint.slug,
            mcpUrl: url,
            credential,
            mcpJson: mcpJson(url, credential),
          }),
        );
      } catch (err) {
        if (isSwitchboardError(err) && err.code === 'conflict' && typeof err.details.endpoint_id === 'string') {
          const first = await deps.endpoints.requireOwn(s.human.id, err.details.endpoint_id);
          return sendPage(reply, 409, alreadyVendedPage(s, first));
        }
        if (!isInvalid(err)) throw err;
        return renderEndpoints(reply, s, 400, { vend: { request: vendRequest, name, queues: queuesText, verbs, error: fieldErrorOf(err) } });
      }
    });

    board.get('/endpoints/:id', async (req, reply) => {
      const e = await deps.endpoints.requireOwn(humanOf(req).human.id, idParam(req));
      return renderEndpoint(reply, humanOf(req), e, 200);
    });

    // Presence: the same plan and service as PUT /api/v1/endpoints/{ref}/presence.
    board.post('/endpoints/:id/presence', async (req, reply) => {
      const e = await activeEndpoint(req);
      const form = formOf(req);
      const s = humanOf(req);
      try {
        const until = parseUntil(field(form, 'until'), now());
        await deps.operatorPresence.set(s.human.id, e, field(form, 'presence') as Presence, until);
      } catch (err) {
        if (!isInvalid(err)) throw err;
        return cardRefused(req, reply, e, err);
      }
      return reply.redirect(cardHome(req, e), 303);
    });

    board.post('/endpoints/:id/presence/clear', async (req, reply) => {
      const e = await activeEndpoint(req);
      const s = humanOf(req);
      await deps.operatorPresence.clear(s.human.id, e);
      return reply.redirect(cardHome(req, e), 303);
    });

    // Shift: parsed by the one shift grammar; errors come back inline, naming the field `shift`.
    board.post('/endpoints/:id/shift', async (req, reply) => {
      const e = await activeEndpoint(req);
      const form = formOf(req);
      const s = humanOf(req);
      const raw = field(form, 'shift') ?? '';
      try {
        const shift = field(form, 'action') === 'clear' || raw.trim() === '' ? null : raw;
        await deps.operatorPresence.setShift(s.human.id, e, shift);
      } catch (err) {
        if (!isInvalid(err)) throw err;
        return cardRefused(req, reply, e, err, raw);
      }
      return reply.redirect(cardHome(req, e), 303);
    });

    // Self-test: the same service as POST /api/v1/endpoints/{ref}/doorbell-tests; back only to the card.
    board.post('/endpoints/:id/self-test', async (req, reply) => {
      const e = await activeEndpoint(req);
      try {
        await deps.selfTests.start({ id: e.id, slug: e.slug, queues: e.scope_queues }, undefined);
      } catch (err) {
        if (!isSwitchboardError(err) || (err.code !== 'rate_limited' && err.code !== 'invalid_argument')) throw err;
        if (typeof err.details.retry_after === 'number') reply.header('retry-after', String(err.details.retry_after));
        return renderEndpoint(reply, humanOf(req), e, HTTP_STATUS[err.code], { reportError: err.message });
      }
      return reply.redirect(`${path('/endpoints', e.id)}#report`, 303);
    });

    board.get('/endpoints/:id/revoke', async (req, reply) => {
      const e = await activeEndpoint(req);
      return sendPage(reply, 200, revokeConfirmPage(humanOf(req), e));
    });

    board.post('/endpoints/:id/revoke', async (req, reply) => {
      const s = humanOf(req);
      const { endpoint, deadLettered } = await deps.endpoints.revoke(s.human.id, idParam(req));
      log.info({ slug: endpoint.slug, human_id: s.human.id, todos_dead_lettered: deadLettered }, 'endpoint revoked on the board');
      return reply.redirect(path('/endpoints', endpoint.id), 303);
    });

    // -------------------------------------------------------------------------------------------
    // Todos

    /** Effective presence of each of the human's active endpoints, for "held until". */
    async function heldBy(humanId: string): Promise<Map<string, EffectivePresence>> {
      const out = new Map<string, EffectivePresence>();
      for (const e of await deps.endpoints.listOwn(humanId)) {
        if (e.state !== 'active') continue;
        const eff = effective(inputsOf(e), now());
        if (eff.presence === 'out') out.set(e.id, eff);
      }
      return out;
    }

    board.get('/todos', async (req, reply) => {
      const s = humanOf(req);
      const q = req.query as Record<string, unknown>;
      const stateRaw = typeof q.state === 'string' && q.state !== '' ? q.state : undefined;
      const queueRaw = typeof q.queue === 'string' && q.queue !== '' ? q.queue : undefined;
      if (stateRaw !== undefined && !(TODO_STATES as readonly string[]).includes(stateRaw)) {
        throw invalidArgument('state', `must be one of ${TODO_STATES.join(', ')}`);
      }
      const state = stateRaw as TodoState | undefined;
      const queue = queueRaw === undefined ? undefined : validateQueueName('queue', queueRaw);
      const [rows, counts, held] = await Promise.all([
        deps.reads.todos(s.human.id, { state, queue, limit: TODOS_PAGE_LIMIT }),
        deps.reads.todoCounts(s.human.id),
        heldBy(s.human.id),
      ]);
      const stateCounts: Record<string, number> = {};
      const queueCounts = new Map<string, number>();
      for (const c of counts) {
        if (!queue || c.queue === queue) stateCounts[c.state] = (stateCounts[c.state] ?? 0) + c.n;
        if (!state || c.state === state) queueCounts.set(c.queue, (queueCounts.get(c.queue) ?? 0) + c.n);
      }
      const view: TodoListView = {
        rows: rows.map((t) => ({ ...t, held: t.state === 'pending' ? (held.get(t.endpoint_id) ?? null) : null })),
        state,
        queue,
        stateCounts,
        queueCounts: [...queueCounts.entries()].sort(([a], [b]) => (a < b ? -1 : 1)),
        total: counts.reduce((a, c) => a + c.n, 0),
        limit: TODOS_PAGE_LIMIT,
      };
      const live = new URLSearchParams();
      if (state) live.set('state', state);
      if (queue) live.set('queue', queue);
      return sendPage(reply, 200, todosPage(s, view, now(), live.size ? `/todos?${live}` : '/todos'));
    });

    board.get('/todos/:id', async (req, reply) => {
      const s = humanOf(req);
      const t = await deps.reads.todo(s.human.id, idParam(req));
      if (!t) return sendPage(reply, 404, notFoundPage(s));
      const held = t.state === 'pending' ? ((await heldBy(s.human.id)).get(t.endpoint_id) ?? null) : null;
      return sendPage(reply, 200, todoPage(s, t, held, now()));
    });

    // -------------------------------------------------------------------------------------------
    // Live updates

    board.get('/events', { exposeHeadRoute: false }, async (req, reply) => {
      const s = humanOf(req);
      const sessionKey = hashSecret(s.token);
      if (!events.canOpen(sessionKey)) return reply.code(429).type('text/plain; charset=utf-8').send('too many open event streams\n');
      reply.hijack();
      const res = reply.raw;
      writeEventStreamHead(res, { 'content-security-policy': BOARD_CSP });
      res.write('retry: 5000\n\n');
      events.subscribe(s.human.id, sessionKey, res, s.expiresAt);
    });
  });
}

/** Every board page is one person's data (one shows a credential): never stored by a cache. */
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

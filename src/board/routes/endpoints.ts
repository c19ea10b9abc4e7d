import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isSwitchboardError, retryAfterSeconds, type SwitchboardError } from '../../domain/errors.ts';
import { connectInstructions } from '../../domain/connect-instructions.ts';
import { mcpUrl } from '../../domain/mcp-client.ts';
import { effective, type Presence } from '../../domain/presence/index.ts';
import { parsePresenceUntil } from '../../domain/presence/until.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../lib/log.ts';
import type { BoardReads } from '../../services/board-reads.ts';
import type { SelfTests } from '../../services/doorbell/self-tests.ts';
import { ownerOf, type Endpoint, type EndpointService } from '../../services/endpoints.ts';
import type { OperatorPresence } from '../../services/presence-operator.ts';
import { presenceWeek, type PresenceHistory } from '../../services/presence-history.ts';
import { inputsOf } from '../../services/presence.ts';
import type { Webhooks } from '../../services/webhooks.ts';
import { HTTP_STATUS } from '../../web/errors.ts';
import type { BoardSession } from '../auth.ts';
import { sendPage } from '../error-page.ts';
import { field, fieldErrorOf, fields, formOf, isInvalid } from '../form.ts';
import { path } from '../html.ts';
import {
  alreadyVendedPage,
  endpointPage,
  ENDPOINTS_PER_PAGE,
  endpointsPage,
  endpointsPageUrl,
  listPageOf,
  REVOKED_SHOWN,
  revokeConfirmPage,
  vendedPage,
  type CardData,
  type CardErrors,
  type EndpointForms,
  type ReportView,
  type SessionInfo,
} from '../views/endpoints.ts';
import type { NotifyHooks } from '../../services/notify-hooks.ts';
import type { OAuthServer } from '../../services/oauth.ts';
import { isUuid } from '../../domain/ids.ts';
import type { HistoryRange } from '../../domain/history.ts';
import type { HistoryService } from '../../services/history.ts';
import { endpointCharts, presenceBandFigure, sparklinesSrc } from '../views/charts.ts';
import { DEFAULT_RANGE, presenceBand, rangeOf, sparklines } from './charts.ts';
import { notFound } from '../../domain/errors.ts';

export interface EndpointRouteDeps {
  clock: Clock;
  log: Logger;
  baseUrl: () => string;
  sessionsOf: (endpointIds: readonly string[]) => Promise<Map<string, SessionInfo[]>>;
  endpoints: EndpointService;
  operatorPresence: OperatorPresence;
  /** The endpoint page's "Presence this week". */
  presenceHistory: Pick<PresenceHistory, 'between'>;
  reads: Pick<BoardReads, 'latestSelfTests' | 'endpointCounts'>;
  /** The charts: each card's pending sparkline, an endpoint's history. */
  history: Pick<HistoryService, 'history' | 'pendingSparklines'>;
  selfTests: SelfTests;
  webhooks: Webhooks;
  hooks: Pick<NotifyHooks, 'list'>;
  /** Each card's OAuth grants, and their revocation. */
  oauth: Pick<OAuthServer, 'grantsOfEach' | 'revokeGrant'>;
}

export interface EndpointPageOptions {
  errs?: CardErrors;
  reportError?: string;
  forms?: EndpointForms;
  /** The charts' range (default 24 h). */
  range?: HistoryRange;
}

/** The endpoint pages, rendered the same way by every route that answers with one (a refused form included). */
export function endpointRenderer(deps: EndpointRouteDeps) {
  const now = () => deps.clock.now();

  const cardsOf = async (humanId: string, rows: readonly Endpoint[]): Promise<CardData[]> => {
    const ids = rows.map((e) => e.id);
    const [sessions, counts, grants] = await Promise.all([deps.sessionsOf(ids), deps.reads.endpointCounts(humanId, ids), deps.oauth.grantsOfEach(humanId, ids)]);
    return rows.map((e) => ({
      endpoint: e,
      presence: effective(inputsOf(e), now()),
      mcpUrl: mcpUrl(deps.baseUrl(), e.slug),
      sessions: sessions.get(e.id) ?? [],
      counts: counts.get(e.id) ?? { pending: 0, claimed: 0 },
      grants: grants.get(e.id) ?? [],
    }));
  };

  /** The endpoints page `page` (1-based; past the last, the last): its cards, their sparklines, the newest revoked. */
  async function renderEndpoints(reply: FastifyReply, s: BoardSession, status: number, opts: Omit<NonNullable<Parameters<typeof endpointsPage>[4]>, 'pager' | 'revokedTotal'> & { page?: number } = {}) {
    const [active, revoked] = await Promise.all([
      deps.endpoints.listOwnPage(s.human.id, 'active', opts.page ?? 1, ENDPOINTS_PER_PAGE),
      deps.endpoints.listOwnPage(s.human.id, 'revoked', 1, REVOKED_SHOWN),
    ]);
    const [cards, spark] = await Promise.all([cardsOf(s.human.id, active.endpoints), sparklines(deps, s.human.id, active.endpoints.map((e) => e.id), now())]);
    const src = sparklinesSrc(active.page);
    const withSpark = cards.map((c) => ({
      ...c,
      listPage: active.page,
      pending24h: { values: spark.series[c.endpoint.id] ?? [], from: spark.from, step_seconds: spark.step_seconds, src },
    }));
    return sendPage(reply, status, endpointsPage(s, withSpark, revoked.endpoints, now(), { ...opts, pager: active, revokedTotal: revoked.total }));
  }

  async function renderEndpoint(reply: FastifyReply, s: BoardSession, e: Endpoint, status: number, opts: EndpointPageOptions = {}) {
    const [latest] = await deps.reads.latestSelfTests([e.id]);
    let report: ReportView | null = null;
    if (latest) {
      const r = await deps.selfTests.report(e.id, latest.test_id);
      report = { ...r, started_at: latest.created_at };
    }
    const w = presenceWeek(now());
    const range = opts.range ?? DEFAULT_RANGE;
    const [[card], webhooks, events, hooks, week, history] = await Promise.all([
      cardsOf(s.human.id, [e]),
      deps.webhooks.list(e.id),
      deps.webhooks.events(e.id, 5),
      deps.hooks.list(e.id),
      deps.presenceHistory.between(s.human.id, e.id, w),
      deps.history.history(s.human.id, [e.id], range),
    ]);
    const page = endpointPage(s, card!, now(), {
      report,
      reportError: opts.reportError,
      webhooks,
      events,
      hooks,
      presenceWeek: week,
      charts: endpointCharts(e.id, history, presenceBandFigure(e.id, presenceBand(e, week, w, now()))),
      range: opts.range,
      errs: opts.errs,
      forms: opts.forms,
      live: status === 200 && !opts.errs && !opts.reportError && !opts.forms,
    });
    return sendPage(reply, status, page);
  }

  return { renderEndpoints, renderEndpoint };
}

const VEND_REQUEST = /^[A-Za-z0-9_-]{16,64}$/;
const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;
const idParam = (req: FastifyRequest) => (req.params as { id: string }).id;

/**
 * The endpoint cards and their forms: vend, presence, shift, self-test, revoke. The same services
 * as /api/v1, so ownership, "active" and every presence rule are decided once.
 */
export function registerEndpointRoutes(board: FastifyInstance, deps: EndpointRouteDeps): void {
  const now = () => deps.clock.now();

  const { renderEndpoints, renderEndpoint } = endpointRenderer(deps);

  /** One of the caller's endpoints that is still active; another human's answers like a missing one. */
  const activeEndpoint = (req: FastifyRequest): Promise<Endpoint> => deps.endpoints.requireOwnActive(humanOf(req).human.id, idParam(req));

  /** After a card form: back to the page it was sent from (one of two fixed paths, the list's page a number). */
  const cardHome = (req: FastifyRequest, e: Endpoint) =>
    field(formOf(req), 'return') === 'list' ? `${endpointsPageUrl(listPageOf(field(formOf(req), 'page')))}#endpoint-${e.id}` : path('/endpoints', e.id);

  /** A refused card form: the same page again, with the error under its field. */
  async function cardRefused(req: FastifyRequest, reply: FastifyReply, e: Endpoint, err: SwitchboardError, shiftValue?: string) {
    const s = humanOf(req);
    const errs: CardErrors = { error: fieldErrorOf(err), shiftValue };
    if (field(formOf(req), 'return') === 'list') return renderEndpoints(reply, s, 400, { errorsFor: { id: e.id, errs }, page: listPageOf(field(formOf(req), 'page')) });
    return renderEndpoint(reply, s, e, 400, { errs });
  }

  board.get('/', async (req, reply) => renderEndpoints(reply, humanOf(req), 200, { page: listPageOf((req.query as { page?: unknown } | undefined)?.page) }));
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
      deps.log.info({ slug: endpoint.slug, human_id: s.human.id }, 'endpoint vended on the board');
      return sendPage(
        reply,
        201,
        vendedPage(s, {
          id: endpoint.id,
          name: endpoint.agent_name,
          slug: endpoint.slug,
          mcpUrl: url,
          credential,
          connect: connectInstructions({ mcpUrl: url, slug: endpoint.slug }),
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
    const range = rangeOf(req.query);
    const e = await deps.endpoints.requireOwn(humanOf(req).human.id, idParam(req));
    return renderEndpoint(reply, humanOf(req), e, 200, { range: (req.query as { range?: string }).range ? range : undefined });
  });

  // Presence: the same plan and service as PUT /api/v1/endpoints/{ref}/presence.
  board.post('/endpoints/:id/presence', async (req, reply) => {
    const e = await activeEndpoint(req);
    const form = formOf(req);
    const s = humanOf(req);
    try {
      const until = parsePresenceUntil(field(form, 'until'), now());
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
      // Only the clear button clears; a blank save is refused by the shift grammar, as the API refuses it.
      const shift = field(form, 'action') === 'clear' ? null : raw;
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
      await deps.selfTests.start(ownerOf(e), undefined);
    } catch (err) {
      if (!isSwitchboardError(err) || (err.code !== 'rate_limited' && err.code !== 'invalid_argument')) throw err;
      const wait = retryAfterSeconds(err);
      if (wait !== undefined) reply.header('retry-after', String(wait));
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
    deps.log.info({ slug: endpoint.slug, human_id: s.human.id, todos_dead_lettered: deadLettered }, 'endpoint revoked on the board');
    return reply.redirect(path('/endpoints', endpoint.id), 303);
  });

  // An OAuth grant's Revoke (card or page): its tokens stop working at once.
  board.post('/endpoints/:id/grants/:grant/revoke', async (req, reply) => {
    const s = humanOf(req);
    const e = await deps.endpoints.requireOwn(s.human.id, idParam(req));
    const { grant } = req.params as { grant: string };
    if (!isUuid(grant)) throw notFound(`no grant ${grant}`);
    await deps.oauth.revokeGrant(s.human.id, e.id, grant);
    return reply.redirect(cardHome(req, e), 303);
  });
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidArgument } from '../../domain/errors.ts';
import { HISTORY_RANGES, windowAt, type HistoryRange } from '../../domain/history.ts';
import { validateQueueName } from '../../domain/scope.ts';
import type { Logger } from '../../lib/log.ts';
import type { Endpoint, EndpointService } from '../../services/endpoints.ts';
import { presenceWeek, type PresenceHistory, type PresenceWindow } from '../../services/presence-history.ts';
import { inputsOf } from '../../services/presence.ts';
import { effective } from '../../domain/presence/index.ts';
import { presenceSpans, shiftWindows } from '../../domain/presence-band.ts';
import type { HistoryService } from '../../services/history.ts';
import type { Webhooks } from '../../services/webhooks.ts';
import { classifyAndLog, sendError } from '../../web/errors.ts';
import type { BoardSession } from '../auth.ts';
import { ENDPOINTS_PER_PAGE, listPageOf } from '../views/endpoints.ts';

// The charts' data (issue 39): small JSON routes behind the board session, each answering from
// the same service call as the table its page renders (the loaders below are shared by both).
// Another human's endpoint or webhook is a 404, as on every board page; a refusal is JSON.

export interface ChartRouteDeps {
  log: Logger;
  endpoints: Pick<EndpointService, 'requireOwn' | 'listOwnPage'>;
  history: Pick<HistoryService, 'history' | 'byQueue' | 'pendingSparklines' | 'webhookDeliveries'>;
  webhooks: Pick<Webhooks, 'ownWebhook'>;
  presenceHistory: Pick<PresenceHistory, 'between'>;
}

export const DEFAULT_RANGE: HistoryRange = '24h';

/** `?range=`: 1h, 24h or 7d (default 24h); anything else is refused naming the field. */
export function rangeOf(query: unknown): HistoryRange {
  const raw = (query as Record<string, unknown> | undefined)?.range;
  if (raw === undefined || raw === '') return DEFAULT_RANGE;
  if (typeof raw === 'string' && (HISTORY_RANGES as readonly string[]).includes(raw)) return raw as HistoryRange;
  throw invalidArgument('range', `must be ${HISTORY_RANGES.join(', ')}`);
}

/** The todos page's chart data: per queue over the human's endpoints (or one), optionally one queue. */
export async function todoHistory(deps: { history: Pick<HistoryService, 'byQueue'> }, humanId: string, filter: { endpointId?: string; queue?: string }, range: HistoryRange) {
  const v = await deps.history.byQueue(humanId, range, { endpointId: filter.endpointId });
  const queues = filter.queue === undefined ? v.queues : Object.fromEntries(Object.entries(v.queues).filter(([q]) => q === filter.queue));
  return { range, ...v, queues };
}

/** The endpoints page's sparklines: each endpoint's pending depth over 24 h, one query for all. */
export async function sparklines(deps: { history: Pick<HistoryService, 'pendingSparklines'> }, humanId: string, endpointIds: readonly string[], now: Date) {
  const series = await deps.history.pendingSparklines(humanId, endpointIds);
  // The window pendingSparklines reads (the same domain function), for the x axis.
  const w = windowAt('24h', now);
  return { range: '24h' as const, step_seconds: w.stepSeconds, from: w.from.toISOString(), to: w.to.toISOString(), series: Object.fromEntries(series) };
}

/** The presence band's data: spans of in/out with their source over the week, and the shift's windows behind them. */
export interface PresenceBand {
  since: string;
  until: string;
  spans: { from: string; to: string; presence: 'in' | 'out'; source: string | null }[];
  /** The windows of the endpoint's current shift within the week. */
  shift: { from: string; to: string }[];
  shift_text: string | null;
}

/** The band from the week's presence changes (the same read as the page's "Presence this week" table). */
export function presenceBand(e: Endpoint, week: Awaited<ReturnType<PresenceHistory['between']>>, w: PresenceWindow, now: Date): PresenceBand {
  const inputs = inputsOf(e);
  // The band ends now (the window's `until` is now + 1 ms).
  const until = now < w.until ? now : w.until;
  const current = effective(inputs, now);
  const spans = presenceSpans({ since: w.since, until, startsAt: e.created_at }, week.changes, week.before, current);
  const iso = (d: Date) => d.toISOString();
  return {
    since: iso(w.since),
    until: iso(until),
    spans: spans.map((s) => ({ from: iso(s.from), to: iso(s.to), presence: s.presence, source: s.source })),
    shift: shiftWindows(inputs.shift, w.since, until).map((x) => ({ from: iso(x.from), to: iso(x.to) })),
    shift_text: e.shift,
  };
}

const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;
const idParam = (req: FastifyRequest) => (req.params as { id: string }).id;
const queryText = (q: Record<string, unknown>, name: string) => (typeof q[name] === 'string' && q[name] !== '' ? (q[name] as string) : undefined);

export function registerChartRoutes(board: FastifyInstance, deps: ChartRouteDeps & { clock: { now(): Date } }): void {
  board.register(async (json) => {
    // JSON in, JSON out: these routes' refusals are the API's envelope, not a board page.
    json.setErrorHandler(async (err, req, reply) =>
      sendError(reply.header('cache-control', 'no-store'), classifyAndLog(err, deps.log, { method: req.method, route: req.routeOptions.url }, 'board')),
    );
    const opts = { config: { boardJson: true } };
    const send = (reply: FastifyReply, body: unknown) => reply.header('cache-control', 'no-store').type('application/json; charset=utf-8').send(body);

    json.get('/endpoints/:id/history.json', opts, async (req, reply) => {
      const range = rangeOf(req.query);
      const e = await deps.endpoints.requireOwn(humanOf(req).human.id, idParam(req));
      return send(reply, await deps.history.history(humanOf(req).human.id, [e.id], range));
    });

    json.get('/endpoints/:id/presence.json', opts, async (req, reply) => {
      const humanId = humanOf(req).human.id;
      const e = await deps.endpoints.requireOwn(humanId, idParam(req));
      const now = deps.clock.now();
      const w = presenceWeek(now);
      return send(reply, presenceBand(e, await deps.presenceHistory.between(humanId, e.id, w), w, now));
    });

    json.get('/endpoints/sparklines.json', opts, async (req, reply) => {
      // The endpoints on the endpoints page `?page=` (the cards the page drew), not every one.
      const humanId = humanOf(req).human.id;
      const page = await deps.endpoints.listOwnPage(humanId, 'active', listPageOf((req.query as { page?: unknown } | undefined)?.page), ENDPOINTS_PER_PAGE);
      return send(reply, await sparklines(deps, humanId, page.endpoints.map((e) => e.id), deps.clock.now()));
    });

    json.get('/todos/history.json', opts, async (req, reply) => {
      const range = rangeOf(req.query);
      const q = (req.query ?? {}) as Record<string, unknown>;
      const humanId = humanOf(req).human.id;
      const endpointRaw = queryText(q, 'endpoint');
      const queueRaw = queryText(q, 'queue');
      const queue = queueRaw === undefined ? undefined : validateQueueName('queue', queueRaw);
      const endpoint = endpointRaw === undefined ? undefined : await deps.endpoints.requireOwn(humanId, endpointRaw);
      return send(reply, await todoHistory(deps, humanId, { endpointId: endpoint?.id, queue }, range));
    });

    json.get('/webhooks/:id/history.json', opts, async (req, reply) => {
      const range = rangeOf(req.query);
      const humanId = humanOf(req).human.id;
      const w = await deps.webhooks.ownWebhook(humanId, idParam(req));
      return send(reply, { range, ...(await deps.history.webhookDeliveries(humanId, w.id, range)) });
    });
  });
}

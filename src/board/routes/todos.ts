import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidArgument } from '../../domain/errors.ts';
import { effective, type EffectivePresence } from '../../domain/presence/index.ts';
import { validateQueueName } from '../../domain/scope.ts';
import type { Clock } from '../../lib/clock.ts';
import type { BoardReads } from '../../services/board-reads.ts';
import type { Endpoint, EndpointService } from '../../services/endpoints.ts';
import { inputsOf } from '../../services/presence.ts';
import { TODO_STATES, type TodoState } from '../../services/todos.ts';
import type { BoardSession } from '../auth.ts';
import { notFoundPage, sendPage } from '../error-page.ts';
import { todoPage, todosPage, type TodoListView, type TodoPageOptions } from '../views/todos.ts';
import type { HistoryService } from '../../services/history.ts';
import { rangeOf, todoHistory } from './charts.ts';

export interface TodoRouteDeps {
  clock: Clock;
  endpoints: Pick<EndpointService, 'listOwn' | 'requireOwn'>;
  reads: Pick<BoardReads, 'todos' | 'todoCounts' | 'todo'>;
  /** The queues' history (the page's charts). */
  history: Pick<HistoryService, 'byQueue'>;
}

const TODOS_PAGE_LIMIT = 100;
const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;
const idParam = (req: FastifyRequest) => (req.params as { id: string }).id;
const queryText = (q: Record<string, unknown>, name: string) => (typeof q[name] === 'string' && q[name] !== '' ? (q[name] as string) : undefined);

/** Effective presence of each of the human's active endpoints that is out, for "held until". */
export async function outEndpoints(endpoints: Pick<EndpointService, 'listOwn'>, humanId: string, now: Date): Promise<Map<string, EffectivePresence>> {
  const out = new Map<string, EffectivePresence>();
  for (const e of await endpoints.listOwn(humanId)) {
    if (e.state !== 'active') continue;
    const eff = effective(inputsOf(e), now);
    if (eff.presence === 'out') out.set(e.id, eff);
  }
  return out;
}

/**
 * The todo list across the human's endpoints, filtered by endpoint, state and queue (a queue
 * belongs to one endpoint: its links always name both), and one todo's page.
 */
export function registerTodoRoutes(board: FastifyInstance, deps: TodoRouteDeps): void {
  board.get('/todos', async (req, reply) => {
    const s = humanOf(req);
    const q = req.query as Record<string, unknown>;
    const stateRaw = queryText(q, 'state');
    const queueRaw = queryText(q, 'queue');
    const endpointRaw = queryText(q, 'endpoint');
    if (stateRaw !== undefined && !(TODO_STATES as readonly string[]).includes(stateRaw)) {
      throw invalidArgument('state', `must be one of ${TODO_STATES.join(', ')}`);
    }
    const state = stateRaw as TodoState | undefined;
    const queue = queueRaw === undefined ? undefined : validateQueueName('queue', queueRaw);
    // Another human's endpoint answers like a missing one: 404.
    const endpoint: Endpoint | undefined = endpointRaw === undefined ? undefined : await deps.endpoints.requireOwn(s.human.id, endpointRaw);
    const range = rangeOf(q);
    const [rows, counts, held, history] = await Promise.all([
      deps.reads.todos(s.human.id, { endpointId: endpoint?.id, state, queue, limit: TODOS_PAGE_LIMIT }),
      deps.reads.todoCounts(s.human.id),
      outEndpoints(deps.endpoints, s.human.id, deps.clock.now()),
      todoHistory(deps, s.human.id, { endpointId: endpoint?.id, queue }, range),
    ]);
    const inEndpoint = (c: { endpoint_id: string }) => !endpoint || c.endpoint_id === endpoint.id;
    const stateCounts: Record<string, number> = {};
    const endpointCounts = new Map<string, { id: string; slug: string; n: number }>();
    const queueCounts = new Map<string, { endpoint_id: string; endpoint_slug: string; queue: string; n: number }>();
    for (const c of counts) {
      if (inEndpoint(c) && (!queue || c.queue === queue)) stateCounts[c.state] = (stateCounts[c.state] ?? 0) + c.n;
      if (state && c.state !== state) continue;
      const ep = endpointCounts.get(c.endpoint_id) ?? { id: c.endpoint_id, slug: c.endpoint_slug, n: 0 };
      endpointCounts.set(c.endpoint_id, { ...ep, n: ep.n + c.n });
      if (!inEndpoint(c)) continue;
      const key = `${c.endpoint_id}\n${c.queue}`;
      const qc = queueCounts.get(key) ?? { endpoint_id: c.endpoint_id, endpoint_slug: c.endpoint_slug, queue: c.queue, n: 0 };
      queueCounts.set(key, { ...qc, n: qc.n + c.n });
    }
    const view: TodoListView = {
      rows: rows.map((t) => ({ ...t, held: t.state === 'pending' ? (held.get(t.endpoint_id) ?? null) : null })),
      endpoint: endpoint ? { id: endpoint.id, slug: endpoint.slug } : undefined,
      state,
      queue,
      stateCounts,
      endpointCounts: [...endpointCounts.values()].sort((a, b) => (a.slug < b.slug ? -1 : 1)),
      queueCounts: [...queueCounts.values()].sort((a, b) => (a.endpoint_slug === b.endpoint_slug ? (a.queue < b.queue ? -1 : 1) : a.endpoint_slug < b.endpoint_slug ? -1 : 1)),
      limit: TODOS_PAGE_LIMIT,
      history,
    };
    const live = new URLSearchParams();
    if (endpoint) live.set('endpoint', endpoint.id);
    if (state) live.set('state', state);
    if (queue) live.set('queue', queue);
    if (q.range !== undefined) live.set('range', range);
    return sendPage(reply, 200, todosPage(s, view, deps.clock.now(), live.size ? `/todos?${live}` : '/todos'));
  });

  const { renderTodo } = todoRenderer(deps);
  board.get('/todos/:id', async (req, reply) => {
    const existing = (req.query as Record<string, unknown>).existing === '1';
    return renderTodo(reply, humanOf(req), idParam(req), 200, { existing });
  });
}

/** One todo's page, read afresh; another human's todo, or none by that id, is a 404. */
export function todoRenderer(deps: TodoRouteDeps) {
  async function renderTodo(reply: FastifyReply, s: BoardSession, todoId: string, status: number, opts: TodoPageOptions = {}) {
    const t = await deps.reads.todo(s.human.id, todoId);
    if (!t) return sendPage(reply, 404, notFoundPage(s));
    const held = t.state === 'pending' ? ((await outEndpoints(deps.endpoints, s.human.id, deps.clock.now())).get(t.endpoint_id) ?? null) : null;
    return sendPage(reply, status, todoPage(s, t, held, deps.clock.now(), opts));
  }
  return { renderTodo };
}

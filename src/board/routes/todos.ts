import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalidArgument } from '../../domain/errors.ts';
import { effective, type EffectivePresence } from '../../domain/presence/index.ts';
import { validateQueueName } from '../../domain/scope.ts';
import type { Clock } from '../../lib/clock.ts';
import type { BoardReads } from '../../services/board-reads.ts';
import type { EndpointService } from '../../services/endpoints.ts';
import { inputsOf } from '../../services/presence.ts';
import { TODO_STATES, type TodoState } from '../../services/todos.ts';
import type { BoardSession } from '../auth.ts';
import { notFoundPage, sendPage } from '../error-page.ts';
import { todoPage, todosPage, type TodoListView } from '../views/todos.ts';

export interface TodoRouteDeps {
  clock: Clock;
  endpoints: Pick<EndpointService, 'listOwn'>;
  reads: Pick<BoardReads, 'todos' | 'todoCounts' | 'todo'>;
}

const TODOS_PAGE_LIMIT = 100;
const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;
const idParam = (req: FastifyRequest) => (req.params as { id: string }).id;

/** The todo list across the human's endpoints (filtered by state and queue) and one todo's page. */
export function registerTodoRoutes(board: FastifyInstance, deps: TodoRouteDeps): void {
  /** Effective presence of each of the human's active endpoints, for "held until". */
  async function heldBy(humanId: string): Promise<Map<string, EffectivePresence>> {
    const out = new Map<string, EffectivePresence>();
    for (const e of await deps.endpoints.listOwn(humanId)) {
      if (e.state !== 'active') continue;
      const eff = effective(inputsOf(e), deps.clock.now());
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
    return sendPage(reply, 200, todosPage(s, view, deps.clock.now(), live.size ? `/todos?${live}` : '/todos'));
  });

  board.get('/todos/:id', async (req, reply) => {
    const s = humanOf(req);
    const t = await deps.reads.todo(s.human.id, idParam(req));
    if (!t) return sendPage(reply, 404, notFoundPage(s));
    const held = t.state === 'pending' ? ((await heldBy(s.human.id)).get(t.endpoint_id) ?? null) : null;
    return sendPage(reply, 200, todoPage(s, t, held, deps.clock.now()));
  });
}

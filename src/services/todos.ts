import { notFound } from '../domain/errors.ts';
import { decodeCursor, encodeCursor } from '../domain/todo-cursor.ts';
import {
  idempotencyKey,
  resolvePushQueue,
  todoDelayMs,
  todoKind,
  todoMaxAttempts,
  todoPayload,
  todoPriority,
  todoTitle,
} from '../domain/todo-input.ts';
import {
  TODO_STATES,
  TODO_STATE_FILTERS,
  DeliveryBatches,
  cancelTodo,
  detailTodo,
  getTodo,
  insertFanOut,
  isDead,
  listTodos,
  queueStatsUnscoped,
  retryTodo,
  summarizeTodo,
  type EventInput,
  type FanOutTodo,
  type FannedOut,
  type ListFilter,
  type NewTodo,
  type TodoDetail,
  type TodoMetaRow,
  type TodoRow,
  type TodoState,
  type TodoStateFilter,
  type TodoSummary,
} from '../store/todos/index.ts';
import type { QueueStat } from '../lib/metrics.ts';
import type { ServiceBase } from './base.ts';
import { requireActive, type Endpoint } from './endpoints.ts';
import type { ClaimableTodo, TodoEvents } from './todo-events.ts';

export {
  TODO_STATES,
  TODO_STATE_FILTERS,
  detailTodo,
  isDead,
  summarizeTodo,
  type TodoDetail,
  type TodoRow,
  type TodoState,
  type TodoStateFilter,
  type TodoSummary,
};

export interface Pushed {
  todo: TodoRow;
  /** False when the key matched a live todo: nothing was written and that todo is returned. */
  created: boolean;
  eventId: string | null;
}

/** What an operator gives for a push (already type-checked by the surface). */
export interface OperatorPush {
  title: string;
  queue?: string;
  kind?: string;
  payload?: unknown;
  key?: string;
  /** Not claimable, nor rung, until this long after the push: a duration like `10m` (at most 30 days). */
  delay?: string;
  /** Higher is claimed first: -1000..1000, default 0. */
  priority?: number;
  /** Claims before it is a dead letter: 1..100, default 5. */
  maxAttempts?: number;
}

/** A listing's filter: a state (or `dead`), a queue, a page size and the cursor of the page wanted. */
export type TodoListFilter = Omit<ListFilter, 'includeSynthetic' | 'after'> & { cursor?: string };

/** Who pushed, as the event's verify detail records it. */
export interface PushAuthor {
  id: string;
  handle: string;
  display_name: string | null;
  email: string | null;
}

/** Pending counts and oldest ages per queue across all tenants, for the metrics gauges. */
export const queueStats = (base: ServiceBase): Promise<QueueStat[]> => queueStatsUnscoped(base.sql, base.clock.now());

/** What a TodoService tells, after commit. */
export interface TodoServiceOptions {
  /** Who hears of todos that became claimable (TodoEvents). */
  events?: Pick<TodoEvents, 'becameClaimable'>;
  /**
   * This instance's id in the session directory. With it, a push broadcasts todo_ready only while
   * another instance is registered (insertEventAndTodo); without it, always.
   */
  instanceId?: string;
}

const describeAuthor = (h: PushAuthor) => `${h.display_name ?? h.email ?? h.handle} (${h.id})`;

/**
 * Producing todos. Every producer (an operator over /api/v1, a webhook delivery) goes through
 * `push`: the event and its todo in one statement (pushes to one endpoint that wait go together,
 * DeliveryBatches), then, after commit, TodoEvents for a new todo.
 */
export class TodoService {
  readonly #base: ServiceBase;
  readonly #events: Pick<TodoEvents, 'becameClaimable'> | undefined;
  readonly #deliveries: DeliveryBatches;

  constructor(base: ServiceBase, opts: TodoServiceOptions = {}) {
    this.#base = base;
    this.#events = opts.events;
    this.#deliveries = new DeliveryBatches(base.sql, () => opts.instanceId ?? null, base.lanes);
  }

  async push(event: EventInput, todo: NewTodo, now: Date = this.#base.clock.now()): Promise<Pushed> {
    const { todo: row, created, eventId, pushEligible } = await this.#deliveries.insert({ event, todo, now });
    // The statement broadcast todo_ready at commit for a push-eligible todo (insertDeliveries).
    if (created) this.#events?.becameClaimable([claimable(row, pushEligible)], 'created', 'sent');
    return { todo: row, created, eventId };
  }

  /**
   * A routing rule's fan-out: the event on the owner's endpoint and one todo per target endpoint of
   * the owner's human, in one transaction (store/todos/fan-out.ts); each new todo is announced like
   * a push's (its todo_ready went out at commit).
   */
  async pushFanOut(event: EventInput, owner: { endpointId: string; humanId: string }, targets: readonly FanOutTodo[], now: Date = this.#base.clock.now()): Promise<FannedOut> {
    const out = await insertFanOut(this.#base.sql, event, owner, targets, now);
    const made = out.todos.filter((t) => t.created && t.todo !== null).map((t) => claimable(t.todo!, t.pushEligible));
    this.#events?.becameClaimable(made, 'created', 'sent');
    return out;
  }

  /** An operator's push to one of their endpoints: the endpoint must be active, the input valid. */
  async pushByOperator(author: PushAuthor, endpoint: Endpoint, input: OperatorPush): Promise<Pushed> {
    requireActive(endpoint);
    const title = todoTitle(input.title);
    const queue = resolvePushQueue(endpoint, input.queue);
    const key = idempotencyKey(input.key);
    const priority = todoPriority(input.priority);
    const maxAttempts = todoMaxAttempts(input.maxAttempts);
    const delayMs = todoDelayMs(input.delay);
    const now = this.#base.clock.now();
    const runAt = delayMs > 0 ? new Date(now.getTime() + delayMs) : null;
    return this.push(
      {
        source: 'operator',
        family: 'operator',
        trustMode: 'operator',
        verified: true,
        verifyDetail: `operator-authored over /api/v1 by ${describeAuthor(author)}`,
        externalId: key,
      },
      {
        endpointId: endpoint.id,
        queue,
        title,
        source: 'operator',
        kind: todoKind(input.kind),
        payload: todoPayload(input.payload),
        idempotencyKey: key,
        priority,
        maxAttempts,
        runAt,
      },
      now,
    );
  }

  /**
   * A page of one endpoint's todos, newest first (self-test rows and the reserved queue never
   * show), and the cursor of the next page (null at the end). Keyset paging: todos pushed while
   * paging never shift a page. A cursor this server did not write is invalid_argument `cursor`.
   */
  async list(endpointId: string, filter: TodoListFilter): Promise<{ todos: TodoMetaRow[]; nextCursor: string | null }> {
    const { cursor, ...rest } = filter;
    const after = cursor === undefined ? null : decodeCursor(cursor);
    const { rows, next } = await listTodos(this.#base.sql, endpointId, { ...rest, after });
    return { todos: rows, nextCursor: next ? encodeCursor(next) : null };
  }

  /** One todo of the endpoint (with payload and result); not_found for another endpoint's or a self-test todo. */
  async get(endpointId: string, todoId: string): Promise<TodoRow> {
    const row = await getTodo(this.#base.sql, endpointId, todoId);
    if (!row) throw notFound(`no todo ${todoId} on this endpoint`);
    return row;
  }

  /**
   * Cancels a pending, claimed or failed todo (canceled is final). A claimed todo's lease is
   * fenced off: its holder's heartbeat, complete, fail and release then get a conflict. Done or
   * already canceled: conflict naming the state.
   */
  cancel(endpointId: string, todoId: string, by: PushAuthor): Promise<TodoRow> {
    return cancelTodo(this.#base.sql, endpointId, todoId, { id: by.id, handle: by.handle, detail: `canceled by ${describeAuthor(by)}` }, this.#base.clock.now());
  }

  /**
   * A failed todo (a dead letter or one waiting for its retry) back to pending now, attempts from
   * 0; it rings again like a new push. Any other state: conflict naming it.
   */
  async retry(endpointId: string, todoId: string): Promise<TodoRow> {
    const { todo, pushEligible } = await retryTodo(this.#base.sql, endpointId, todoId, this.#base.clock.now());
    this.#events?.becameClaimable([claimable(todo, pushEligible)], 'requeued', 'sent');
    return todo;
  }
}

const claimable = (todo: TodoRow, pushEligible: boolean): ClaimableTodo => (pushEligible ? { pushEligible: true, todo } : { pushEligible: false, todo });

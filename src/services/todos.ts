import { idempotencyKey, resolvePushQueue, todoKind, todoPayload, todoTitle } from '../domain/todo-input.ts';
import {
  TODO_STATES,
  insertEventAndTodo,
  listTodos,
  queueStatsUnscoped,
  summarizeTodo,
  type EventInput,
  type ListFilter,
  type NewTodo,
  type TodoRow,
  type TodoState,
  type TodoSummary,
} from '../store/todos/index.ts';
import type { QueueStat } from '../lib/metrics.ts';
import type { ServiceBase } from './base.ts';
import { requireActive, type Endpoint } from './endpoints.ts';
import type { ReadyRings } from './doorbell/ready-rings.ts';
import type { NotifyHooks } from './notify-hooks.ts';

export { TODO_STATES, summarizeTodo, type TodoRow, type TodoState, type TodoSummary };

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
}

/** Who pushed, as the event's verify detail records it. */
export interface PushAuthor {
  id: string;
  handle: string;
  display_name: string | null;
  email: string | null;
}

/** Pending counts and oldest ages per queue across all tenants, for the metrics gauges. */
export const queueStats = (base: ServiceBase): Promise<QueueStat[]> => queueStatsUnscoped(base.sql, base.clock.now());

/** Who hears, after commit, of a new push-eligible todo made on this instance. */
export interface TodoFanOut {
  doorbell?: Pick<ReadyRings, 'ringReady'>;
  hooks?: Pick<NotifyHooks, 'announceTodo'>;
  /** Anything else that wants to know (tests). */
  onTodoReady?: (todo: TodoRow) => void;
}

const describeAuthor = (h: PushAuthor) => `${h.display_name ?? h.email ?? h.handle} (${h.id})`;

/**
 * Producing todos. Every producer (an operator over /api/v1, a webhook delivery) goes through
 * `push`: the event and its todo in one transaction, then, after commit, the fan-out for a new
 * push-eligible todo (this instance's doorbell and notify hooks).
 */
export class TodoService {
  readonly #base: ServiceBase;
  readonly #fanOut: TodoFanOut;

  constructor(base: ServiceBase, fanOut: TodoFanOut = {}) {
    this.#base = base;
    this.#fanOut = fanOut;
  }

  async push(event: EventInput, todo: NewTodo, now: Date = this.#base.clock.now()): Promise<Pushed> {
    const { todo: row, created, eventId, pushEligible } = await insertEventAndTodo(this.#base.sql, event, todo, now);
    if (created && pushEligible) {
      this.#fanOut.doorbell?.ringReady(row);
      this.#fanOut.hooks?.announceTodo(row, 'created');
      this.#fanOut.onTodoReady?.(row);
    }
    return { todo: row, created, eventId };
  }

  /** An operator's push to one of their endpoints: the endpoint must be active, the input valid. */
  async pushByOperator(author: PushAuthor, endpoint: Endpoint, input: OperatorPush): Promise<Pushed> {
    requireActive(endpoint);
    const title = todoTitle(input.title);
    const queue = resolvePushQueue(endpoint, input.queue);
    const key = idempotencyKey(input.key);
    return this.push(
      {
        source: 'operator',
        family: 'operator',
        trustMode: 'operator',
        verified: true,
        verifyDetail: `operator-authored over /api/v1 by ${describeAuthor(author)}`,
        externalId: key,
      },
      { endpointId: endpoint.id, queue, title, source: 'operator', kind: todoKind(input.kind), payload: todoPayload(input.payload), idempotencyKey: key },
    );
  }

  /** Newest first, one endpoint; self-test rows and the reserved queue never show. */
  list(endpointId: string, filter: Omit<ListFilter, 'includeSynthetic'>): Promise<TodoRow[]> {
    return listTodos(this.#base.sql, endpointId, filter);
  }
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidArgument, isSwitchboardError, notFound } from '../../domain/errors.ts';
import type { Logger } from '../../lib/log.ts';
import type { Endpoint, EndpointService } from '../../services/endpoints.ts';
import type { OperatorPush, TodoService } from '../../services/todos.ts';
import type { BoardSession } from '../auth.ts';
import { field, fieldErrorOf, formOf, isInvalid, type Form } from '../form.ts';
import { path, withQuery } from '../html.ts';
import type { PushForm } from '../views/push.ts';
import type { TodoPageOptions } from '../views/todos.ts';
import type { BoardReads } from '../../services/board-reads.ts';
import type { EndpointPageOptions } from './endpoints.ts';

export interface TodoActionDeps {
  log: Logger;
  endpoints: Pick<EndpointService, 'requireOwnActive'>;
  todos: Pick<TodoService, 'pushByOperator' | 'cancel' | 'retry'>;
  reads: Pick<BoardReads, 'todo'>;
  renderEndpoint: (reply: FastifyReply, s: BoardSession, e: Endpoint, status: number, opts: EndpointPageOptions) => Promise<FastifyReply>;
  /** The todo's page again, with a refusal (a conflict) above its buttons. */
  renderTodo: (reply: FastifyReply, s: BoardSession, todoId: string, status: number, opts: TodoPageOptions) => Promise<FastifyReply>;
}

const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;

/** A form field as given, or undefined when left blank (a blank optional field is not sent). */
const given = (form: Form, name: string): string | undefined => {
  const v = field(form, name);
  return v === undefined || v.trim() === '' ? undefined : v;
};

/**
 * A number field as the API's JSON number: decimal text becomes that number (the service then
 * says what range it must be in); anything else is NaN, which the service refuses the same way.
 */
const numberOf = (text: string | undefined): number | undefined =>
  text === undefined ? undefined : /^\s*-?\d+(\.\d+)?\s*$/.test(text) ? Number(text) : Number.NaN;

/** The push form's text as the API's JSON body would carry it; each problem names its field as the API does. */
export function pushInput(f: PushForm): OperatorPush {
  let payload: unknown;
  if (f.payload !== undefined && f.payload.trim() !== '') {
    try {
      payload = JSON.parse(f.payload);
    } catch (err) {
      throw invalidArgument('payload', `must be JSON (${(err as Error).message})`);
    }
  }
  return {
    title: f.title ?? '',
    queue: f.queue,
    kind: f.kind,
    payload,
    key: f.key,
    delay: f.delay?.trim(),
    priority: numberOf(f.priority),
    maxAttempts: numberOf(f.max_attempts),
  };
}

/** Where a todo action goes back to: the todo's page, or a todo list the form names (only a /todos URL). */
const LIST_RETURN = /^\/todos(\?[A-Za-z0-9_.~%=&-]*)?$/;

/**
 * Pushing a todo from the endpoint page, and cancelling or retrying one: the same service calls as
 * POST /api/v1/endpoints/{ref}/todos and .../todos/{id}/cancel|retry, so the same rules and the
 * same errors (bad input under its field; a state conflict on the todo's page, 409).
 */
export function registerTodoActionRoutes(board: FastifyInstance, deps: TodoActionDeps): void {
  board.post('/endpoints/:id/todos', async (req, reply) => {
    const s = humanOf(req);
    const e = await deps.endpoints.requireOwnActive(s.human.id, (req.params as { id: string }).id);
    const form = formOf(req);
    const sent: PushForm = {
      title: field(form, 'title') ?? '',
      queue: given(form, 'queue'),
      kind: given(form, 'kind'),
      payload: field(form, 'payload'),
      key: given(form, 'key'),
      delay: given(form, 'delay'),
      priority: given(form, 'priority'),
      max_attempts: given(form, 'max_attempts'),
    };
    try {
      const { todo, created } = await deps.todos.pushByOperator(s.human, e, pushInput(sent));
      deps.log.info({ slug: e.slug, todo_id: todo.id, created, human_id: s.human.id }, 'todo pushed on the board');
      return reply.redirect(created ? path('/todos', todo.id) : withQuery(path('/todos', todo.id), { existing: '1' }), 303);
    } catch (err) {
      if (!isInvalid(err)) throw err;
      return deps.renderEndpoint(reply, s, e, 400, { forms: { push: { ...sent, error: fieldErrorOf(err) } } });
    }
  });

  for (const action of ['cancel', 'retry'] as const) {
    board.post(`/todos/:id/${action}`, async (req, reply) => {
      const s = humanOf(req);
      // Another human's todo answers like a missing one.
      const t = await deps.reads.todo(s.human.id, (req.params as { id: string }).id);
      if (!t) throw notFound('no todo by that id belongs to you');
      try {
        const row = action === 'cancel' ? await deps.todos.cancel(t.endpoint_id, t.id, s.human) : await deps.todos.retry(t.endpoint_id, t.id);
        deps.log.info({ slug: t.endpoint_slug, todo_id: t.id, state: row.state, human_id: s.human.id }, `todo ${action === 'cancel' ? 'canceled' : 'retried'} on the board`);
      } catch (err) {
        if (!isSwitchboardError(err) || err.code !== 'conflict') throw err;
        return deps.renderTodo(reply, s, t.id, 409, { refused: err.message });
      }
      const back = field(formOf(req), 'return');
      return reply.redirect(back !== undefined && LIST_RETURN.test(back) ? back : path('/todos', t.id), 303);
    });
  }
}

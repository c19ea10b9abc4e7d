import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidArgument } from '../../domain/errors.ts';
import type { Logger } from '../../lib/log.ts';
import type { Endpoint, EndpointService } from '../../services/endpoints.ts';
import type { OperatorPush, TodoService } from '../../services/todos.ts';
import type { BoardSession } from '../auth.ts';
import { field, fieldErrorOf, formOf, isInvalid, type Form } from '../form.ts';
import { path, withQuery } from '../html.ts';
import type { PushForm } from '../views/push.ts';
import type { EndpointPageOptions } from './endpoints.ts';

export interface TodoActionDeps {
  log: Logger;
  endpoints: Pick<EndpointService, 'requireOwnActive'>;
  todos: Pick<TodoService, 'pushByOperator'>;
  renderEndpoint: (reply: FastifyReply, s: BoardSession, e: Endpoint, status: number, opts: EndpointPageOptions) => Promise<FastifyReply>;
}

const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;

/** A form field as given, or undefined when left blank (a blank optional field is not sent). */
const given = (form: Form, name: string): string | undefined => {
  const v = field(form, name);
  return v === undefined || v.trim() === '' ? undefined : v;
};

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
  return { title: f.title ?? '', queue: f.queue, kind: f.kind, payload, key: f.key };
}

/**
 * Pushing a todo from the endpoint page: the same service call as POST /api/v1/endpoints/{ref}/todos,
 * so the same rules and the same errors, shown under the field that caused them.
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
}

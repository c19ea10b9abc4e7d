import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { doc } from './openapi.ts';
import { invalidArgument } from '../domain/errors.ts';
import { TODO_ID_PATTERN } from '../domain/ids.ts';
import { LIST_DEFAULT_LIMIT } from '../domain/lifecycle.ts';
import { validateQueueName } from '../domain/scope.ts';
import { kindProblem } from '../domain/todo-input.ts';
import { limitParam, parseInput } from '../domain/validate.ts';
import type { EndpointService } from '../services/endpoints.ts';
import type { PushAuthor } from '../services/todos.ts';
import { TODO_STATE_FILTERS, detailTodo, summarizeTodo, type TodoService, type TodoStateFilter } from '../services/todos.ts';
import { pushResultSchema, todoDetailSchema, todoListSchema, type PushResult, type TodoDetail, type TodoList } from './wire.ts';

// /api/v1/endpoints/{ref}/todos: push, list (paged), and one todo: show, cancel, retry. The
// endpoint is resolved as the caller's own first, so another human's endpoint is a 404.

const pushBody = z
  .object({
    title: z.string({ error: 'is required and must be a string' }),
    queue: z.string({ error: 'must be a string' }).optional(),
    kind: z
      .string({ error: 'must be a string' })
      .superRefine((kind, ctx) => {
        const problem = kindProblem(kind);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .optional(),
    payload: z.json({ error: 'must be JSON' }).optional(),
    key: z.string({ error: 'must be a string' }).optional(),
    delay: z.string({ error: 'must be a duration string like 10m' }).optional(),
    priority: z.number({ error: 'must be a whole number' }).optional(),
    max_attempts: z.number({ error: 'must be a whole number' }).optional(),
  })
  .strict();

const listQuery = z
  .object({
    state: z.enum(TODO_STATE_FILTERS as [string, ...string[]], { error: `must be one of ${TODO_STATE_FILTERS.join(', ')}` }).optional(),
    queue: z.string().optional(),
    limit: limitParam,
    cursor: z.string().optional(),
  })
  .strict();

/** cancel and retry take no options: an empty body, or none. */
const noBody = z.object({}).strict();

export function registerTodoRoutes(
  api: FastifyInstance,
  deps: { endpoints: EndpointService; todos: TodoService; human: (req: FastifyRequest) => PushAuthor },
): void {
  const { endpoints, todos, human } = deps;
  const params = (req: FastifyRequest) => req.params as { ref: string; id?: string };
  const own = (req: FastifyRequest) => endpoints.requireOwn(human(req).id, params(req).ref);
  /** The `{id}` of the path: a todo id, or 400 naming `id`. */
  const todoId = (req: FastifyRequest): string => {
    const id = params(req).id ?? '';
    if (!TODO_ID_PATTERN.test(id)) throw invalidArgument('id', 'must be a todo id like td_<uuid>');
    return id;
  };

  api.post('/endpoints/:ref/todos', doc({ tag: 'todos', summary: 'Push a todo onto one of the endpoint\'s queues (a repeated key returns the live todo)', body: pushBody, ok: { status: 201, alsoStatus: 200, description: 'The todo created (201), or the live one holding the key (200)' }, response: pushResultSchema, errors: [409] }), async (req, reply: FastifyReply) => {
    const h = human(req);
    const endpoint = await own(req);
    const { max_attempts: maxAttempts, ...body } = parseInput(pushBody, req.body ?? {});
    const { todo, created, eventId } = await todos.pushByOperator(h, endpoint, { ...body, maxAttempts });
    return reply.code(created ? 201 : 200).send({
      id: todo.id,
      endpoint_id: endpoint.id,
      slug: endpoint.slug,
      queue: todo.queue,
      state: todo.state,
      created,
      event_id: eventId === null ? null : Number(eventId),
    } satisfies PushResult);
  });

  api.get('/endpoints/:ref/todos', doc({ tag: 'todos', summary: 'List the endpoint\'s todos, newest first, a page at a time', query: listQuery, ok: { status: 200, description: '{todos, next_cursor}' }, response: todoListSchema }), async (req): Promise<TodoList> => {
    const endpoint = await own(req);
    const q = parseInput(listQuery, req.query ?? {}, 'query');
    if (q.queue !== undefined) validateQueueName('queue', q.queue);
    const page = await todos.list(endpoint.id, {
      queue: q.queue,
      state: q.state as TodoStateFilter | undefined,
      limit: q.limit ?? LIST_DEFAULT_LIMIT,
      cursor: q.cursor,
    });
    return { todos: page.todos.map(summarizeTodo), next_cursor: page.nextCursor };
  });

  api.get('/endpoints/:ref/todos/:id', doc({ tag: 'todos', summary: 'One todo in full: payload, attempts, result, last error', ok: { status: 200, description: 'The todo' }, response: todoDetailSchema }), async (req): Promise<TodoDetail> => {
    const endpoint = await own(req);
    return detailTodo(await todos.get(endpoint.id, todoId(req)));
  });

  api.post('/endpoints/:ref/todos/:id/cancel', doc({ tag: 'todos', summary: 'Cancel a pending, delayed or failed todo', body: noBody, ok: { status: 200, description: 'The canceled todo' }, response: todoDetailSchema, errors: [409] }), async (req): Promise<TodoDetail> => {
    const endpoint = await own(req);
    const id = todoId(req);
    parseInput(noBody, req.body ?? {});
    return detailTodo(await todos.cancel(endpoint.id, id, human(req)));
  });

  api.post('/endpoints/:ref/todos/:id/retry', doc({ tag: 'todos', summary: 'Put a dead-lettered todo back on its queue with fresh attempts', body: noBody, ok: { status: 200, description: 'The re-queued todo' }, response: todoDetailSchema, errors: [409] }), async (req): Promise<TodoDetail> => {
    const endpoint = await own(req);
    const id = todoId(req);
    parseInput(noBody, req.body ?? {});
    return detailTodo(await todos.retry(endpoint.id, id));
  });
}

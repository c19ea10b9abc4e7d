import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { forbidden, notFound } from '../domain/errors.ts';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, leaseSeconds } from '../domain/lifecycle.ts';
import { rfc3339 } from '../domain/time.ts';
import {
  TODO_STATES,
  claimNextTodo,
  claimTodo,
  completeTodo,
  failTodo,
  fullTodo,
  getTodo,
  heartbeatTodo,
  listTodos,
  releaseTodo,
  summarizeTodo,
  type Caller,
  type TodoRow,
  type TodoState,
} from '../store/todos/index.ts';
import { defineTool, type Tool, type ToolContext } from './tools.ts';

/** The drain verbs: how an agent takes work off its queues and finishes it. */

const callerOf = (ctx: ToolContext): Caller => ({
  endpointId: ctx.session.endpoint.id,
  owner: `agent:${ctx.session.endpoint.agentId}`,
  queues: ctx.session.endpoint.queues,
  sessionId: ctx.session.id,
});

const todoId = z.string({ error: 'is required: a todo id (td_...)' }).regex(/^td_[0-9a-f-]{36}$/, 'must be a todo id like td_<uuid>');
const leaseTtl = z
  .number({ error: 'must be a number of seconds' })
  .int('must be a whole number of seconds')
  .optional()
  .describe('lease length in seconds; absent or <= 0 means the default (300); capped at 86400');
const leaseToken = z.string({ error: 'must be a string' }).max(128).optional().describe('the lease_token of a fenced claim');
const anyJson = z.json({ error: 'must be JSON' }).optional();

function grantedQueue(ctx: ToolContext, queue: string | undefined): readonly string[] {
  if (queue === undefined) return ctx.session.endpoint.queues;
  if (!ctx.session.endpoint.queues.includes(queue)) throw forbidden(`queue "${queue}" is not granted to this endpoint`);
  return [queue];
}

const hashToken = (t: string | undefined): string | null => (t === undefined ? null : createHash('sha256').update(t).digest('hex'));

/** A fresh fence: the token goes to the claimer once, only its hash is stored. */
function mintFence(required: boolean | undefined): { token?: string; hash: string | null } {
  if (!required) return { hash: null };
  const token = randomBytes(16).toString('base64url');
  return { token, hash: hashToken(token) };
}

function withFailureFields(t: TodoRow) {
  return {
    ...summarizeTodo(t),
    next_retry_at: rfc3339(t.next_retry_at) ?? null,
    dead_letter: t.state === 'failed' && t.next_retry_at === null,
  };
}

const LEASE_ADVICE =
  'The claim holds a lease (default 300 s; pass lease_ttl_seconds to size it, max 86400). Heartbeat before it runs out; ' +
  'end every claim with complete, fail or release. A conflict means you no longer hold the todo: stop working on it.';

export const drainTools: Tool[] = [
  defineTool({
    name: 'list_todos',
    description: 'List todos on your queues, newest first, without payloads. Optional: queue, state, limit (1-200, default 50).',
    input: z
      .object({
        include_synthetic: z.boolean({ error: 'must be true or false' }).optional().describe('also list self-test todos'),
        queue: z.string({ error: 'must be a string' }).optional(),
        state: z.enum(TODO_STATES as [TodoState, ...TodoState[]], { error: `must be one of ${TODO_STATES.join(', ')}` }).optional(),
        limit: z.number({ error: 'must be a number' }).int('must be a whole number').min(1, `must be 1-${LIST_MAX_LIMIT}`).max(LIST_MAX_LIMIT, `must be 1-${LIST_MAX_LIMIT}`).optional(),
      })
      .strict(),
    async run(ctx, args) {
      const rows = await listTodos(ctx.sql, ctx.session.endpoint.id, {
        queues: grantedQueue(ctx, args.queue),
        state: args.state,
        limit: args.limit ?? LIST_DEFAULT_LIMIT,
        includeSynthetic: args.include_synthetic === true,
      });
      return { todos: rows.map(summarizeTodo) };
    },
  }),
  defineTool({
    name: 'get_todo',
    description: 'Show one todo with its payload, result and retry state.',
    input: z.object({ id: todoId }).strict(),
    async run(ctx, args) {
      const row = await getTodo(ctx.sql, ctx.session.endpoint.id, args.id);
      if (!row || !ctx.session.endpoint.queues.includes(row.queue)) throw notFound(`no todo ${args.id} on this endpoint`);
      return { ...withFailureFields(row), payload: row.payload, result: row.result ?? null };
    },
  }),
  defineTool({
    name: 'claim',
    description: `Claim one todo by id (for example the todo_id of a doorbell). Returns the todo with its payload. ${LEASE_ADVICE} With require_fence: true you get a lease_token that heartbeat/complete/fail/release must then pass (use it when several workers share this endpoint).`,
    input: z.object({ id: todoId, lease_ttl_seconds: leaseTtl, require_fence: z.boolean({ error: 'must be true or false' }).optional() }).strict(),
    async run(ctx, args) {
      const fence = mintFence(args.require_fence);
      const row = await claimTodo(ctx.sql, callerOf(ctx), args.id, leaseSeconds(args.lease_ttl_seconds), ctx.clock.now(), fence.hash);
      ctx.acks.acknowledged(ctx.session, row.acked_rings, 'claim');
      if (row.synthetic) {
        return { ...fullTodo(row), self_test: true, note: 'This was a Switchboard self-test todo: your claim completed it. No other action is needed.' };
      }
      return fence.token ? { ...fullTodo(row), lease_token: fence.token } : fullTodo(row);
    },
  }),
  defineTool({
    name: 'claim_next',
    description: `Claim the oldest claimable todo on your queues (or one queue). Answers {"empty": true} when there is none. ${LEASE_ADVICE} Drain after every doorbell: call claim_next until it answers empty.`,
    input: z
      .object({
        queue: z.string({ error: 'must be a string' }).optional(),
        lease_ttl_seconds: leaseTtl,
        require_fence: z.boolean({ error: 'must be true or false' }).optional(),
      })
      .strict(),
    async run(ctx, args) {
      const queues = grantedQueue(ctx, args.queue);
      const fence = mintFence(args.require_fence);
      const row = await claimNextTodo(ctx.sql, callerOf(ctx), queues, leaseSeconds(args.lease_ttl_seconds), ctx.clock.now(), fence.hash);
      if (!row) return { empty: true };
      ctx.acks.acknowledged(ctx.session, row.acked_rings, 'claim');
      return fence.token ? { empty: false, todo: fullTodo(row), lease_token: fence.token } : { empty: false, todo: fullTodo(row) };
    },
  }),
  defineTool({
    name: 'heartbeat',
    description: 'Extend the lease on a todo you hold: the lease restarts from now (lease_ttl_seconds, or the default 300 s).',
    input: z.object({ id: todoId, lease_ttl_seconds: leaseTtl, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      const row = await heartbeatTodo(ctx.sql, callerOf(ctx), args.id, leaseSeconds(args.lease_ttl_seconds), ctx.clock.now(), hashToken(args.lease_token));
      return summarizeTodo(row);
    },
  }),
  defineTool({
    name: 'complete',
    description: 'Finish a todo you hold, with an optional JSON result.',
    input: z.object({ id: todoId, result: anyJson, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return summarizeTodo(await completeTodo(ctx.sql, callerOf(ctx), args.id, args.result, ctx.clock.now(), hashToken(args.lease_token)));
    },
  }),
  defineTool({
    name: 'fail',
    description: 'Give up on a todo you hold for now, with an optional JSON result. It is retried after a backoff (30 s doubling to 15 min) until its attempts are spent; then it is a dead letter.',
    input: z.object({ id: todoId, result: anyJson, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return withFailureFields(await failTodo(ctx.sql, callerOf(ctx), args.id, args.result, ctx.clock.now(), hashToken(args.lease_token)));
    },
  }),
  defineTool({
    name: 'release',
    description: 'Hand a todo you hold back to the queue untouched (the attempt stays counted).',
    input: z.object({ id: todoId, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return summarizeTodo(await releaseTodo(ctx.sql, callerOf(ctx), args.id, ctx.clock.now(), hashToken(args.lease_token)));
    },
  }),
];

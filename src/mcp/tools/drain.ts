import { z } from 'zod';
import { LIST_MAX_LIMIT } from '../../domain/lifecycle.ts';
import { TODO_STATES, type TodoState } from '../../services/todos.ts';
import type { Worker } from '../../services/todo-work.ts';
import { defineTool, verbNotGranted, type Tool, type ToolContext } from './tool.ts';
import { TODO_ID_PATTERN } from '../../domain/ids.ts';

/** The drain verbs: how an agent takes work off its queues and finishes it. */

const workerOf = (ctx: ToolContext): Worker => ({
  endpointId: ctx.session.endpoint.id,
  agentId: ctx.session.endpoint.agentId,
  queues: ctx.session.endpoint.queues,
  sessionId: ctx.session.id,
});

const todoId = z.string({ error: 'is required: a todo id (td_...)' }).regex(TODO_ID_PATTERN, 'must be a todo id like td_<uuid>');
const leaseTtl = z
  .number({ error: 'must be a number of seconds' })
  .int('must be a whole number of seconds')
  .optional()
  .describe('lease length in seconds; absent or <= 0 means the default (300); capped at 86400');
const leaseToken = z.string({ error: 'must be a string' }).max(128).optional().describe('the lease_token of a fenced claim');
const anyJson = z.json({ error: 'must be JSON' }).optional();

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
      return ctx.todoWork.list(workerOf(ctx), { queue: args.queue, state: args.state, limit: args.limit, includeSynthetic: args.include_synthetic });
    },
  }),
  defineTool({
    name: 'get_todo',
    description: 'Show one todo with its payload, result and retry state.',
    input: z.object({ id: todoId }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.get(workerOf(ctx), args.id);
    },
  }),
  defineTool({
    name: 'claim',
    description: `Claim one todo by id (for example the todo_id of a doorbell). Returns the todo with its payload. ${LEASE_ADVICE} With require_fence: true you get a lease_token that heartbeat/complete/fail/release must then pass (use it when several workers share this endpoint).`,
    input: z.object({ id: todoId, lease_ttl_seconds: leaseTtl, require_fence: z.boolean({ error: 'must be true or false' }).optional() }).strict(),
    async run(ctx, args) {
      const claimed = await ctx.todoWork.claim(workerOf(ctx), args.id, { leaseTtlSeconds: args.lease_ttl_seconds, requireFence: args.require_fence });
      await ctx.acks.acknowledged(ctx.session, claimed.ackedRings, 'claim');
      return claimed.view;
    },
    async runUngranted(ctx, args) {
      const claimed = await ctx.todoWork.claimOwnTest(workerOf(ctx), args.id);
      if (!claimed) throw verbNotGranted('claim');
      await ctx.acks.acknowledged(ctx.session, claimed.ackedRings, 'claim');
      return claimed.view;
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
      const claimed = await ctx.todoWork.claimNext(workerOf(ctx), args.queue, { leaseTtlSeconds: args.lease_ttl_seconds, requireFence: args.require_fence });
      if (claimed.ackedRings) await ctx.acks.acknowledged(ctx.session, claimed.ackedRings, 'claim');
      return claimed.view;
    },
    async runUngranted(ctx, args) {
      const claimed = await ctx.todoWork.claimOwnTest(workerOf(ctx), null, args.queue);
      if (!claimed) throw verbNotGranted('claim_next');
      await ctx.acks.acknowledged(ctx.session, claimed.ackedRings, 'claim');
      return claimed.view;
    },
  }),
  defineTool({
    name: 'heartbeat',
    description: 'Extend the lease on a todo you hold: the lease restarts from now (lease_ttl_seconds, or the default 300 s).',
    input: z.object({ id: todoId, lease_ttl_seconds: leaseTtl, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.heartbeat(workerOf(ctx), args.id, args.lease_ttl_seconds, args.lease_token);
    },
  }),
  defineTool({
    name: 'complete',
    description: 'Finish a todo you hold, with an optional JSON result.',
    input: z.object({ id: todoId, result: anyJson, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.complete(workerOf(ctx), args.id, args.result, args.lease_token);
    },
  }),
  defineTool({
    name: 'fail',
    description: 'Give up on a todo you hold for now, with an optional JSON result. It is retried after a backoff (30 s doubling to 15 min) until its attempts are spent; then it is a dead letter.',
    input: z.object({ id: todoId, result: anyJson, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.fail(workerOf(ctx), args.id, args.result, args.lease_token);
    },
  }),
  defineTool({
    name: 'release',
    description: 'Hand a todo you hold back to the queue untouched (the attempt stays counted).',
    input: z.object({ id: todoId, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.release(workerOf(ctx), args.id, args.lease_token);
    },
  }),
];

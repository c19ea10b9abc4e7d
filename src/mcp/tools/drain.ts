import { z } from 'zod';
import { LIST_MAX_LIMIT } from '../../domain/lifecycle.ts';
import { TODO_STATE_FILTERS, type TodoStateFilter } from '../../services/todos.ts';
import type { Finish, Worker } from '../../services/todo-work.ts';
import { defineTool, verbNotGranted, type Tool, type ToolContext } from './tool.ts';
import { classifyAndLog } from '../../web/errors.ts';
import { TODO_ID_PATTERN } from '../../domain/ids.ts';
import { MAX_LEASE_SECONDS } from '../../domain/lifecycle.ts';
import { LONG_POLL_MAX_SECONDS } from '../../services/claim-waiters.ts';
import { parseDuration } from '../../domain/duration.ts';

/** The drain verbs: how an agent takes work off its queues and finishes it. */

const workerOf = (ctx: ToolContext): Worker => ({
  endpointId: ctx.session.endpoint.id,
  slug: ctx.session.endpoint.slug,
  agentId: ctx.session.endpoint.agentId,
  queues: ctx.session.endpoint.queues,
  session: ctx.session,
});

const todoId = z.string({ error: 'is required: a todo id (td_...)' }).regex(TODO_ID_PATTERN, 'must be a todo id like td_<uuid>');
/** The largest lease_ttl_seconds accepted; anything over MAX_LEASE_SECONDS is clamped to it (SPEC-0003). */
const LEASE_ARG_MAX = 365 * 86_400;
const leaseTtl = z
  .number({ error: 'must be a number of seconds' })
  .int('must be a whole number of seconds')
  .min(0, `must be 0-${LEASE_ARG_MAX} seconds`)
  .max(LEASE_ARG_MAX, `must be 0-${LEASE_ARG_MAX} seconds`)
  .optional()
  .describe(`lease length in seconds; absent or 0 means the default (300); over ${MAX_LEASE_SECONDS} is clamped to ${MAX_LEASE_SECONDS}`);
const leaseToken = z.string({ error: 'must be a string' }).max(128).optional().describe('the lease_token of a fenced claim');
const anyJson = z.json({ error: 'must be JSON' }).optional();
const queueArg = z.string({ error: 'must be a string' }).min(1, 'must be a queue name').max(63, 'must be a queue name of at most 63 characters');

const WAIT_ERROR = `must be a duration like "30s" or "1m", or a number of seconds, from 0 to ${LONG_POLL_MAX_SECONDS} s`;
/** claim_next's `wait`: a duration string or a number of seconds, 0-60 s; parsed to milliseconds. */
const waitArg = z
  .union([
    z.number({ error: WAIT_ERROR }).min(0, WAIT_ERROR).max(LONG_POLL_MAX_SECONDS, WAIT_ERROR),
    z.string({ error: WAIT_ERROR }).max(16, WAIT_ERROR).refine((t) => {
      const ms = parseDuration(t);
      return ms !== null && ms <= LONG_POLL_MAX_SECONDS * 1000;
    }, WAIT_ERROR),
  ], { error: WAIT_ERROR })
  .optional()
  .describe(
    `long poll: when nothing is claimable, wait up to this long for a todo to become ready (a duration such as "30s" or "1m", or a number of seconds; 0-${LONG_POLL_MAX_SECONDS} s; default 0, answer at once)`,
  );
const waitMs = (w: string | number | undefined): number => (w === undefined ? 0 : typeof w === 'number' ? Math.round(w * 1000) : (parseDuration(w) ?? 0));

const LEASE_ADVICE =
  'The claim holds a lease (default 300 s; pass lease_ttl_seconds to size it, max 86400). Heartbeat before it runs out; ' +
  'end every claim with complete, fail or release. A conflict means you no longer hold the todo: stop working on it.';
/** How an agent takes work: one at a time, never a batch of leases that run out while it works the first. */
const ONE_AT_A_TIME =
  'Work one todo at a time: claim ONE, do the work, complete it (or fail or release it), then claim the next. ' +
  'Do not claim several to work later: each claim holds its own 300 s lease, which runs out while you work the others.';

const claimNextInput = z
  .object({
    queue: queueArg.optional(),
    lease_ttl_seconds: leaseTtl,
    require_fence: z.boolean({ error: 'must be true or false' }).optional(),
    wait: waitArg,
  })
  .strict();
type ClaimNextArgs = z.infer<typeof claimNextInput>;

/** claim_next's claim: the verb, and `next` on complete and fail. */
async function claimNextFor(ctx: ToolContext, args: ClaimNextArgs) {
  return ctx.todoWork.claimNext(
    workerOf(ctx),
    args.queue,
    { leaseTtlSeconds: args.lease_ttl_seconds, requireFence: args.require_fence },
    // Only a wait reads the call's signal: reading it makes one.
    args.wait ? { waitMs: waitMs(args.wait), signal: ctx.signal, onWaiting: () => ctx.keepAlive() } : undefined,
  );
}

/**
 * `next` on complete and fail: once the todo is finished, claim the next one in the same call, as
 * claim_next would with these arguments (true: none). An agent draining a backlog then spends one
 * call per todo instead of two. Not on release: the todo handed back would be the one it claims.
 */
const nextArg = z
  .union([z.boolean(), claimNextInput], { error: 'must be true, false, or an object of claim_next arguments (queue, lease_ttl_seconds, require_fence, wait)' })
  .optional()
  .describe(
    'then claim the next todo in the same call: true, or an object of claim_next arguments (queue, lease_ttl_seconds, require_fence, wait); the answer carries claim_next\'s answer as next. Needs claim_next to be granted',
  );

/**
 * complete or fail and, with `next`, the claim after it: both in one statement when a todo is
 * claimable at once, else the finish and then claim_next's own path (which may wait).
 */
async function finishThenClaim(ctx: ToolContext, what: Finish, args: { id: string; result?: unknown; lease_token?: string; next?: boolean | ClaimNextArgs }) {
  const claimArgs = args.next === true ? {} : args.next || undefined;
  if (!claimArgs) return ctx.todoWork[what](workerOf(ctx), args.id, args.result, args.lease_token);
  // Refused before the todo is finished, so a refusal changes nothing.
  if (!ctx.grantedVerbs.includes('claim_next')) throw verbNotGranted('claim_next', ctx.grantedVerbs);
  const lease = { leaseTtlSeconds: claimArgs.lease_ttl_seconds, requireFence: claimArgs.require_fence };
  const { finished, next } = await ctx.todoWork.finishThenClaimNext(workerOf(ctx), what, args.id, args.result, args.lease_token, claimArgs.queue, lease);
  try {
    return { ...finished, next: (await next) ?? (await claimNextFor(ctx, claimArgs)) };
  } catch (err) {
    // The todo is finished whatever the claim did: say so, and why nothing was claimed.
    const failed = classifyAndLog(err, ctx.log, { tool: 'claim_next', slug: ctx.session.endpoint.slug }, 'next claim failed', () => null);
    return { ...finished, next: { error: { code: failed.code, message: failed.message } } };
  }
}

const NEXT_ADVICE =
  'With next: true (or claim_next\'s arguments) it then claims your next todo in the same call and answers with it as next ({"empty": true} when there is none): ' +
  'one call per todo when draining a backlog. A refused finish claims nothing.';

const READS = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

export const drainTools: Tool[] = [
  defineTool({
    name: 'list_todos',
    annotations: { title: 'List todos', ...READS },
    description:
      'List todos on your queues, newest first, without payloads. Optional: queue, state (pending, claimed, done, failed, canceled, or dead: failed with no retry left), limit (1-200, default 50), cursor (the next_cursor of the previous page; null there means the last page).',
    input: z
      .object({
        include_synthetic: z.boolean({ error: 'must be true or false' }).optional().describe('also list self-test todos'),
        queue: queueArg.optional(),
        state: z.enum(TODO_STATE_FILTERS as [TodoStateFilter, ...TodoStateFilter[]], { error: `must be one of ${TODO_STATE_FILTERS.join(', ')}` }).optional(),
        limit: z.number({ error: 'must be a number' }).int('must be a whole number').min(1, `must be 1-${LIST_MAX_LIMIT}`).max(LIST_MAX_LIMIT, `must be 1-${LIST_MAX_LIMIT}`).optional(),
        cursor: z.string({ error: 'must be a string' }).max(100, 'is not a cursor this server gave').optional().describe('next_cursor from the previous page'),
      })
      .strict(),
    async run(ctx, args) {
      return ctx.todoWork.list(workerOf(ctx), {
        queue: args.queue,
        state: args.state,
        limit: args.limit,
        includeSynthetic: args.include_synthetic,
        cursor: args.cursor,
      });
    },
  }),
  defineTool({
    name: 'get_todo',
    annotations: { title: 'Get a todo', ...READS },
    description: 'Show one todo with its payload, result and retry state.',
    input: z.object({ id: todoId }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.get(workerOf(ctx), args.id);
    },
  }),
  defineTool({
    name: 'claim',
    annotations: { title: 'Claim a todo', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    description: `Claim one todo by id (for example the todo_id of a doorbell). Returns the todo with its payload. ${LEASE_ADVICE} ${ONE_AT_A_TIME} With require_fence: true you get a lease_token that heartbeat/complete/fail/release must then pass (use it when several workers share this endpoint).`,
    input: z.object({ id: todoId, lease_ttl_seconds: leaseTtl, require_fence: z.boolean({ error: 'must be true or false' }).optional() }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.claim(workerOf(ctx), args.id, { leaseTtlSeconds: args.lease_ttl_seconds, requireFence: args.require_fence });
    },
    ungrantedDescription:
      'Claim your own self-test todo by id: the todo_id of the self-test doorbell test_doorbell rings. This endpoint is not granted claim, so no other todo can be claimed with it.',
    async runUngranted(ctx, args) {
      const claimed = await ctx.todoWork.claimOwnTest(workerOf(ctx), args.id);
      if (!claimed) throw verbNotGranted('claim', ctx.grantedVerbs);
      return claimed;
    },
  }),
  defineTool({
    name: 'claim_next',
    annotations: { title: 'Claim the next todo', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    description:
      `Claim the oldest claimable todo on your queues (or one queue). Answers {"empty": true} when there is none. ${LEASE_ADVICE} ${ONE_AT_A_TIME} ` +
      `After a doorbell or a digest: claim one, finish it, then call claim_next again, until it answers empty. ` +
      `With wait (e.g. "30s", at most ${LONG_POLL_MAX_SECONDS} s) an empty queue is waited on: the call returns as soon as a todo is claimable, or {"empty": true} when the wait ends; ` +
      `at most 8 such waits per endpoint at once.`,
    input: claimNextInput,
    async run(ctx, args) {
      return claimNextFor(ctx, args);
    },
  }),
  defineTool({
    name: 'heartbeat',
    annotations: { title: 'Extend a lease', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description: 'Extend the lease on a todo you hold: the lease restarts from now (lease_ttl_seconds, or the default 300 s).',
    input: z.object({ id: todoId, lease_ttl_seconds: leaseTtl, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.heartbeat(workerOf(ctx), args.id, args.lease_ttl_seconds, args.lease_token);
    },
  }),
  defineTool({
    name: 'complete',
    annotations: { title: 'Complete a todo', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    description: `Finish a todo you hold, with an optional JSON result. ${NEXT_ADVICE}`,
    input: z.object({ id: todoId, result: anyJson, lease_token: leaseToken, next: nextArg }).strict(),
    async run(ctx, args) {
      return finishThenClaim(ctx, 'complete', args);
    },
  }),
  defineTool({
    name: 'fail',
    annotations: { title: 'Fail a todo', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    description: 'Give up on a todo you hold for now, with an optional JSON result. It is retried after a backoff (30 s doubling to 15 min) until its attempts are spent; then it is a dead letter. ' + NEXT_ADVICE,
    input: z.object({ id: todoId, result: anyJson, lease_token: leaseToken, next: nextArg }).strict(),
    async run(ctx, args) {
      return finishThenClaim(ctx, 'fail', args);
    },
  }),
  defineTool({
    name: 'release',
    annotations: { title: 'Release a todo', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    description: 'Hand a todo you hold back to the queue untouched (the attempt stays counted).',
    input: z.object({ id: todoId, lease_token: leaseToken }).strict(),
    async run(ctx, args) {
      return ctx.todoWork.release(workerOf(ctx), args.id, args.lease_token);
    },
  }),
];

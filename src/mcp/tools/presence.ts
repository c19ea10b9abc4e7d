import { z } from 'zod';
import { defineTool, type Tool } from './tool.ts';

/**
 * Self verbs: every session of an active endpoint has them, whatever its scope, and they are never
 * stored in one. They act only on the caller's own endpoint and take no identifier of any kind:
 * their schemas are strict, so an `endpoint`, `queue` or `id` argument is refused.
 */

export const presenceTools: Tool[] = [
  defineTool({
    name: 'clock_in',
    annotations: { title: 'Clock in', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description:
      'Start taking doorbells again. Outside your shift this keeps you in for `for` (a duration like "30m", "2h" or "1h30m"; default 1h, at most 8h) or until your shift starts, whichever is first; inside it, it just undoes a clock_out. Repeating it while that is running changes nothing. Your human\'s clock-out is theirs to end: over it this is refused with failed_precondition (list_todos and claim_next still work). Returns your presence.',
    input: z.object({ for: z.string({ error: 'must be a duration like "30m", "2h" or "1h30m"' }).max(32, 'must be a duration like "30m", "2h" or "1h30m"').optional() }).strict(),
    async run(ctx, args) {
      return ctx.agentPresence.clockIn(ctx.session.endpoint.id, args.for);
    },
  }),
  defineTool({
    name: 'clock_out',
    annotations: { title: 'Clock out', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description:
      'Stop taking doorbells: new work is held (you can still pull it with list_todos and claim_next) until you clock_in, your human changes it, or your shift next starts or ends. Returns your presence.',
    input: z.object({}).strict(),
    async run(ctx) {
      return ctx.agentPresence.clockOut(ctx.session.endpoint.id);
    },
  }),
  defineTool({
    name: 'presence',
    annotations: { title: 'Presence', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description: 'Your presence: in or out, what decides it (shift, agent, operator, default), until when, your shift, and how many todos are pending.',
    input: z.object({}).strict(),
    async run(ctx) {
      return ctx.agentPresence.view(ctx.session.endpoint.id);
    },
  }),
];

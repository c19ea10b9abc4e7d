import { z } from 'zod';
import { SwitchboardError } from '../../domain/errors.ts';
import { parseClockInDuration, planClockIn, planClockOut } from '../../domain/presence/index.ts';
import { defineTool, type Tool, type ToolContext } from './tool.ts';

/**
 * Self verbs: every session of an active endpoint has them, whatever its scope, and they are never
 * stored in one. They act only on the caller's own endpoint and take no identifier of any kind:
 * their schemas are strict, so an `endpoint`, `queue` or `id` argument is refused.
 */

const presenceOf = async (ctx: ToolContext) => ctx.presence.view(ctx.session.endpoint.id);

async function apply(ctx: ToolContext, plan: Parameters<ToolContext['presence']['setOverride']>[1]): Promise<void> {
  if (!(await ctx.presence.setOverride(ctx.session.endpoint.id, plan, 'agent'))) {
    throw new SwitchboardError('forbidden', 'this endpoint is no longer active');
  }
}

async function currentInputs(ctx: ToolContext) {
  const inputs = await ctx.presence.inputs(ctx.session.endpoint.id);
  if (!inputs) throw new SwitchboardError('forbidden', 'this endpoint is no longer active');
  return inputs;
}

const sameOverride = (a: { override: unknown; overrideUntil: Date | null; overrideSetAt: Date | null; overrideBy: unknown }, b: typeof a) =>
  a.override === b.override &&
  a.overrideBy === b.overrideBy &&
  a.overrideUntil?.getTime() === b.overrideUntil?.getTime() &&
  a.overrideSetAt?.getTime() === b.overrideSetAt?.getTime();

export const presenceTools: Tool[] = [
  defineTool({
    name: 'clock_in',
    description:
      'Start taking doorbells again. Outside your shift this keeps you in for `for` (a duration like "30m", "2h" or "1h30m"; default 1h, at most 8h) or until your shift starts, whichever is first; inside it, it just undoes a clock_out. Returns your presence.',
    input: z.object({ for: z.string({ error: 'must be a duration like "30m", "2h" or "1h30m"' }).optional() }).strict(),
    async run(ctx, args) {
      const forMs = parseClockInDuration(args.for);
      const inputs = await currentInputs(ctx);
      const plan = planClockIn(inputs, ctx.clock.now(), forMs);
      const current = { override: inputs.override, overrideUntil: inputs.overrideUntil, overrideSetAt: inputs.overrideSetAt, overrideBy: inputs.overrideBy };
      if (!sameOverride(plan, current)) await apply(ctx, plan);
      return presenceOf(ctx);
    },
  }),
  defineTool({
    name: 'clock_out',
    description:
      'Stop taking doorbells: new work is held (you can still pull it with list_todos and claim_next) until you clock_in, your human changes it, or your shift next starts or ends. Returns your presence.',
    input: z.object({}).strict(),
    async run(ctx) {
      const inputs = await currentInputs(ctx);
      const plan = planClockOut(inputs, ctx.clock.now());
      const current = { override: inputs.override, overrideUntil: inputs.overrideUntil, overrideSetAt: inputs.overrideSetAt, overrideBy: inputs.overrideBy };
      if (!sameOverride(plan, current)) await apply(ctx, plan);
      return presenceOf(ctx);
    },
  }),
  defineTool({
    name: 'presence',
    description: 'Your presence: in or out, what decides it (shift, agent, operator, default), until when, your shift, and how many todos are pending.',
    input: z.object({}).strict(),
    async run(ctx) {
      return presenceOf(ctx);
    },
  }),
];

import { z } from 'zod';
import { AGENT } from '../../domain/actor.ts';
import { defineTool, type Tool, type ToolContext } from './tool.ts';

/**
 * Notify-hook verbs (granted per verb, never by default: they make outbound HTTP calls). An
 * agent manages its own endpoint's hooks; the secret is shown once, at create and rotate.
 */
const owner = (ctx: ToolContext) => ({ id: ctx.session.endpoint.id, slug: ctx.session.endpoint.slug, queues: ctx.session.endpoint.queues });
const hookId = z.string({ error: 'is required: a hook id' }).uuid('must be a hook id');

export const hookTools: Tool[] = [
  defineTool({
    name: 'create_notify_hook',
    annotations: { title: 'Create a notify hook', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    description:
      'Register an https URL that is called (Standard Webhooks signed) when work is ready on this endpoint, for consumers with no live session such as claude -p runs or CI. queues narrows it; ignore_presence fires even while clocked out. Returns signing_secret once.',
    input: z
      .object({
        url: z.string({ error: 'is required: an https URL' }).max(2048, 'must be a URL of at most 2048 characters'),
        queues: z
          .array(z.string({ error: 'must be a list of queue names' }).max(63, 'must be queue names of at most 63 characters'), { error: 'must be a list of queue names' })
          .max(32, 'must be at most 32 queue names')
          .optional(),
        ignore_presence: z.boolean({ error: 'must be true or false' }).optional(),
      })
      .strict(),
    async run(ctx, args) {
      return ctx.hooks.create(owner(ctx), args, AGENT);
    },
  }),
  defineTool({
    name: 'list_notify_hooks',
    annotations: { title: 'List notify hooks', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description: "This endpoint's notify hooks with their health (never their secrets), and the ceiling.",
    input: z.object({}).strict(),
    async run(ctx) {
      return ctx.hooks.list(ctx.session.endpoint.id);
    },
  }),
  defineTool({
    name: 'rotate_notify_hook',
    annotations: { title: 'Rotate a notify hook secret', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    description: 'Mint a new signing secret (the old one still signs for 24 hours) and re-enable the hook.',
    input: z.object({ hook_id: hookId }).strict(),
    async run(ctx, args) {
      return ctx.hooks.rotate(await ctx.hooks.endpointHook(ctx.session.endpoint.id, args.hook_id), AGENT);
    },
  }),
  defineTool({
    name: 'delete_notify_hook',
    annotations: { title: 'Delete a notify hook', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    description: 'Delete one of this endpoint\'s notify hooks.',
    input: z.object({ hook_id: hookId }).strict(),
    async run(ctx, args) {
      return ctx.hooks.delete(await ctx.hooks.endpointHook(ctx.session.endpoint.id, args.hook_id), AGENT);
    },
  }),
];

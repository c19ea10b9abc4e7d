import { z } from 'zod';
import { AGENT } from '../../domain/actor.ts';
import { defineTool, type Tool, type ToolContext } from './tool.ts';

/**
 * Webhook verbs (granted per endpoint, never by default): an agent manages its own endpoint's
 * webhooks within the ceiling it was vended with. Secrets and ingest URLs are shown only when
 * minted.
 */
const owner = (ctx: ToolContext) => ({ id: ctx.session.endpoint.id, slug: ctx.session.endpoint.slug, queues: ctx.session.endpoint.queues });
const webhookId = z.string({ error: 'is required: a webhook id' }).uuid('must be a webhook id');

export const webhookTools: Tool[] = [
  defineTool({
    name: 'create_webhook',
    annotations: { title: 'Create a webhook', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    description:
      'Create a webhook on this endpoint: source_type github or gitea (signed; you get a signing_secret once) or generic (the URL is the credential), delivering into target_queue (one of your queues). Returns ingest_url once: store it.',
    input: z
      .object({
        source_type: z.enum(['github', 'gitea', 'generic'], { error: 'must be github, gitea or generic' }),
        target_queue: z.string({ error: 'must be a string' }).max(63, 'must be a queue name of at most 63 characters').optional(),
      })
      .strict(),
    async run(ctx, args) {
      return ctx.webhooks.create(owner(ctx), args, AGENT, ctx.session.endpoint.webhookMax);
    },
  }),
  defineTool({
    name: 'list_webhooks',
    annotations: { title: 'List webhooks', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description: "This endpoint's webhooks (never their secrets or full URLs) and the ceiling.",
    input: z.object({}).strict(),
    async run(ctx) {
      const webhooks = await ctx.webhooks.list(ctx.session.endpoint.id);
      return { webhooks, ceiling: { max: ctx.session.endpoint.webhookMax, used: webhooks.length, queues: ctx.session.endpoint.queues } };
    },
  }),
  defineTool({
    name: 'rotate_webhook',
    annotations: { title: 'Rotate a webhook', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    description: 'Mint a new ingest URL and (signed webhooks) a new secret; the old ones stop working at once.',
    input: z.object({ webhook_id: webhookId }).strict(),
    async run(ctx, args) {
      return ctx.webhooks.rotate(await ctx.webhooks.endpointWebhook(ctx.session.endpoint.id, args.webhook_id), AGENT);
    },
  }),
  defineTool({
    name: 'delete_webhook',
    annotations: { title: 'Delete a webhook', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    description: 'Delete one of this endpoint\'s webhooks; its URL stops working.',
    input: z.object({ webhook_id: webhookId }).strict(),
    async run(ctx, args) {
      return ctx.webhooks.delete(await ctx.webhooks.endpointWebhook(ctx.session.endpoint.id, args.webhook_id), AGENT);
    },
  }),
];

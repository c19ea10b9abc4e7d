import { z } from 'zod';
import { AGENT } from '../../domain/actor.ts';
import { MAX_EXPRESSION_BYTES, MAX_RULES } from '../../domain/routing/rules.ts';
import { defineTool, type Tool, type ToolContext } from './tool.ts';

/**
 * Webhook verbs (granted per endpoint, never by default): an agent manages its own endpoint's
 * webhooks within the ceiling it was vended with. Secrets and ingest URLs are shown only when
 * minted.
 */
const owner = (ctx: ToolContext) => ({ id: ctx.session.endpoint.id, slug: ctx.session.endpoint.slug, queues: ctx.session.endpoint.queues });
const webhookId = z.string({ error: 'is required: a webhook id' }).uuid('must be a webhook id');

/** The endpoint's own webhook (another endpoint's answers like a missing one). */
const ownWebhook = (ctx: ToolContext, id: string) => ctx.webhooks.endpointWebhook(ctx.session.endpoint.id, id);

// A rules write as the API takes it (PUT .../webhooks/{id}/rules). Only sizes are bounded here, so
// tools/list can say them; the shape, the expressions and the queues are checked by the same
// service as the API's, naming the same fields (rules.1.when). No humanId: an agent may not fan out.
const ACTION_HELP =
  '{"queue": Q} (one of your queues; add "once": true for one live todo per issue or pull request) or {"drop": true}. Fan-out ("endpoints") is for the endpoint\'s human only: refused (forbidden)';
const action = z.record(z.string(), z.unknown(), { error: 'must be an object' });
const rulesWrite = {
  webhook_id: webhookId,
  rules: z
    .array(
      z.object({
        name: z.string({ error: 'is required and must be a string' }).max(64, 'must be 1-64 characters').describe('Unique among the rules'),
        when: z.string({ error: 'is required and must be an expression' }).max(MAX_EXPRESSION_BYTES, `must be at most ${MAX_EXPRESSION_BYTES} bytes`).describe('A CEL expression over the delivery (event, action, repository, sender, number, labels, requested_reviewers, payload, params, ...): true or false'),
        action: action.describe(ACTION_HELP),
      }).strict(),
      { error: 'must be a list of rules' },
    )
    .max(MAX_RULES, `at most ${MAX_RULES} rules`)
    .nullable()
    .optional()
    .describe('In order: the first rule whose `when` is true decides. Omitted: kept; null: no rules'),
  params: z.record(z.string(), z.unknown(), { error: 'must be an object' }).nullable().optional().describe('Values the expressions read as params (at most 16 KiB of JSON). Omitted: kept; null: cleared'),
  default_action: action.nullable().optional().describe(`For a delivery no rule matched: ${ACTION_HELP}. Omitted: kept; null: a todo in the webhook's target queue`),
};
const rulesInput = ({ webhook_id: _id, ...write }: { webhook_id: string } & Record<string, unknown>) => write;

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
  defineTool({
    name: 'get_webhook_rules',
    annotations: { title: 'Get webhook routing rules', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description:
      "One of this endpoint's webhooks' routing rules: rules (in order, the first whose `when` is true decides), params, default_action (null: a todo in target_queue) and target_queue. Granted by itself (get_webhook_rules), like the other webhook verbs.",
    input: z.object({ webhook_id: webhookId }).strict(),
    async run(ctx, args) {
      return ctx.webhookRouting.view(await ownWebhook(ctx, args.webhook_id));
    },
  }),
  defineTool({
    name: 'set_webhook_rules',
    annotations: { title: 'Set webhook routing rules', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    description:
      "Save routing rules on one of this endpoint's webhooks (omitted fields kept, null clears) and answer them with dry_run: the 50 latest events replayed, what each would become beside what it became. " +
      'Queues must be your own (else forbidden); fan-out to other endpoints is forbidden to an agent, so a webhook whose rules fan out can be changed only by its human. ' +
      'A problem names its field (rules.1.when) and saves nothing: call test_webhook_rules first. Granted by itself (set_webhook_rules).',
    input: z.object(rulesWrite).strict(),
    async run(ctx, args) {
      return ctx.webhookRouting.set(owner(ctx), await ownWebhook(ctx, args.webhook_id), rulesInput(args), AGENT);
    },
  }),
  defineTool({
    name: 'test_webhook_rules',
    annotations: { title: 'Test webhook routing rules', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description:
      'The same check and dry run as set_webhook_rules (the same arguments, over the rules as they would be after the write), saving nothing. Granted by itself (test_webhook_rules).',
    input: z.object(rulesWrite).strict(),
    async run(ctx, args) {
      return ctx.webhookRouting.test(owner(ctx), await ownWebhook(ctx, args.webhook_id), rulesInput(args), AGENT);
    },
  }),
];

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { doc } from './openapi.ts';
import { WEBHOOKS_PER_ENDPOINT_MAX, type Webhooks } from '../services/webhooks.ts';
import { ownerOf, requireActive, type Endpoint, type EndpointService } from '../services/endpoints.ts';
import type { WebhookRouting } from '../services/webhook-routing.ts';
import { operatorActor } from '../domain/actor.ts';
import { LIST_DEFAULT_LIMIT } from '../domain/lifecycle.ts';
import { rfc3339 } from '../domain/time.ts';
import { limitParam, parseInput } from '../domain/validate.ts';
import { webhookRulesSchema, type WebhookRules } from './wire.ts';
import { eventListSchema, mintedWebhookViewSchema, webhookDeletedSchema, webhookListSchema, type EventList, type MintedWebhookView, type WebhookDeleted, type WebhookList } from './wire.ts';

const createBody = z
  .object({
    source_type: z.string({ error: 'is required: github, gitea or generic' }),
    target_queue: z.string({ error: 'must be a string' }).optional(),
  })
  .strict();

const eventsQuery = z
  .object({
    endpoint: z.string({ error: 'is required: an endpoint slug or id' }),
    limit: limitParam,
  })
  .strict();

/** Webhooks and delivery history for the owning human (same guard and limits as all of /api/v1). */
/** The body of a rules write or test, as documented (parseRoutingUpdate is the rule). */
const rulesBody = z
  .object({
    rules: z.array(z.object({ name: z.string(), when: z.string().describe('A CEL expression over the envelope, true or false'), action: z.record(z.string(), z.unknown()) })).nullable().optional(),
    params: z.record(z.string(), z.unknown()).nullable().optional(),
    default_action: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .strict();

export function registerWebhookRoutes(api: FastifyInstance, deps: { endpoints: EndpointService; webhooks: Webhooks; webhookRouting: WebhookRouting }): void {
  const { endpoints, webhooks, webhookRouting: routing } = deps;
  const refOf = (req: FastifyRequest) => (req.params as { ref: string }).ref;
  const own = (req: FastifyRequest) => endpoints.requireOwn(req.human!.id, refOf(req));
  const active = (req: FastifyRequest) => endpoints.requireOwnActive(req.human!.id, refOf(req));
  const ownWebhook = (req: FastifyRequest) => webhooks.ownWebhook(req.human!.id, (req.params as { id: string }).id);

  api.get('/endpoints/:ref/webhooks', doc({ tag: 'webhooks', summary: 'The endpoint\'s webhooks (no secrets)', ok: { status: 200, description: '{webhooks}' }, response: webhookListSchema }), async (req): Promise<WebhookList> => {
    const e = await own(req);
    return { webhooks: await webhooks.list(e.id) };
  });

  api.post('/endpoints/:ref/webhooks', doc({ tag: 'webhooks', summary: 'Create a webhook: an ingest URL and, for github and gitea, a signing secret (shown once)', body: createBody, ok: { status: 201, description: 'The webhook with `ingest_url` and `signing_secret`' }, response: mintedWebhookViewSchema, errors: [409] }), async (req, reply) => {
    const e = await active(req);
    const body = parseInput(createBody, req.body ?? {});
    const created = await webhooks.create(ownerOf(e), body, operatorActor(req.human!.id), WEBHOOKS_PER_ENDPOINT_MAX);
    return reply.code(201).send(created satisfies MintedWebhookView);
  });

  api.post('/webhooks/:id/rotate', doc({ tag: 'webhooks', summary: 'Rotate a webhook\'s URL and secret; the old ones stop working', ok: { status: 200, description: 'The webhook with its new URL and secret' }, response: mintedWebhookViewSchema }), async (req): Promise<MintedWebhookView> => webhooks.rotate(await ownWebhook(req), operatorActor(req.human!.id)));

  api.delete('/webhooks/:id', doc({ tag: 'webhooks', summary: 'Delete a webhook', ok: { status: 200, description: '{webhook_id, deleted: true}' }, response: webhookDeletedSchema }), async (req): Promise<WebhookDeleted> => webhooks.delete(await ownWebhook(req), operatorActor(req.human!.id)));

  api.get('/events', doc({ tag: 'webhooks', summary: 'Recent webhook deliveries to an endpoint, newest first', query: eventsQuery, ok: { status: 200, description: '{events}' }, response: eventListSchema }), async (req): Promise<EventList> => {
    const q = parseInput(eventsQuery, req.query ?? {}, 'query');
    const e = await endpoints.requireOwn(req.human!.id, q.endpoint);
    const rows = await webhooks.events(e.id, q.limit ?? LIST_DEFAULT_LIMIT);
    return {
      events: rows.map((r) => ({
        ...r,
        received_at: rfc3339(r.received_at),
        // Events from before routing kept no disposition: a todo means routed, none a ping's record.
        disposition: (r.disposition ?? (r.todo_id ? 'routed' : 'recorded')) as EventList['events'][number]['disposition'],
        routing: (r.routing ?? null) as EventList['events'][number]['routing'],
      })),
    };
  });

  // Routing rules: read, write (a write is also a dry run over the 50 latest events), and test.
  const rulesOf = async (req: FastifyRequest) => {
    const e = await own(req);
    return { e, row: await webhooks.endpointWebhook(e.id, (req.params as { id: string }).id) };
  };
  const routingOwner = (e: Endpoint) => ({ id: e.id, slug: e.slug, queues: e.scope_queues, humanId: e.owner_human_id });
  const rulesDoc = (summary: string, body: boolean) =>
    doc({ tag: 'webhooks', summary, ...(body ? { body: rulesBody } : {}), ok: { status: 200, description: 'The rules, params and default action' + (body ? ', and `dry_run`' : '') }, response: webhookRulesSchema, errors: [404] });

  api.get('/endpoints/:ref/webhooks/:id/rules', rulesDoc("A webhook's routing rules", false), async (req): Promise<WebhookRules> => routing.view((await rulesOf(req)).row));

  api.put('/endpoints/:ref/webhooks/:id/rules', rulesDoc('Set routing rules (omitted fields kept, null clears); answers a dry run over the 50 latest events', true), async (req): Promise<WebhookRules> => {
    const { e, row } = await rulesOf(req);
    requireActive(e);
    return routing.set(routingOwner(e), row, req.body ?? {}, operatorActor(req.human!.id)) as Promise<WebhookRules>;
  });

  api.post('/endpoints/:ref/webhooks/:id/rules/test', rulesDoc('Check routing rules and replay them over the 50 latest events, saving nothing', true), async (req): Promise<WebhookRules> => {
    const { e, row } = await rulesOf(req);
    return routing.test(routingOwner(e), row, req.body ?? {}, operatorActor(req.human!.id)) as Promise<WebhookRules>;
  });
}

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Sql } from '../db/connect.ts';
import type { Webhooks } from '../services/webhooks.ts';
import { LIST_DEFAULT_LIMIT } from '../domain/lifecycle.ts';
import { endpointRevoked, resolveOwnEndpoint, type Endpoint } from '../store/endpoints.ts';
import { rfc3339 } from '../domain/time.ts';
import { WEBHOOKS_PER_ENDPOINT_MAX, getOwnWebhook, listEndpointEvents } from '../store/webhooks.ts';
import { limitParam, parseInput } from '../domain/validate.ts';

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
export function registerWebhookRoutes(api: FastifyInstance, deps: { sql: Sql; webhooks: Webhooks }): void {
  const { sql, webhooks } = deps;
  const own = (req: FastifyRequest) => resolveOwnEndpoint(sql, req.human!.id, (req.params as { ref: string }).ref);
  const active = async (req: FastifyRequest): Promise<Endpoint> => {
    const e = await own(req);
    if (e.state !== 'active') throw endpointRevoked(e);
    return e;
  };

  api.get('/endpoints/:ref/webhooks', async (req) => {
    const e = await own(req);
    return { webhooks: await webhooks.list(e.id) };
  });

  api.post('/endpoints/:ref/webhooks', async (req, reply) => {
    const e = await active(req);
    const body = parseInput(createBody, req.body ?? {});
    const created = await webhooks.create({ id: e.id, slug: e.slug, queues: e.scope_queues }, body, `operator:${req.human!.id}`, WEBHOOKS_PER_ENDPOINT_MAX);
    return reply.code(201).send(created);
  });

  api.post('/webhooks/:id/rotate', async (req) => webhooks.rotate(await getOwnWebhook(sql, req.human!.id, (req.params as { id: string }).id)));

  api.delete('/webhooks/:id', async (req) => webhooks.delete(await getOwnWebhook(sql, req.human!.id, (req.params as { id: string }).id)));

  api.get('/events', async (req) => {
    const q = parseInput(eventsQuery, req.query ?? {}, 'query');
    const e = await resolveOwnEndpoint(sql, req.human!.id, q.endpoint);
    const rows = await listEndpointEvents(sql, e.id, q.limit ?? LIST_DEFAULT_LIMIT);
    return { events: rows.map((r) => ({ ...r, received_at: rfc3339(r.received_at), disposition: r.todo_id ? 'routed' : 'recorded' })) };
  });
}

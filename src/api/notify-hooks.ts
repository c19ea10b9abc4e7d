import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Sql } from '../db/connect.ts';
import type { NotifyHooks } from '../services/notify-hooks.ts';
import { endpointRevoked, resolveOwnEndpoint } from '../store/endpoints.ts';
import { getOwnHook } from '../store/hooks.ts';
import { parseInput } from '../domain/validate.ts';

const createBody = z
  .object({
    url: z.string({ error: 'is required: an https URL' }),
    queues: z.array(z.string(), { error: 'must be a list of queue names' }).optional(),
    ignore_presence: z.boolean({ error: 'must be true or false' }).optional(),
  })
  .strict();

/** Notify hooks for the owning human (same guard and limits as all of /api/v1). */
export function registerHookRoutes(api: FastifyInstance, deps: { sql: Sql; hooks: NotifyHooks }): void {
  const { sql, hooks } = deps;
  const own = (req: FastifyRequest) => resolveOwnEndpoint(sql, req.human!.id, (req.params as { ref: string }).ref);

  api.get('/endpoints/:ref/hooks', async (req) => hooks.list((await own(req)).id));

  api.post('/endpoints/:ref/hooks', async (req, reply) => {
    const e = await own(req);
    if (e.state !== 'active') throw endpointRevoked(e);
    const body = parseInput(createBody, req.body ?? {});
    return reply.code(201).send(await hooks.create({ id: e.id, slug: e.slug, queues: e.scope_queues }, body, `operator:${req.human!.id}`));
  });

  api.post('/hooks/:id/rotate', async (req) => hooks.rotate(await getOwnHook(sql, req.human!.id, (req.params as { id: string }).id)));

  api.delete('/hooks/:id', async (req) => hooks.delete(await getOwnHook(sql, req.human!.id, (req.params as { id: string }).id)));
}

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { doc } from './openapi.ts';
import type { NotifyHooks } from '../services/notify-hooks.ts';
import { ownerOf, requireActive, type EndpointService } from '../services/endpoints.ts';
import { operatorActor } from '../domain/actor.ts';
import { parseInput } from '../domain/validate.ts';
import { hookDeletedSchema, hookListSchema, mintedHookViewSchema, type HookDeleted, type HookList, type MintedHookView } from './wire.ts';

const createBody = z
  .object({
    url: z.string({ error: 'is required: an https URL' }),
    queues: z.array(z.string(), { error: 'must be a list of queue names' }).optional(),
    ignore_presence: z.boolean({ error: 'must be true or false' }).optional(),
  })
  .strict();

/** Notify hooks for the owning human (same guard and limits as all of /api/v1). */
export function registerHookRoutes(api: FastifyInstance, deps: { endpoints: EndpointService; hooks: NotifyHooks }): void {
  const { endpoints, hooks } = deps;
  const own = (req: FastifyRequest) => endpoints.requireOwn(req.human!.id, (req.params as { ref: string }).ref);
  const ownHook = (req: FastifyRequest) => hooks.ownHook(req.human!.id, (req.params as { id: string }).id);

  api.get('/endpoints/:ref/hooks', doc({ tag: 'notify hooks', summary: 'The endpoint\'s notify hooks and the per-endpoint ceiling', ok: { status: 200, description: '{hooks, ceiling}' }, response: hookListSchema }), async (req): Promise<HookList> => hooks.list((await own(req)).id));

  api.post('/endpoints/:ref/hooks', doc({ tag: 'notify hooks', summary: 'Create a notify hook: Switchboard POSTs signed todo events to your https URL', body: createBody, ok: { status: 201, description: 'The hook with its `signing_secret` (shown once)' }, response: mintedHookViewSchema, errors: [409] }), async (req, reply) => {
    const e = requireActive(await own(req));
    const body = parseInput(createBody, req.body ?? {});
    return reply.code(201).send(await hooks.create(ownerOf(e), body, operatorActor(req.human!.id)) satisfies MintedHookView);
  });

  api.post('/hooks/:id/rotate', doc({ tag: 'notify hooks', summary: 'Rotate a notify hook\'s signing secret', ok: { status: 200, description: 'The hook with its new secret' }, response: mintedHookViewSchema }), async (req): Promise<MintedHookView> => hooks.rotate(await ownHook(req), operatorActor(req.human!.id)));

  api.delete('/hooks/:id', doc({ tag: 'notify hooks', summary: 'Delete a notify hook', ok: { status: 200, description: '{hook_id, deleted: true}' }, response: hookDeletedSchema }), async (req): Promise<HookDeleted> => hooks.delete(await ownHook(req), operatorActor(req.human!.id)));
}

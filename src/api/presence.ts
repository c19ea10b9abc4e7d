import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { doc } from './openapi.ts';
import type { Endpoint, EndpointService } from '../services/endpoints.ts';
import type { OperatorPresence } from '../services/presence-operator.ts';
import { parseInput } from '../domain/validate.ts';
import { presenceViewSchema, type PresenceView } from './wire.ts';

export interface PresenceRouteDeps {
  endpoints: EndpointService;
  operatorPresence: OperatorPresence;
}

const presenceBody = z
  .object({
    presence: z.enum(['in', 'out'], { error: 'must be "in" or "out"' }),
    until: z.union([z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp or null' }), z.null()]).optional(),
  })
  .strict();

const shiftBody = z.object({ shift: z.union([z.string({ error: 'must be a string or null' }), z.null()]) }).strict();

/**
 * The operator's presence controls (SPEC-0022): read, set and clear an endpoint's presence, and
 * set its shift. Same guard, ownership check and limits as every /api/v1/endpoints/{ref} route;
 * a revoked endpoint answers 409.
 */
export function registerPresenceRoutes(api: FastifyInstance, deps: PresenceRouteDeps): void {
  const { endpoints, operatorPresence } = deps;
  const activeEndpoint = (req: FastifyRequest): Promise<Endpoint> =>
    endpoints.requireOwnActive(req.human!.id, (req.params as { ref: string }).ref);

  api.get('/endpoints/:ref/presence', doc({ tag: 'presence', summary: 'The endpoint\'s presence: in or out, why, until when, its shift and pending todos', ok: { status: 200, description: '{presence, source, until, shift, pending}' }, response: presenceViewSchema, errors: [409] }), async (req): Promise<PresenceView> => operatorPresence.view(await activeEndpoint(req)));

  api.put('/endpoints/:ref/presence', doc({ tag: 'presence', summary: 'Clock the endpoint in or out, until a time or until changed', body: presenceBody, ok: { status: 200, description: 'The presence after the change' }, response: presenceViewSchema, errors: [409] }), async (req): Promise<PresenceView> => {
    const endpoint = await activeEndpoint(req);
    const body = parseInput(presenceBody, req.body ?? {});
    await operatorPresence.set(req.human!.id, endpoint, body.presence, body.until ? new Date(body.until) : null);
    return operatorPresence.view(endpoint);
  });

  api.delete('/endpoints/:ref/presence', doc({ tag: 'presence', summary: 'Clear the override: the shift (or in) decides again', ok: { status: 200, description: 'The presence after the change' }, response: presenceViewSchema, errors: [409] }), async (req): Promise<PresenceView> => {
    const endpoint = await activeEndpoint(req);
    await operatorPresence.clear(req.human!.id, endpoint);
    return operatorPresence.view(endpoint);
  });

  api.put('/endpoints/:ref/shift', doc({ tag: 'presence', summary: 'Set the weekly shift (e.g. "TZ=Europe/Berlin Mon-Fri 09:00-17:00"), or null to clear it', body: shiftBody, ok: { status: 200, description: 'The presence with the shift stored in canonical form' }, response: presenceViewSchema, errors: [409] }), async (req): Promise<PresenceView> => {
    const endpoint = await activeEndpoint(req);
    const body = parseInput(shiftBody, req.body ?? {});
    await operatorPresence.setShift(req.human!.id, endpoint, body.shift);
    return operatorPresence.view(endpoint);
  });
}

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import type { PresenceService } from '../services/presence.ts';
import { invalidArgument } from '../domain/errors.ts';
import { parseShift, planOperatorSet } from '../domain/presence/index.ts';
import { endpointRevoked, resolveOwnEndpoint, type Endpoint } from '../store/endpoints.ts';
import { parseInput } from '../domain/validate.ts';

export interface PresenceRouteDeps {
  sql: Sql;
  clock: Clock;
  presence: PresenceService;
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
  const { sql, clock, presence } = deps;

  async function activeEndpoint(req: FastifyRequest): Promise<Endpoint> {
    const endpoint = await resolveOwnEndpoint(sql, req.human!.id, (req.params as { ref: string }).ref);
    if (endpoint.state !== 'active') throw endpointRevoked(endpoint);
    return endpoint;
  }

  /** A write that lost a race with revocation answers like the revocation. */
  const mustStillBeActive = (ok: boolean, endpoint: Endpoint) => {
    if (!ok) throw endpointRevoked({ slug: endpoint.slug, state: 'revoked' });
  };

  api.get('/endpoints/:ref/presence', async (req) => presence.view((await activeEndpoint(req)).id));

  api.put('/endpoints/:ref/presence', async (req) => {
    const endpoint = await activeEndpoint(req);
    const body = parseInput(presenceBody, req.body ?? {});
    const now = clock.now();
    const until = body.until ? new Date(body.until) : null;
    if (until && until.getTime() <= now.getTime()) throw invalidArgument('until', 'must be in the future');
    const inputs = await presence.inputs(endpoint.id);
    if (!inputs) throw endpointRevoked({ slug: endpoint.slug, state: 'revoked' });
    const plan = planOperatorSet(inputs, now, body.presence, until, req.human!.id);
    mustStillBeActive(await presence.setOverride(endpoint.id, plan, `operator:${req.human!.id}`), endpoint);
    return presence.view(endpoint.id);
  });

  api.delete('/endpoints/:ref/presence', async (req) => {
    const endpoint = await activeEndpoint(req);
    const cleared = { override: null, overrideUntil: null, overrideSetAt: null, overrideBy: null };
    mustStillBeActive(await presence.setOverride(endpoint.id, cleared, `operator:${req.human!.id}`), endpoint);
    return presence.view(endpoint.id);
  });

  api.put('/endpoints/:ref/shift', async (req) => {
    const endpoint = await activeEndpoint(req);
    const body = parseInput(shiftBody, req.body ?? {});
    const canonical = body.shift === null ? null : parseShift(body.shift).canonical;
    mustStillBeActive(await presence.setShift(endpoint.id, canonical, `operator:${req.human!.id}`), endpoint);
    return presence.view(endpoint.id);
  });
}


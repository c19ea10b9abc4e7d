import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { doc } from './openapi.ts';
import type { Endpoint, EndpointService } from '../services/endpoints.ts';
import type { OperatorPresence } from '../services/presence-operator.ts';
import { PRESENCE_HISTORY_MAX_LIMIT, type PresenceChangeRow, type PresenceHistory as PresenceHistoryService } from '../services/presence-history.ts';
import { untilOnWire } from '../domain/presence/index.ts';
import { rfc3339 } from '../domain/time.ts';
import { parseInput } from '../domain/validate.ts';
import { presenceHistorySchema, presenceViewSchema, type PresenceChange, type PresenceHistory, type PresenceView } from './wire.ts';

export interface PresenceRouteDeps {
  endpoints: EndpointService;
  operatorPresence: OperatorPresence;
  presenceHistory: PresenceHistoryService;
}

const presenceBody = z
  .object({
    presence: z.enum(['in', 'out'], { error: 'must be "in" or "out"' }),
    until: z.union([z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp or null' }), z.null()]).optional(),
  })
  .strict();

const shiftBody = z.object({ shift: z.union([z.string({ error: 'must be a string or null' }), z.null()]) }).strict();

const historyLimit = `must be between 1 and ${PRESENCE_HISTORY_MAX_LIMIT}`;
const historyQuery = z
  .object({
    since: z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' }).optional(),
    limit: z
      .string()
      .regex(/^\d+$/, 'must be a whole number')
      .transform(Number)
      .pipe(z.number().int().min(1, historyLimit).max(PRESENCE_HISTORY_MAX_LIMIT, historyLimit))
      .optional(),
  })
  .strict();

export const presenceChangeOut = (c: PresenceChangeRow): PresenceChange => ({
  at: rfc3339(c.at),
  from: c.from,
  to: c.to,
  source: c.source,
  by: c.by,
  by_handle: c.by_handle,
  reason: c.reason,
  until: untilOnWire(c.until),
});

/**
 * The operator's presence controls (SPEC-0022): read, set and clear an endpoint's presence, and
 * set its shift. Same guard, ownership check and limits as every /api/v1/endpoints/{ref} route;
 * a revoked endpoint answers 409.
 */
export function registerPresenceRoutes(api: FastifyInstance, deps: PresenceRouteDeps): void {
  const { endpoints, operatorPresence, presenceHistory } = deps;
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

  api.get('/endpoints/:ref/presence/history', doc({ tag: 'presence', summary: "The endpoint's presence changes (from, to, source, by, reason, until), newest first; kept 30 days", query: historyQuery, ok: { status: 200, description: '{since, changes}: `since` defaults to 7 days ago, `limit` to 200 (at most 1000)' }, response: presenceHistorySchema }), async (req): Promise<PresenceHistory> => {
    // A revoked endpoint's history stays readable to its owner.
    const endpoint = await endpoints.requireOwn(req.human!.id, (req.params as { ref: string }).ref);
    const q = parseInput(historyQuery, req.query ?? {});
    const since = q.since ? new Date(q.since) : undefined;
    const h = await presenceHistory.recent(req.human!.id, endpoint.id, { since, limit: q.limit });
    return { since: rfc3339(h.since), changes: h.changes.map(presenceChangeOut) };
  });

  api.put('/endpoints/:ref/shift', doc({ tag: 'presence', summary: 'Set the weekly shift (e.g. "TZ=Europe/Berlin Mon-Fri 09:00-17:00"), or null to clear it', body: shiftBody, ok: { status: 200, description: 'The presence with the shift stored in canonical form' }, response: presenceViewSchema, errors: [409] }), async (req): Promise<PresenceView> => {
    const endpoint = await activeEndpoint(req);
    const body = parseInput(shiftBody, req.body ?? {});
    await operatorPresence.setShift(req.human!.id, endpoint, body.shift);
    return operatorPresence.view(endpoint);
  });
}

import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { doc } from './openapi.ts';
import { historyViewSchema, type HistoryViewWire } from './wire.ts';
import type { EndpointService } from '../services/endpoints.ts';
import type { HistoryService } from '../services/history.ts';
import { parseInput } from '../domain/validate.ts';

const historyQuery = z
  .object({
    range: z.enum(['1h', '24h', '7d'], { error: 'must be 1h, 24h or 7d' }).default('24h'),
    queue: z.string({ error: 'must be a queue name' }).max(63).optional(),
  })
  .strict();

/** An endpoint's queue history: the buckets its charts are drawn from (issue 39). */
export function registerHistoryRoutes(api: FastifyInstance, deps: { endpoints: EndpointService; history: HistoryService }): void {
  api.get(
    '/endpoints/:ref/history',
    doc({
      tag: 'endpoints',
      summary: "An endpoint's queue history: todos created, claimed, finished, depth, claim wait and doorbells per point (1h: minutes, 24h: quarter hours, 7d: hours)",
      query: historyQuery,
      ok: { status: 200, description: '{range, step_seconds, from, to, points}' },
      response: historyViewSchema,
    }),
    async (req): Promise<HistoryViewWire> => {
      const q = parseInput(historyQuery, req.query ?? {});
      const e = await deps.endpoints.requireOwn(req.human!.id, (req.params as { ref: string }).ref);
      return deps.history.history(req.human!.id, [e.id], q.range, { queue: q.queue });
    },
  );
}

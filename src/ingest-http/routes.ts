import type { FastifyInstance } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import { SwitchboardError } from '../domain/errors.ts';
import type { IngestService } from '../services/ingest.ts';
import { sendError } from '../web/errors.ts';
import { RateLimiter, type BucketPolicy } from '../lib/rate-limit.ts';

export const INGEST_BODY_LIMIT = 5 * 1024 * 1024;
export const INGEST_IP_LIMIT: BucketPolicy = { rate: 10, burst: 20 };

export interface IngestDeps {
  clock: Clock;
  ingest: IngestService;
  limit?: BucketPolicy;
}

/**
 * POST /webhooks/w/{token}: a bounded read (413) of the raw body, the per-IP limit, then
 * IngestService.deliver decides; its verdict becomes a 202 or the error's reply.
 */
export function registerIngest(app: FastifyInstance, deps: IngestDeps): void {
  const limiter = new RateLimiter(deps.limit ?? INGEST_IP_LIMIT, deps.clock);
  app.register(async (ingest) => {
    ingest.removeAllContentTypeParsers();
    ingest.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: INGEST_BODY_LIMIT }, (_req, body, done) => done(null, body));

    ingest.post('/webhooks/w/:token', async (req, reply) => {
      const wait = limiter.take(req.ip);
      if (wait > 0) throw new SwitchboardError('rate_limited', 'too many deliveries from this address', { retry_after: wait });
      const verdict = await deps.ingest.deliver({
        token: (req.params as { token: string }).token,
        headers: req.headers,
        body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
        ip: req.ip,
      });
      if (!verdict.ok) return sendError(reply, verdict.error);
      return reply.code(202).send(verdict.accepted);
    });
  });
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import { SwitchboardError } from '../domain/errors.ts';
import { unknownWebhook, type IngestService, type IngestTarget } from '../services/ingest.ts';
import { sendError } from '../web/errors.ts';
import { RateLimiter, type BucketPolicy } from '../lib/rate-limit.ts';

export const INGEST_BODY_LIMIT = 5 * 1024 * 1024;
export const INGEST_IP_LIMIT: BucketPolicy = { rate: 10, burst: 20 };
/**
 * Deliveries whose body is being read at once, per instance: 64 bodies of up to 5 MiB bound the
 * memory slow senders can hold (with valid tokens) to about 320 MiB; past it a delivery is
 * refused at once (503, retry) rather than buffered.
 */
export const INGEST_BODIES_IN_FLIGHT = 64;

export interface IngestDeps {
  clock: Clock;
  ingest: IngestService;
  limit?: BucketPolicy;
}

/**
 * POST /webhooks/w/{token}: the per-IP limit (429) and the token (404) are checked as soon as the
 * headers arrive, before a byte of the body is read, so an anonymous sender cannot make the
 * server buffer bodies for made-up tokens; at most INGEST_BODIES_IN_FLIGHT bodies are read at
 * once (503 past it); then a bounded read (413) of the raw body, and
 * IngestService decides; its verdict becomes a 202 (a todo), a 200 (a ping or test delivery,
 * recorded with no todo) or the error's reply.
 */
export function registerIngest(app: FastifyInstance, deps: IngestDeps): void {
  const limiter = new RateLimiter(deps.limit ?? INGEST_IP_LIMIT, deps.clock);
  const targets = new WeakMap<FastifyRequest, IngestTarget>();
  let bodiesInFlight = 0;
  app.register(async (ingest) => {
    ingest.removeAllContentTypeParsers();
    ingest.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: INGEST_BODY_LIMIT }, (_req, body, done) => done(null, body));

    const beforeTheBody = async (req: FastifyRequest, reply: FastifyReply) => {
      const wait = limiter.take(req.ip);
      if (wait > 0) throw new SwitchboardError('rate_limited', 'too many deliveries from this address', { retry_after: wait });
      const target = await deps.ingest.findTarget((req.params as { token: string }).token);
      if (!target) return sendError(reply.header('connection', 'close'), unknownWebhook());
      if (bodiesInFlight >= INGEST_BODIES_IN_FLIGHT) {
        const busy = new SwitchboardError('unavailable', `this instance is reading ${INGEST_BODIES_IN_FLIGHT} deliveries already; retry shortly`, { retry_after: 5 });
        return sendError(reply.header('connection', 'close'), busy);
      }
      bodiesInFlight++;
      reply.raw.once('close', () => bodiesInFlight--);
      targets.set(req, target);
    };

    ingest.post('/webhooks/w/:token', { onRequest: beforeTheBody }, async (req, reply) => {
      const verdict = await deps.ingest.deliverTo(targets.get(req) ?? null, {
        token: (req.params as { token: string }).token,
        headers: req.headers,
        body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
        ip: req.ip,
      });
      if (!verdict.ok) return sendError(reply, verdict.error);
      // A ping or a test delivery was recorded and asks for nothing: 200, not "accepted for work".
      if (verdict.recorded) return reply.code(200).send(verdict.recorded);
      return reply.code(202).send(verdict.accepted);
    });
  });
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import { SwitchboardError } from '../domain/errors.ts';
import { unknownWebhook, type IngestService, type IngestTarget } from '../services/ingest.ts';
import { sendError } from '../web/errors.ts';
import { RateLimiter, type BucketPolicy } from '../lib/rate-limit.ts';
import { AuthFailures } from '../web/auth-failures.ts';
import type { ErrorCode } from '../domain/errors.ts';

export const INGEST_BODY_LIMIT = 5 * 1024 * 1024;
/**
 * Refused deliveries per client address (an unknown token, a bad signature, a malformed body): a
 * burst of 20, then 10 a second, kept as the API's failed authentications are (AuthFailures). Only
 * refusals spend from it, so a sender whose deliveries are valid is never held back by it (GitHub
 * does not retry a refused delivery by itself).
 */
export const INGEST_FAILURE_LIMIT: BucketPolicy = { rate: 10, burst: 20 };
/** SWITCHBOARD_INGEST_RATE's default: valid deliveries per second to one webhook (burst: twice that). */
export const INGEST_RATE_DEFAULT = 100;
/** The refusals that are the sender's fault: a duplicate (409) or a busy server (503) is not one. */
const SENDER_FAULTS: ReadonlySet<ErrorCode> = new Set(['invalid_argument', 'unauthenticated', 'forbidden', 'not_found', 'payload_too_large', 'unsupported_media_type']);
/**
 * Deliveries whose body is being read at once, per instance: 64 bodies of up to 5 MiB bound the
 * memory slow senders can hold (with valid tokens) to about 320 MiB; past it a delivery is
 * refused at once (503, retry) rather than buffered.
 */
export const INGEST_BODIES_IN_FLIGHT = 64;

export interface IngestDeps {
  clock: Clock;
  ingest: IngestService;
  /** Overrides INGEST_FAILURE_LIMIT (tests shrink it, benchmarks lift it). */
  failureLimit?: BucketPolicy;
  /** Valid deliveries per second to one webhook (SWITCHBOARD_INGEST_RATE); burst twice that. */
  ratePerWebhook?: number;
}

/**
 * POST /webhooks/w/{token}: the address's refusal budget (429), the token (404) and the webhook's
 * rate (429) are checked as soon as the headers arrive, before a byte of the body is read, so an
 * anonymous sender cannot make the server buffer bodies for made-up tokens; at most
 * INGEST_BODIES_IN_FLIGHT bodies are read at once (503 past it); then a bounded read (413) of the
 * raw body, and IngestService decides; its verdict becomes a 202 (a todo), a 200 (a ping or test
 * delivery, recorded with no todo) or the error's reply, which spends from the address's budget
 * when it is the sender's fault.
 */
export function registerIngest(app: FastifyInstance, deps: IngestDeps): void {
  const refusals = new AuthFailures(deps.clock, deps.failureLimit ?? INGEST_FAILURE_LIMIT);
  const rate = deps.ratePerWebhook ?? INGEST_RATE_DEFAULT;
  const perWebhook = new RateLimiter({ rate, burst: Math.max(1, 2 * rate) }, deps.clock);
  const targets = new WeakMap<FastifyRequest, IngestTarget>();
  let bodiesInFlight = 0;
  app.register(async (ingest) => {
    ingest.removeAllContentTypeParsers();
    ingest.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: INGEST_BODY_LIMIT }, (_req, body, done) => done(null, body));

    const beforeTheBody = async (req: FastifyRequest, reply: FastifyReply) => {
      // An unknown token counts as a refusal; an address out of refusals gets no lookup at all.
      const attempt = await refusals.attempt(req.ip, () => deps.ingest.findTarget((req.params as { token: string }).token));
      if ('retryAfter' in attempt) {
        throw new SwitchboardError('rate_limited', 'too many refused deliveries from this address', { retry_after: attempt.retryAfter });
      }
      const target = attempt.value;
      if (!target) return sendError(reply.header('connection', 'close'), unknownWebhook());
      const wait = perWebhook.take(target.id);
      if (wait > 0) {
        const over = new SwitchboardError('rate_limited', `this webhook is receiving more than ${rate} deliveries a second (SWITCHBOARD_INGEST_RATE)`, { retry_after: wait });
        return sendError(reply.header('connection', 'close'), deps.ingest.countRefusal(target, over));
      }
      if (bodiesInFlight >= INGEST_BODIES_IN_FLIGHT) {
        const busy = new SwitchboardError('unavailable', `this instance is reading ${INGEST_BODIES_IN_FLIGHT} deliveries already; retry shortly`, { retry_after: 5 });
        return sendError(reply.header('connection', 'close'), deps.ingest.countRefusal(target, busy));
      }
      bodiesInFlight++;
      reply.raw.once('close', () => bodiesInFlight--);
      targets.set(req, target);
    };

    // A body over the limit fails in the content parser, after beforeTheBody found its webhook.
    ingest.addHook('onError', async (req, _reply, err) => {
      const target = targets.get(req);
      if (target && (err as { statusCode?: number }).statusCode === 413) deps.ingest.countRefusal(target, new SwitchboardError('payload_too_large', 'request body is too large'));
    });

    ingest.post('/webhooks/w/:token', { onRequest: beforeTheBody }, async (req, reply) => {
      const verdict = await deps.ingest.deliverTo(targets.get(req) ?? null, {
        token: (req.params as { token: string }).token,
        headers: req.headers,
        body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
        ip: req.ip,
      });
      if (!verdict.ok) {
        if (SENDER_FAULTS.has(verdict.error.code)) refusals.fail(req.ip);
        return sendError(reply, verdict.error);
      }
      // A ping or a test delivery was recorded and asks for nothing: 200, not "accepted for work".
      if (verdict.recorded) return reply.code(200).send(verdict.recorded);
      return reply.code(202).send(verdict.accepted);
    });
  });
}

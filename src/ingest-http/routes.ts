import type { FastifyInstance } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import { SwitchboardError, unstorableInput } from '../domain/errors.ts';
import { titleFor } from '../domain/ingest/titles.ts';
import { deliveryId, eventType, jsonDepthExceeds, sanitizeHeaders, verifySignature } from '../domain/ingest/verify.ts';
import type { Webhooks } from '../services/webhooks.ts';
import type { Logger } from '../lib/log.ts';
import type { Metrics } from '../lib/metrics.ts';
import { insertEventAndTodo, type TodoRow } from '../store/todos.ts';
import { findIngestTargetUnscoped, touchWebhookDelivery } from '../store/webhooks.ts';
import { sendError } from '../web/errors.ts';
import { RateLimiter, type BucketPolicy } from '../web/rate-limit.ts';

export const INGEST_BODY_LIMIT = 5 * 1024 * 1024;
export const INGEST_IP_LIMIT: BucketPolicy = { rate: 10, burst: 20 };

export interface IngestDeps {
  sql: Sql;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  webhooks: Webhooks;
  onTodoReady: (todo: TodoRow) => void;
  limit?: BucketPolicy;
}

/**
 * POST /webhooks/w/{token}: a delivery becomes an event and a todo, in this order — bounded read
 * (413), the webhook by its token (404), its endpoint active (503), the signature over the raw
 * bytes (401, nothing stored), the body parsed, headers sanitized, the delivery id as dedup key,
 * event and todo in one transaction, then the doorbell for a new todo only.
 */
export function registerIngest(app: FastifyInstance, deps: IngestDeps): void {
  const limiter = new RateLimiter(deps.limit ?? INGEST_IP_LIMIT, deps.clock);
  app.register(async (ingest) => {
    ingest.removeAllContentTypeParsers();
    ingest.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: INGEST_BODY_LIMIT }, (_req, body, done) => done(null, body));

    ingest.post('/webhooks/w/:token', async (req, reply) => {
      const wait = limiter.take(req.ip);
      if (wait > 0) throw new SwitchboardError('rate_limited', 'too many deliveries from this address', { retry_after: wait });
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const target = await findIngestTargetUnscoped(deps.sql, (req.params as { token: string }).token);
      if (!target) return sendError(reply, new SwitchboardError('not_found', 'unknown webhook'));
      const provider = target.source_type;
      const reject = (verdict: string) => deps.metrics.webhookDeliveries.inc({ provider, trust_mode: target.trust_mode, verdict });
      if (target.endpoint_state !== 'active') {
        reject('rejected');
        return sendError(reply, new SwitchboardError('unavailable', 'webhook not configured: its endpoint is not active'));
      }

      if (target.trust_mode === 'signed') {
        let secret: string | null;
        try {
          secret = deps.webhooks.openSecret(target);
        } catch (err) {
          // Sealed under a key this instance lacks (unset or changed): the secret is as good as
          // absent, a configuration fault the producer should retry past, not a 500.
          reject('rejected');
          deps.log.warn(
            { provider, slug: target.endpoint_slug, webhook_id: target.id, err: (err as Error).message },
            'webhook signing secret cannot be opened: check SWITCHBOARD_SECRET_ENCRYPTION_KEY',
          );
          return sendError(reply, new SwitchboardError('unavailable', 'webhook not configured: its signing secret cannot be read'));
        }
        const check = secret ? verifySignature(provider, req.headers, body, secret) : ({ ok: false, reason: 'bad_signature' } as const);
        if (!check.ok) {
          deps.metrics.webhookVerifyFailures.inc({ provider, reason: check.reason });
          reject('rejected');
          deps.log.info({ provider, event: eventType(provider, req.headers), reason: check.reason, ip: req.ip, slug: target.endpoint_slug }, 'webhook signature refused');
          return sendError(reply, new SwitchboardError('unauthenticated', 'signature verification failed'));
        }
      }

      const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      const text = body.toString('utf8');
      let payload: unknown;
      if (provider !== 'generic' || contentType === 'application/json' || contentType.endsWith('+json')) {
        if (jsonDepthExceeds(text)) {
          reject('rejected');
          return sendError(reply, new SwitchboardError('invalid_argument', 'body: JSON nests too deeply', { field: 'body' }));
        }
        try {
          payload = JSON.parse(text);
        } catch {
          reject('rejected');
          return sendError(reply, new SwitchboardError('invalid_argument', 'body: is not valid JSON', { field: 'body' }));
        }
      } else {
        payload = { body: text };
      }

      const event = eventType(provider, req.headers);
      const delivery = deliveryId(provider, req.headers, body);
      const now = deps.clock.now();
      const stored = await insertEventAndTodo(
        deps.sql,
        {
          source: provider,
          family: 'webhook',
          eventType: event,
          externalId: delivery,
          trustMode: target.trust_mode,
          verified: target.trust_mode === 'signed',
          verifyDetail: target.trust_mode === 'signed' ? 'hmac-sha256 ok' : 'token ok (caller authenticated by the URL; body not verified)',
          contentType: contentType || null,
          headers: sanitizeHeaders(req.headers),
          payload: body,
          webhookId: target.id,
          endpointId: target.endpoint_id,
        },
        {
          endpointId: target.endpoint_id,
          queue: target.target_queue,
          title: titleFor(provider, event, payload),
          source: provider,
          kind: event,
          payload,
          idempotencyKey: `${target.id}:${delivery}`,
        },
        now,
      ).catch((err: unknown) => {
        // jsonb cannot hold U+0000 (valid JSON as "\u0000", or a NUL byte in a text body) nor an
        // unpaired surrogate ("\ud800"): the body's fault, so a 400 the producer can see, not a
        // 500 that reads as the server's.
        if (!unstorableInput(err)) throw err;
        reject('rejected');
        return null;
      });
      if (!stored) {
        return sendError(
          reply,
          new SwitchboardError('invalid_argument', 'body: contains a NUL character (U+0000) or an unpaired UTF-16 surrogate, which cannot be stored', { field: 'body' }),
        );
      }
      const { todo, created, eventId, pushEligible } = stored;
      await touchWebhookDelivery(deps.sql, target.id, now);
      deps.metrics.webhookDeliveries.inc({ provider, trust_mode: target.trust_mode, verdict: 'accepted' });
      if (created && pushEligible) deps.onTodoReady(todo);
      deps.log.info({ slug: target.endpoint_slug, provider, event, todo_id: todo.id, created, event_id: eventId }, 'webhook delivery');
      return reply.code(202).send({
        todos: [{ id: todo.id, endpoint_id: todo.endpoint_id, queue: todo.queue, created }],
        created: created ? 1 : 0,
        id: todo.id,
        queue: todo.queue,
        trust_mode: target.trust_mode,
        verified: target.trust_mode === 'signed',
      });
    });
  });
}

import { SwitchboardError, unstorableInput } from '../domain/errors.ts';
import { bodyIsStoredPayload, decodeDelivery, formPayload, isFormDelivery, mediaType, noTodoReason, type NoTodoReason } from '../domain/ingest/body.ts';
import { titleFor } from '../domain/ingest/titles.ts';
import { EVENT_HEADERS, bodyDigest, deliveryId, eventType, sanitizeHeaders, verifySignature } from '../domain/ingest/verify.ts';
import { NOTIFY_HOOK_MARKER } from '../domain/hook-marker.ts';
import { ingestIdempotencyKey, kindProblem } from '../domain/todo-input.ts';
import type { Metrics } from '../lib/metrics.ts';
import type { DeliveryFacts } from '../domain/routing/envelope.ts';
import { buildEnvelope, subjectOf } from '../domain/routing/envelope.ts';
import type { Decision, RouteTrace } from '../domain/routing/route.ts';
import type { RouteAction } from '../domain/routing/rules.ts';
import type { FanOutSkip } from '../store/todos/index.ts';
import type { WebhookRouting } from './webhook-routing.ts';
import { isEndpointRevoked } from '../store/endpoints.ts';
import type { EventInput } from '../store/todos/index.ts';
import { recordEventWithoutTodo } from '../store/webhook-events.ts';
import type { IngestTarget } from '../store/webhooks.ts';
import type { ServiceBase } from './base.ts';
import type { WebhookRefusalTally } from './webhook-refusals.ts';
import type { TodoService } from './todos.ts';
import type { Webhooks } from './webhooks.ts';

/** A webhook request as received, before it is verified or decoded. */
export interface IncomingDelivery {
  /** The webhook's ingest token, from its URL. */
  token: string;
  headers: Record<string, string | string[] | undefined>;
  /** The raw body, exactly as received (signatures are over these bytes). */
  body: Buffer;
  ip: string;
}

export interface Accepted {
  todos: { id: string; endpoint_id: string; queue: string; created: boolean }[];
  /** How many todos this delivery made (0 for a redelivery, a drop or a repeat). */
  created: number;
  /** The first todo (the owner's unless a rule sent it elsewhere); absent when none was made. */
  id?: string;
  queue?: string;
  trust_mode: string;
  verified: boolean;
  /** Why it became what it did (domain/routing/route.ts). */
  routing: RouteTrace;
  /** A rule dropped it: recorded, no todo. */
  dropped?: true;
  /** A `once` rule's subject already had a live todo: recorded as a repeat, that todo returned. */
  repeat?: true;
  /** The same signed body came before (a replay): nothing was written. */
  duplicate?: true;
  /** Fan-out targets skipped at delivery (revoked, or no longer in scope since the rules were saved). */
  skipped?: { endpoint: string; reason: FanOutSkip }[];
  event_id?: string;
}

/** A verified delivery that asks for no work (a ping, a test delivery): an event, no todo, no ring. */
export interface Recorded {
  ok: true;
  event: string | null;
  disposition: 'recorded';
  reason: NoTodoReason;
  event_id: string;
  /** false: the same signed body was already recorded (a redelivery); nothing new was written. */
  created: boolean;
  todos: [];
  trust_mode: string;
  verified: boolean;
}

export type IngestVerdict =
  | { ok: true; accepted: Accepted; recorded?: undefined }
  | { ok: true; recorded: Recorded; accepted?: undefined }
  | { ok: false; error: SwitchboardError };

const refused = (error: SwitchboardError): IngestVerdict => ({ ok: false, error });

export const unknownWebhook = () => new SwitchboardError('not_found', 'unknown webhook');

export type { IngestTarget };

/** A webhook whose endpoint is revoked: a configuration fault the producer should see as 503. */
const notActive = () => new SwitchboardError('unavailable', 'webhook not configured: its endpoint is not active');

/**
 * A webhook delivery becomes an event and a todo, in this order: the webhook by its token (404),
 * its endpoint active (503), the signature over the raw bytes (401, nothing stored), the JSON
 * parsed (from a form body's `payload` field, else the body; 400 naming the field), headers
 * sanitized, the delivery id (and, signed, the signed bytes' hash) as dedup keys, event and todo in
 * one transaction (TodoService.push, which rings for a new todo only). A ping or a Gitea test
 * delivery is recorded as an event alone: no todo, no ring.
 */

export class IngestService {
  constructor(
    private readonly base: ServiceBase,
    private readonly deps: {
      metrics: Metrics;
      webhooks: Webhooks;
      routing: Pick<WebhookRouting, 'routerOf'>;
      todos: TodoService;
      /** How far back a signed body counts as already delivered (SWITCHBOARD_RETENTION, the events' lifetime). */
      replayWindowMs: number;
      /** Refused deliveries per webhook, for its deliveries chart. */
      refusals: Pick<WebhookRefusalTally, 'count'>;
    },
  ) {}

  /**
   * A delivery to a known webhook refused, counted for its deliveries chart: by deliverTo, and by
   * the ingest routes before the body is read (over the webhook's rate, the instance reading too
   * many bodies, a body over the limit). Answers the error.
   */
  countRefusal(target: IngestTarget, error: SwitchboardError): SwitchboardError {
    this.deps.refusals.count(target.id, error.code);
    return error;
  }

  /** The webhook an ingest token names, or null: looked up before the body is read. */
  findTarget(token: string): Promise<IngestTarget | null> {
    return this.deps.webhooks.findIngestTarget(token);
  }

  /** A delivery to a webhook already looked up (null: the token named none). */
  async deliverTo(target: IngestTarget | null, d: IncomingDelivery): Promise<IngestVerdict> {
    const { sql, clock, log } = this.base;
    const { metrics } = this.deps;
    if (!target) return refused(unknownWebhook());
    const provider = target.source_type;
    const reject = (error: SwitchboardError) => {
      metrics.webhookDeliveries.inc({ provider, trust_mode: target.trust_mode, verdict: 'rejected' });
      return refused(this.countRefusal(target, error));
    };
    if (target.endpoint_state !== 'active') return reject(notActive());
    if (d.headers[NOTIFY_HOOK_MARKER.toLowerCase()] !== undefined) {
      return reject(new SwitchboardError('invalid_argument', `${NOTIFY_HOOK_MARKER}: a Switchboard notify hook delivery cannot become a todo (it would loop)`, { field: NOTIFY_HOOK_MARKER }));
    }

    const contentType = mediaType(d.headers);
    // A form body's `payload` field is only URL-decoded here, not parsed: Gitea signs that JSON,
    // not the form around it, so the signature may cover these bytes instead of the raw body.
    const form = isFormDelivery(provider, contentType) ? formPayload(d.body) : null;
    let signedBytes = d.body;
    if (target.trust_mode === 'signed') {
      let secret: string | null;
      try {
        secret = this.deps.webhooks.openSecret(target);
      } catch (err) {
        // Sealed under a key this instance lacks (unset or changed): the secret is as good as
        // absent, a configuration fault the producer should retry past, not a 500.
        log.warn(
          { provider, slug: target.endpoint_slug, webhook_id: target.id, err: (err as Error).message },
          'webhook signing secret cannot be opened: check SWITCHBOARD_SECRET_ENCRYPTION_KEY',
        );
        return reject(new SwitchboardError('unavailable', 'webhook not configured: its signing secret cannot be read'));
      }
      const alternatives = provider === 'gitea' && form !== null ? [Buffer.from(form, 'utf8')] : [];
      const check = secret ? verifySignature(provider, d.headers, d.body, secret, alternatives) : ({ ok: false, reason: 'bad_signature' } as const);
      if (!check.ok) {
        metrics.webhookVerifyFailures.inc({ provider, reason: check.reason });
        log.info({ provider, event: eventType(provider, d.headers), reason: check.reason, ip: d.ip, slug: target.endpoint_slug }, 'webhook signature refused');
        return reject(new SwitchboardError('unauthenticated', 'signature verification failed'));
      }
      signedBytes = check.signed;
    }

    const decoded = decodeDelivery(provider, contentType, d.body, form);
    if (!decoded.ok) return reject(new SwitchboardError('invalid_argument', decoded.message, { field: decoded.field }));
    const payload = decoded.payload;

    const event = eventType(provider, d.headers);
    // The event name becomes the todo's kind and reaches the agent: the kind grammar applies.
    const eventProblem = event === null ? null : kindProblem(event);
    if (eventProblem) {
      const field = EVENT_HEADERS[provider];
      return reject(new SwitchboardError('invalid_argument', `${field}: the event name ${eventProblem}`, { field }));
    }
    const delivery = deliveryId(provider, d.headers, d.body);
    const signed = target.trust_mode === 'signed';
    const now = clock.now();
    const record: EventInput = {
      source: provider,
      family: 'webhook',
      eventType: event,
      externalId: delivery,
      trustMode: target.trust_mode,
      verified: signed,
      verifyDetail: signed ? 'hmac-sha256 ok' : 'token ok (caller authenticated by the URL; body not verified)',
      contentType: contentType || null,
      headers: sanitizeHeaders(d.headers),
      payload: d.body,
      webhookId: target.id,
      endpointId: target.endpoint_id,
      // Only the body is signed: the same signed bytes under a new delivery id, event or wrapping are a replay.
      replay: signed ? { bodySha256: bodyDigest(signedBytes), since: new Date(now.getTime() - this.deps.replayWindowMs) } : null,
    };

    const reason = noTodoReason(provider, event, payload);
    if (reason) {
      let kept;
      try {
        kept = await recordEventWithoutTodo(sql, { ...record, endpointId: target.endpoint_id, disposition: 'recorded' }, now);
      } catch (err) {
        if (isEndpointRevoked(err)) return reject(notActive());
        throw err;
      }
      metrics.webhookDeliveries.inc({ provider, trust_mode: target.trust_mode, verdict: 'accepted' });
      log.info({ slug: target.endpoint_slug, provider, event, reason, created: kept.created, event_id: kept.eventId }, 'webhook delivery recorded, no todo');
      return {
        ok: true,
        recorded: {
          ok: true,
          event,
          disposition: 'recorded',
          reason,
          event_id: kept.eventId,
          created: kept.created,
          todos: [],
          trust_mode: target.trust_mode,
          verified: signed,
        },
      };
    }

    const decision = this.#route(target, { source: provider, event, deliveryId: delivery, trustMode: target.trust_mode, verified: signed, headers: record.headers ?? {}, payload });
    const answer = { trust_mode: target.trust_mode, verified: signed, routing: decision.trace };
    try {
      if (decision.fault) {
        // Nothing made, and the body's replay key left unclaimed: the producer's retry is routed afresh.
        const kept = await recordEventWithoutTodo(sql, { ...record, endpointId: target.endpoint_id, replay: null, disposition: 'faulted', routing: decision.trace }, now);
        metrics.routingFaults.inc({ cause: decision.trace.cause! });
        log.warn({ slug: target.endpoint_slug, webhook_id: target.id, event, event_id: kept.eventId, routing: decision.trace }, 'webhook delivery faulted in routing: no todo, answered 503');
        return reject(
          new SwitchboardError('unavailable', `routing faulted at rule ${decision.trace.rule_index} (${decision.trace.rule_name}): ${decision.trace.message}; nothing was made, retry after fixing the rule`, {
            retry_after: 60,
            event_id: kept.eventId,
            routing: decision.trace,
          }),
        );
      }
      const accepted = await this.#deliver(target, record, decision.action, decision.trace, { provider, event, payload, delivery, contentType, body: d.body, now });
      metrics.webhookDeliveries.inc({ provider, trust_mode: target.trust_mode, verdict: 'accepted' });
      log.debug({ slug: target.endpoint_slug, provider, event, todos: accepted.todos.map((t) => t.id), created: accepted.created, event_id: accepted.event_id }, 'webhook delivery');
      return { ok: true, accepted: { ...accepted, ...answer } };
    } catch (err) {
      // jsonb cannot hold U+0000 (valid JSON as "\u0000") nor an unpaired surrogate ("\ud800"):
      // the body's fault, so a 400 the producer can see, not a 500 that reads as the server's.
      if (isEndpointRevoked(err)) return reject(notActive());
      if (!unstorableInput(err)) throw err;
      return reject(
        new SwitchboardError('invalid_argument', 'body: contains a NUL character (U+0000) or an unpaired UTF-16 surrogate, which cannot be stored', { field: 'body' }),
      );
    }
  }

  /** The webhook's routing decision for this delivery (without rules: its target queue, traced as the default). */
  #route(target: IngestTarget, facts: DeliveryFacts): Decision {
    const router = this.deps.routing.routerOf(target);
    if (!(router instanceof SwitchboardError) && !router.routes) {
      return { fault: false, action: null, trace: { stage: 'default', rule_index: null, rule_name: null, action: 'queue', queue: target.target_queue } };
    }
    const decision: Decision =
      router instanceof SwitchboardError
        ? // A stored rule that no longer compiles: every delivery faults until the rules are saved again.
          { fault: true, trace: { stage: 'rule', rule_index: null, rule_name: null, action: 'fault', cause: 'error', message: router.message } }
        : router.decide(buildEnvelope(facts, target.routing_params));
    this.deps.metrics.routingDecisions.inc({ action: decision.trace.action });
    return decision;
  }

  /** Makes what the decision says: nothing (a drop), one todo on the owner, or one per fan-out target. */
  async #deliver(target: IngestTarget, record: EventInput, action: RouteAction | null, trace: RouteTrace, d: RoutedDelivery): Promise<Omit<Accepted, 'trust_mode' | 'verified' | 'routing'>> {
    const { sql } = this.base;
    if (action !== null && 'drop' in action) {
      const kept = await recordEventWithoutTodo(sql, { ...record, endpointId: target.endpoint_id, disposition: 'dropped', routing: trace }, d.now);
      // A body this webhook already has is a replay: nothing written, whatever the rules say now.
      if (!kept.created) return { todos: [], created: 0, duplicate: true, event_id: kept.eventId };
      return { todos: [], created: 0, dropped: true, event_id: kept.eventId };
    }
    const queue = action?.queue ?? target.target_queue;
    const subject = action?.once ? subjectOf(d.payload) : null;
    // `once`: the key is the subject's, so a live todo for it makes this delivery a repeat.
    const key = subject !== null ? `once:${target.id}:${queue}:${subject}` : ingestIdempotencyKey(target.id, d.delivery);
    const todo = {
      queue,
      title: titleFor(d.provider, d.event, d.payload),
      source: d.provider,
      kind: d.event,
      payload: d.payload,
      payloadIsBody: bodyIsStoredPayload(d.provider, d.contentType, d.body),
      routing: trace,
    };
    const routed: EventInput = { ...record, disposition: 'routed', routing: trace };
    if (action?.endpoints) {
      const out = await this.deps.todos.pushFanOut(routed, { endpointId: target.endpoint_id, humanId: target.owner_human_id }, action.endpoints.map((slug) => ({ ...todo, slug, key })), d.now);
      const made = out.todos.filter((t) => t.todo !== null);
      const skipped = out.todos.filter((t) => t.skipped !== null).map((t) => ({ endpoint: t.slug, reason: t.skipped! }));
      const first = made[0]?.todo;
      return {
        todos: made.map((t) => ({ id: t.todo!.id, endpoint_id: t.todo!.endpoint_id, queue: t.todo!.queue, created: t.created })),
        created: made.filter((t) => t.created).length,
        ...(first ? { id: first.id, queue: first.queue } : {}),
        ...(skipped.length > 0 ? { skipped } : {}),
        event_id: out.eventId,
      };
    }
    const { todo: row, created, eventId } = await this.deps.todos.push(routed, { ...todo, endpointId: target.endpoint_id, idempotencyKey: key, repeatKeepsEvent: subject !== null }, d.now);
    return {
      todos: [{ id: row.id, endpoint_id: row.endpoint_id, queue: row.queue, created }],
      created: created ? 1 : 0,
      id: row.id,
      queue: row.queue,
      ...(subject !== null && !created ? { repeat: true as const } : {}),
      ...(eventId ? { event_id: eventId } : {}),
    };
  }
}

/** What a routed delivery carries from the request to the todos it makes. */
interface RoutedDelivery {
  provider: IngestTarget['source_type'];
  event: string | null;
  payload: unknown;
  delivery: string;
  contentType: string;
  body: Buffer;
  now: Date;
}

import type { Sql } from '../db/connect.ts';
import type { Actor } from '../domain/actor.ts';
import { decodeDelivery, formPayload, isFormDelivery, noTodoReason } from '../domain/ingest/body.ts';
import { SwitchboardError, invalidArgument, isSwitchboardError } from '../domain/errors.ts';
import { buildEnvelope } from '../domain/routing/envelope.ts';
import { compileRouting, type Decision, type RouteTrace, type Router } from '../domain/routing/route.ts';
import { actionTargets, applyRoutingUpdate, parseRoutingUpdate, type RoutingConfig } from '../domain/routing/rules.ts';
import { rfc3339 } from '../domain/time.ts';
import type { SourceType } from '../domain/webhook-source.ts';
import { audit } from '../lib/audit.ts';
import type { Logger } from '../lib/log.ts';
import { resolveOwnEndpoint } from '../store/endpoints.ts';
import { latestWebhookEvents, setWebhookRouting, type ReplayableEvent } from '../store/webhook-routing.ts';
import type { WebhookRow } from '../store/webhooks.ts';
import type { ServiceBase } from './base.ts';
import type { Webhooks } from './webhooks.ts';

/** How many stored events a save (or a test) replays. */
export const DRY_RUN_EVENTS = 50;

/** The endpoint a webhook belongs to, as routing checks targets against it. */
export interface RoutingOwner {
  id: string;
  slug: string;
  queues: readonly string[];
  /** The endpoint's human, whose other endpoints a fan-out may reach; absent for an agent, which may not fan out. */
  humanId?: string;
}

/** What a rules write or test answers per replayed event: what it would become beside what it became. */
export interface DryRunRow {
  event_id: string;
  event: string | null;
  received_at: string | undefined;
  /** False for a delivery ingest records before routing (a ping, a test delivery): the rules never see it. */
  routed: boolean;
  would: { action: RouteTrace['action']; queue: string | null; endpoints: string[]; trace: RouteTrace };
  did: { disposition: string | null; todos: { queue: string; slug: string }[]; trace: unknown };
}

const configOf = (row: WebhookRow): RoutingConfig => ({ rules: row.routing_rules, params: row.routing_params, defaultAction: row.routing_default });

/**
 * A webhook's routing rules: read, written (checked, compiled, then replayed over its latest
 * events, so a save is also a dry run) and compiled once per stored row for the ingest path.
 */
export class WebhookRouting {
  private readonly sql: Sql;
  private readonly log: Logger;
  /** The router of each stored row: the ingest target cache holds one row object per webhook until it changes. */
  readonly #routers = new WeakMap<WebhookRow, Router | SwitchboardError>();

  constructor(
    base: ServiceBase,
    private readonly webhooks: Pick<Webhooks, 'afterChange'>,
  ) {
    ({ sql: this.sql, log: this.log } = base);
  }

  /** The row's router; a stored rule that no longer compiles is an error every delivery faults on. */
  routerOf(row: WebhookRow): Router | SwitchboardError {
    let router = this.#routers.get(row);
    if (!router) {
      try {
        router = compileRouting(configOf(row));
      } catch (err) {
        if (!isSwitchboardError(err)) throw err;
        router = err;
      }
      this.#routers.set(row, router);
    }
    return router;
  }

  view(row: WebhookRow) {
    return { webhook_id: row.id, rules: row.routing_rules, params: row.routing_params, default_action: row.routing_default, target_queue: row.target_queue };
  }

  /** Checks and saves a rules write, then replays the saved rules over the latest events. */
  async set(owner: RoutingOwner, row: WebhookRow, input: unknown, by: Actor) {
    const config = await this.#checked(owner, row, input, by);
    const saved = await setWebhookRouting(this.sql, row.id, config);
    await this.webhooks.afterChange(row.id);
    audit(this.log, 'webhook.rules', by, { endpoint_id: row.endpoint_id, webhook_id: row.id, rules: config.rules.length });
    return { ...this.view(saved), dry_run: await this.#dryRun(saved, compileRouting(config), config) };
  }

  /** The same check and replay as a save, saving nothing. */
  async test(owner: RoutingOwner, row: WebhookRow, input: unknown, by: Actor) {
    const config = await this.#checked(owner, row, input, by);
    return { ...this.view({ ...row, routing_rules: config.rules, routing_params: config.params, routing_default: config.defaultAction }), dry_run: await this.#dryRun(row, compileRouting(config), config) };
  }

  /**
   * The configuration a write makes (omitted fields kept), compiled, with every queue in its
   * endpoint's scope and every fan-out target an active endpoint of the owner's human, named by
   * slug. A problem is invalid_argument naming the field (forbidden for an agent's own queue scope).
   */
  async #checked(owner: RoutingOwner, row: WebhookRow, input: unknown, by: Actor): Promise<RoutingConfig> {
    const config = applyRoutingUpdate(configOf(row), parseRoutingUpdate(input));
    compileRouting(config);
    for (const { field, queue, endpoints } of actionTargets(config)) {
      if (endpoints === null) {
        if (!owner.queues.includes(queue)) {
          throw new SwitchboardError(by.kind === 'agent' ? 'forbidden' : 'invalid_argument', `${field}.queue: "${queue}" is not one of endpoint ${owner.slug}'s queues (${owner.queues.join(', ')})`, { field: `${field}.queue` });
        }
        continue;
      }
      const humanId = owner.humanId;
      if (by.kind === 'agent' || humanId === undefined) throw new SwitchboardError('forbidden', `${field}.endpoints: only the endpoint's human may fan deliveries out to other endpoints`, { field: `${field}.endpoints` });
      for (const [j, ref] of endpoints.entries()) {
        const target = await resolveOwnEndpoint(this.sql, humanId, ref).catch(() => {
          throw invalidArgument(`${field}.endpoints.${j}`, `no endpoint "${ref}" of this webhook's owner`);
        });
        if (target.state !== 'active') throw invalidArgument(`${field}.endpoints.${j}`, `endpoint ${target.slug} is revoked`);
        if (!target.scope_queues.includes(queue)) {
          throw invalidArgument(`${field}.endpoints.${j}`, `"${queue}" is not one of endpoint ${target.slug}'s queues (${target.scope_queues.join(', ')})`);
        }
        endpoints[j] = target.slug;
      }
    }
    return config;
  }

  /** Replays `router` over the webhook's latest stored events. */
  async #dryRun(row: WebhookRow, router: Router, config: RoutingConfig): Promise<DryRunRow[]> {
    const events = await latestWebhookEvents(this.sql, row.id, DRY_RUN_EVENTS);
    return events.map((ev) => {
      const facts = replayFacts(row.source_type, ev);
      const decision = router.decide(buildEnvelope(facts, config.params));
      return {
        event_id: ev.id,
        event: ev.event_type,
        received_at: rfc3339(ev.received_at),
        routed: noTodoReason(row.source_type, ev.event_type, facts.payload) === null,
        would: wouldOf(decision, row),
        did: { disposition: ev.disposition, todos: ev.todos, trace: ev.routing },
      };
    });
  }
}

function wouldOf(d: Decision, row: WebhookRow): DryRunRow['would'] {
  if (d.fault) return { action: 'fault', queue: null, endpoints: [], trace: d.trace };
  if (d.action === null) return { action: 'queue', queue: row.target_queue, endpoints: [], trace: d.trace };
  if ('drop' in d.action) return { action: 'drop', queue: null, endpoints: [], trace: d.trace };
  return { action: d.trace.action, queue: d.action.queue, endpoints: d.action.endpoints ?? [], trace: d.trace };
}

/** A stored event as the envelope reads it: the body parsed again (a form's JSON from its field, else its todo's payload). */
function replayFacts(source: SourceType, ev: ReplayableEvent) {
  const body = ev.payload ?? Buffer.alloc(0);
  const form = isFormDelivery(source, ev.content_type ?? '') ? formPayload(body) : null;
  const decoded = decodeDelivery(source, ev.content_type ?? '', body, form);
  return {
    source: ev.source,
    event: ev.event_type,
    deliveryId: ev.external_id,
    trustMode: ev.trust_mode,
    verified: ev.verified,
    headers: ev.headers,
    payload: decoded.ok ? decoded.payload : ev.todo_payload,
  };
}


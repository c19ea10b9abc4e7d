import type { Sql } from '../db/connect.ts';
import { conflict } from '../domain/errors.ts';
import type { RoutingConfig } from '../domain/routing/rules.ts';
import type { EventDisposition } from './event-insert.ts';
import type { WebhookRow } from './webhooks.ts';

/** Saves a webhook's routing (the caller has compiled and checked it); the row as it is now. */
export async function setWebhookRouting(sql: Sql, webhookId: string, config: RoutingConfig): Promise<WebhookRow> {
  const [row] = await sql<WebhookRow[]>`
    update webhooks set routing_rules = ${sql.json(config.rules as never)}::jsonb, routing_params = ${sql.json(config.params as never)}::jsonb,
      routing_default = ${config.defaultAction === null ? null : sql.json(config.defaultAction as never)}::jsonb
    where id = ${webhookId} returning *`;
  if (!row) throw conflict('the webhook was deleted meanwhile');
  return row;
}

/** A stored event as a dry run replays it, with what it became then. */
export interface ReplayableEvent {
  id: string;
  source: string;
  event_type: string | null;
  external_id: string | null;
  trust_mode: string;
  verified: boolean;
  headers: Record<string, string>;
  /** The body as received (a form delivery's JSON is in its todo's payload). */
  payload: Buffer | null;
  content_type: string | null;
  received_at: Date;
  disposition: EventDisposition | null;
  routing: unknown;
  /** The todos it made: queue and endpoint slug. */
  todos: { queue: string; slug: string }[];
  /** The first todo's payload when the body is not JSON itself (a form delivery). */
  todo_payload: unknown;
}

/** The webhook's latest events, newest first (the dry run's input), with the todos each made. */
export async function latestWebhookEvents(sql: Sql, webhookId: string, limit: number): Promise<ReplayableEvent[]> {
  return [
    ...(await sql<ReplayableEvent[]>`
      select ev.id::text as id, ev.source, ev.event_type, ev.external_id, ev.trust_mode, ev.verified, ev.headers, ev.payload,
             ev.content_type, ev.received_at, ev.disposition, ev.routing,
             coalesce((select jsonb_agg(jsonb_build_object('queue', t.queue, 'slug', e.slug) order by t.created_at)
                       from todos t join endpoints e on e.id = t.endpoint_id where t.event_id = ev.id), '[]'::jsonb) as todos,
             (select t.payload from todos t where t.event_id = ev.id order by t.created_at limit 1) as todo_payload
      from events ev
      where ev.webhook_id = ${webhookId}
      order by ev.received_at desc, ev.id desc
      limit ${limit}`),
  ];
}

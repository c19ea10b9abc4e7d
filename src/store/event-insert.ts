import { arg, argsOf } from '../db/compiled.ts';
import type { Sql } from '../db/connect.ts';
import { endpointRevoked } from './endpoints.ts';
import type { TodoRow } from './todos/row.ts';
import { touchDelivery } from './webhooks.ts';

// The first half of every delivery's one statement, shared by a delivery that makes a todo and one
// that is only recorded (a ping): share-lock the endpoint (it must be active), claim the body's
// replay key when the delivery is signed, insert the event, and touch the webhook's last delivery.

export interface EventInput {
  source: string;
  family: 'webhook' | 'operator';
  eventType?: string | null;
  externalId?: string | null;
  trustMode: 'signed' | 'token' | 'open' | 'operator';
  verified: boolean;
  verifyDetail?: string | null;
  contentType?: string | null;
  headers?: Record<string, string>;
  payload?: Buffer | null;
  /** The webhook that received it, and the endpoint that owns that webhook (or was pushed to). */
  webhookId?: string | null;
  endpointId?: string | null;
  /**
   * A signed delivery's body SHA-256 and the start of its dedup window: an event of the same
   * webhook with the same body since then answers with the todo it made, whatever its state.
   */
  replay?: { bodySha256: Buffer; since: Date } | null;
}

/**
 * What varies the text of a delivery's statement: whether a webhook received it (its last delivery
 * is touched) and whether its signed body claims a replay key. Each shape is composed once.
 */
export interface EventShape {
  webhook: boolean;
  replay: boolean;
}

export const eventShape = (event: EventInput): EventShape => ({ webhook: !!event.webhookId, replay: !!(event.replay && event.webhookId) });

/** The name of a shape's compiled statement. */
export const shapeKey = (shape: EventShape): string => `${shape.webhook}:${shape.replay}`;

/** The values eventCtes' statement takes at each run (src/db/compiled.ts). */
export interface EventArgs extends Record<string, unknown> {
  endpoint: string;
  now: Date;
  ev_source: string;
  ev_family: string;
  ev_type: string | null;
  ev_external: string | null;
  ev_trust: string;
  ev_verified: boolean;
  ev_detail: string | null;
  ev_content_type: string | null;
  /** JSON text. */
  ev_headers: string;
  ev_body: Buffer | null;
  ev_size: number;
  ev_webhook: string | null;
  ev_endpoint: string;
  ev_sha: Buffer | null;
  replay_since: Date | null;
}

export function eventArgs(event: EventInput, endpointId: string, now: Date): EventArgs {
  const replay = eventShape(event).replay ? event.replay! : null;
  return {
    endpoint: endpointId,
    now,
    ev_source: event.source,
    ev_family: event.family,
    ev_type: event.eventType ?? null,
    ev_external: event.externalId ?? null,
    ev_trust: event.trustMode,
    ev_verified: event.verified,
    ev_detail: event.verifyDetail ?? null,
    ev_content_type: event.contentType ?? null,
    ev_headers: JSON.stringify(event.headers ?? {}),
    ev_body: event.payload ?? null,
    ev_size: event.payload?.length ?? 0,
    ev_webhook: event.webhookId ?? null,
    ev_endpoint: event.endpointId ?? endpointId,
    ev_sha: replay?.bodySha256 ?? null,
    replay_since: replay?.since ?? null,
  };
}

/**
 * The CTEs `ep` (the endpoint, if active), `ids` (the new event's id), `claimed_key` (a row when
 * this delivery may be written: always without a replay check, else when it won the body's key),
 * `new_event` (id, verified, trust_mode of the event written) and `touched`, written with the
 * EventArgs as `arg`s. A statement starts `with ${eventCtes(...)}`, reads them, and is compiled.
 *
 * The replay key is claimed with INSERT ... ON CONFLICT on (webhook, body): a second copy of a body
 * waits on the first's key until that commits, then finds it taken within the window and writes
 * nothing. A key older than the window is taken over, so that body is new again.
 */
export function eventCtes(sql: Sql, shape: EventShape) {
  const a = argsOf<EventArgs>();
  const now = sql`${a('now')}::timestamptz`;
  const webhook = sql`${a('ev_webhook')}::uuid`;
  const claimKey = shape.replay
    ? sql`
        insert into replay_keys (webhook_id, body_sha256, received_at, event_id)
        select ${webhook}, ${a('ev_sha')}::bytea, ${now}, ids.id from ids
        on conflict (webhook_id, body_sha256) do update set received_at = excluded.received_at, event_id = excluded.event_id
          where replay_keys.received_at < ${a('replay_since')}::timestamptz
        returning 1`
    : sql`select 1 from ids`;
  return sql`
    ep as (
      select id from endpoints where id = ${a('endpoint')}::uuid and state = 'active' for share
    ), ids as (
      select nextval(pg_get_serial_sequence('events', 'id')) as id from ep
    ), claimed_key as (${claimKey}
    ), new_event as (
      insert into events (id, source, family, event_type, external_id, trust_mode, verified, verify_detail,
                          content_type, headers, payload, payload_size, webhook_id, endpoint_id, received_at, body_sha256)
      overriding system value
      select ids.id, ${a('ev_source')}::text, ${a('ev_family')}::text, ${a('ev_type')}::text, ${a('ev_external')}::text,
             ${a('ev_trust')}::text, ${a('ev_verified')}::boolean, ${a('ev_detail')}::text, ${a('ev_content_type')}::text,
             ${a('ev_headers')}::text::jsonb, ${a('ev_body')}::bytea, ${a('ev_size')}::int,
             ${webhook}, ${a('ev_endpoint')}::uuid, ${now}, ${shape.replay ? sql`${a('ev_sha')}::bytea` : sql`null`}
      from ids where exists (select 1 from claimed_key)
      returning id, verified, trust_mode
    ), touched as (${shape.webhook ? touchDelivery(sql, a('ev_webhook'), arg<Date>('now')) : sql`select 1 where false`}
    )`;
}

/** The event that holds a body's replay key for this webhook, and the todo it made on the endpoint (null: none, or gone). */
export async function replayKeyHolder(
  sql: Sql,
  webhookId: string,
  bodySha256: Buffer,
  endpointId: string,
): Promise<{ eventId: string; todo: TodoRow | null } | null> {
  const [row] = await sql<(TodoRow & { key_event_id: string })[]>`
    select k.event_id::text as key_event_id, t.*, t.event_id::text as event_id
    from replay_keys k left join todos t on t.event_id = k.event_id and t.endpoint_id = ${endpointId}
    where k.webhook_id = ${webhookId} and k.body_sha256 = ${bodySha256}`;
  if (!row) return null;
  const { key_event_id: eventId, ...todo } = row;
  return { eventId, todo: todo.id ? (todo as TodoRow) : null };
}

/** A delivery's statement found its endpoint no longer active: the refusal revocation gives everywhere (the slug read only on this rare path). */
export async function endpointGone(sql: Sql, endpointId: string): Promise<never> {
  const [gone] = await sql<{ slug: string }[]>`select slug from endpoints where id = ${endpointId}`;
  throw endpointRevoked({ slug: gone?.slug ?? endpointId, state: 'revoked' });
}

/** After a delivery's event was written but its todo collapsed onto a live one: the event and its replay key go. */
export async function dropEvent(sql: Sql, eventId: string): Promise<void> {
  await sql`
    with k as (delete from replay_keys where event_id = ${eventId})
    delete from events where id = ${eventId}`;
}

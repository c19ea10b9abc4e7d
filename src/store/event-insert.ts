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
 * The CTEs `ep` (the endpoint, if active), `ids` (the new event's id), `claimed_key` (a row when
 * this delivery may be written: always without a replay check, else when it won the body's key),
 * `new_event` (id, verified, trust_mode of the event written) and `touched`. A statement starts
 * `with ${eventCtes(...)}` and reads them.
 *
 * The replay key is claimed with INSERT ... ON CONFLICT on (webhook, body): a second copy of a body
 * waits on the first's key until that commits, then finds it taken within the window and writes
 * nothing. A key older than the window is taken over, so that body is new again.
 */
export function eventCtes(sql: Sql, event: EventInput, endpointId: string, now: Date) {
  const replay = event.replay && event.webhookId ? event.replay : null;
  const claimKey = replay
    ? sql`
        insert into replay_keys (webhook_id, body_sha256, received_at, event_id)
        select ${event.webhookId!}, ${replay.bodySha256}, ${now}, ids.id from ids
        on conflict (webhook_id, body_sha256) do update set received_at = excluded.received_at, event_id = excluded.event_id
          where replay_keys.received_at < ${replay.since}
        returning 1`
    : sql`select 1 from ids`;
  return sql`
    ep as (
      select id from endpoints where id = ${endpointId} and state = 'active' for share
    ), ids as (
      select nextval(pg_get_serial_sequence('events', 'id')) as id from ep
    ), claimed_key as (${claimKey}
    ), new_event as (
      insert into events (id, source, family, event_type, external_id, trust_mode, verified, verify_detail,
                          content_type, headers, payload, payload_size, webhook_id, endpoint_id, received_at, body_sha256)
      overriding system value
      select ids.id, ${event.source}, ${event.family}, ${event.eventType ?? null}, ${event.externalId ?? null},
             ${event.trustMode}, ${event.verified}, ${event.verifyDetail ?? null}, ${event.contentType ?? null},
             ${sql.json(event.headers ?? {})}, ${event.payload ?? null}, ${event.payload?.length ?? 0},
             ${event.webhookId ?? null}, ${event.endpointId ?? endpointId}, ${now}, ${replay?.bodySha256 ?? null}
      from ids where exists (select 1 from claimed_key)
      returning id, verified, trust_mode
    ), touched as (${event.webhookId ? touchDelivery(sql, event.webhookId, now) : sql`select 1 where false`}
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

import { argsOf, compiledOnce, rowsBucket } from '../db/compiled.ts';
import type { Fragment, Sql } from '../db/connect.ts';
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
  /** What routing made of it (`routed`, `dropped`, `faulted`, `repeat`, `recorded`), and why (its trace). */
  disposition?: EventDisposition | null;
  routing?: unknown;
}

export type EventDisposition = 'routed' | 'dropped' | 'faulted' | 'repeat' | 'recorded';

/** The event half of one row of a delivery statement's `input` (eventRow): every value as JSON. */
export interface EventRow {
  /** The row's position in the statement (1-based): its answer comes back under the same n. */
  n: number;
  now: string;
  ev_source: string;
  ev_family: string;
  ev_type: string | null;
  ev_external: string | null;
  ev_trust: string;
  ev_verified: boolean;
  ev_detail: string | null;
  ev_content_type: string | null;
  ev_headers: Record<string, string>;
  /** The raw body as bytea's hex input (`\x...`), as the driver would send a Buffer. */
  ev_body: string | null;
  ev_size: number;
  ev_webhook: string | null;
  ev_endpoint: string;
  /** The signed body's SHA-256 as bytea hex input: the replay key it claims (null: claims none). */
  ev_sha: string | null;
  ev_disposition: string | null;
  ev_routing: unknown;
}

const byteaInput = (b: Buffer): string => `\\x${b.toString('hex')}`;

export function eventRow(n: number, event: EventInput, endpointId: string, now: Date): EventRow {
  const replay = event.replay && event.webhookId ? event.replay : null;
  return {
    n,
    now: now.toISOString(),
    ev_source: event.source,
    ev_family: event.family,
    ev_type: event.eventType ?? null,
    ev_external: event.externalId ?? null,
    ev_trust: event.trustMode,
    ev_verified: event.verified,
    ev_detail: event.verifyDetail ?? null,
    ev_content_type: event.contentType ?? null,
    ev_headers: event.headers ?? {},
    ev_body: event.payload ? byteaInput(event.payload) : null,
    ev_size: event.payload?.length ?? 0,
    ev_webhook: event.webhookId ?? null,
    ev_endpoint: event.endpointId ?? endpointId,
    ev_sha: replay ? byteaInput(replay.bodySha256) : null,
    ev_disposition: event.disposition ?? null,
    ev_routing: event.routing ?? null,
  };
}

/**
 * How far back a body counts as already received, in ms: the same for every row of a statement
 * (its rows are batched by it). A delivery that claims no replay key has none (0).
 */
export const replayWindowMs = (event: EventInput, now: Date): number =>
  event.replay && event.webhookId ? now.getTime() - event.replay.since.getTime() : 0;

/** The values every delivery statement takes: its endpoint, its rows (as JSON text) and its replay window. */
export interface DeliveryArgs extends Record<string, unknown> {
  endpoint: string;
  /** JSON text: an array of rows (EventRow and the statement's own columns). */
  rows: string;
  replay_window_ms: number;
}

/** A delivery statement's values for its rows, all for `endpointId` within one replay window. */
export const deliveryArgs = (endpointId: string, replayWindow: number, rows: readonly EventRow[]): DeliveryArgs => ({
  endpoint: endpointId,
  rows: JSON.stringify(rows),
  replay_window_ms: replayWindow,
});

/**
 * The CTEs `input` (the rows, with `extraColumns` after the event's), `ep` (the endpoint, if
 * active), `ids` (each row's new event id), `claimed_key` (the rows' replay keys won), `new_event`
 * (id, verified, trust_mode of each event written) and `touched`, written with DeliveryArgs as
 * `arg`s. A statement starts `with ${eventCtes(...)}`, reads them, and is compiled. Every row is
 * for the statement's one endpoint.
 *
 * The rows come as one JSON array rather than a parameter per column: the driver types an array
 * parameter by its first element, and JSON carries each row's headers and payload as they are.
 *
 * A row without a replay key is always written. One with a key claims it with INSERT ... ON
 * CONFLICT on (webhook, body): a second copy of a body waits on the first's key until that
 * commits, then finds it taken within the window and writes nothing. A key older than the window
 * is taken over, so that body is new again. No two rows of one statement carry the same key
 * (DeliveryBatches keeps them apart): ON CONFLICT cannot update one row twice.
 */
export function eventCtes(sql: Sql, rowCount: number, extraColumns?: Fragment) {
  const a = argsOf<DeliveryArgs>();
  return sql`
    input as materialized (
      select * from jsonb_to_recordset(${a('rows')}::text::jsonb) as r(
        n int, now timestamptz, ev_source text, ev_family text, ev_type text, ev_external text, ev_trust text,
        ev_verified boolean, ev_detail text, ev_content_type text, ev_headers jsonb, ev_body bytea, ev_size int,
        ev_webhook uuid, ev_endpoint uuid, ev_sha bytea, ev_disposition text, ev_routing jsonb${extraColumns ? sql`, ${extraColumns}` : sql``})
      -- The planner takes a set-returning function for 100 rows; a literal limit tells it how few.
      limit ${sql.unsafe(String(rowsBucket(rowCount)))}
    ), ep as (
      select id from endpoints where id = ${a('endpoint')}::uuid and state = 'active' for share
    ), ids as materialized (
      select i.n, nextval(pg_get_serial_sequence('events', 'id')) as id from input i, ep order by i.n
    ), claimed_key as (
      insert into replay_keys (webhook_id, body_sha256, received_at, event_id)
      select i.ev_webhook, i.ev_sha, i.now, ids.id from ids join input i using (n) where i.ev_sha is not null
      on conflict (webhook_id, body_sha256) do update set received_at = excluded.received_at, event_id = excluded.event_id
        where replay_keys.received_at < excluded.received_at - ${a('replay_window_ms')}::bigint * interval '1 millisecond'
      returning event_id
    ), new_event as (
      insert into events (id, source, family, event_type, external_id, trust_mode, verified, verify_detail,
                          content_type, headers, payload, payload_size, webhook_id, endpoint_id, received_at, body_sha256,
                          disposition, routing)
      overriding system value
      select ids.id, i.ev_source, i.ev_family, i.ev_type, i.ev_external, i.ev_trust, i.ev_verified, i.ev_detail,
             i.ev_content_type, i.ev_headers, i.ev_body, i.ev_size, i.ev_webhook, i.ev_endpoint, i.now, i.ev_sha,
             i.ev_disposition, i.ev_routing
      from ids join input i using (n)
      where i.ev_sha is null or ids.id in (select event_id from claimed_key)
      order by ids.n
      returning id, verified, trust_mode
    ), touched as (${touchDelivery(sql, sql`select i.ev_webhook from new_event ne join ids using (id) join input i using (n)`, sql`(select max(now) from input)`)}
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

/** A `once` delivery whose subject already has a live todo: its event stays, recorded as a repeat. */
export async function markEventRepeat(sql: Sql, eventId: string): Promise<void> {
  await sql`update events set disposition = 'repeat' where id = ${eventId}`;
}

/** After a delivery's event was written but its todo collapsed onto a live one: the event and its replay key go. */
export async function dropEvent(sql: Sql, eventId: string): Promise<void> {
  await sql`
    with k as (delete from replay_keys where event_id = ${eventId})
    delete from events where id = ${eventId}`;
}

/**
 * A delivery's event alone, in one statement (a ping's record, a dropped or faulted delivery, a
 * fan-out's event before its todos): whether the endpoint was active, and the new event's id
 * (null: a replay of a body this webhook already has).
 */
export const eventOnlyStatement = compiledOnce<DeliveryArgs>(
  (sql) => sql`
    with ${eventCtes(sql, 1)}
    select exists (select 1 from ep) as active, (select id::text from new_event) as new_event_id`,
);

import type { Sql } from '../../db/connect.ts';
import { conflict } from '../../domain/errors.ts';
import { argsOf, compiledPer, rowsBucket } from '../../db/compiled.ts';
import { todoReadyNotifyPerRow } from '../channels.ts';
import { deliveryArgs, dropEvent, endpointGone, markEventRepeat, eventCtes, eventRow, replayKeyHolder, replayWindowMs, type DeliveryArgs, type EventInput, type EventRow } from '../event-insert.ts';
import { liveKey, pushEligible } from './predicates.ts';
import { newTodoId, TODO_ROW_COLUMNS, type TodoRow } from './row.ts';

export type { EventInput };

export interface NewTodo {
  endpointId: string;
  queue: string;
  title: string;
  source?: string | null;
  kind?: string | null;
  payload?: unknown;
  /**
   * The payload is the delivery's body read as JSON (bodyIsStoredPayload said the bytes may be):
   * PostgreSQL reads it from the event's body, so the statement carries the bytes once and the
   * payload keeps the body's numbers exactly as sent. `payload` is then what the caller parsed,
   * for its own use.
   */
  payloadIsBody?: boolean;
  idempotencyKey?: string | null;
  maxAttempts?: number;
  /** Higher is claimed first; default 0. */
  priority?: number;
  /** Not claimable, nor rung, before this time (a delayed todo); absent or null: now. */
  runAt?: Date | null;
  synthetic?: boolean;
  /** The routing trace that made it (domain/routing/route.ts). */
  routing?: unknown;
  /**
   * A live todo with the same key makes this delivery a repeat (a `once` rule): its event is kept
   * as disposition `repeat`, where a plain duplicate's event is dropped.
   */
  repeatKeepsEvent?: boolean;
}

/** One delivery for insertDeliveries: the event as received, the todo it mints, and when. */
export interface ProducedTodo {
  event: EventInput;
  todo: NewTodo;
  now: Date;
}

export interface Inserted {
  todo: TodoRow;
  created: boolean;
  eventId: string | null;
  /** The todo passed the sender gate (verified or token-trusted, due, a real queue): the caller rings for it. */
  pushEligible: boolean;
}

/**
 * Records one producer delivery and the todo it mints in one statement: the endpoint share-locked
 * and active (a revocation that committed first leaves nothing written, one that comes later waits
 * and dead-letters the todo), the signed body's replay key claimed, the event and the todo
 * inserted, the webhook's last delivery touched, and, when the todo passes the sender gate, the
 * `todo_ready` wakeup (delivered at commit) unless `instanceId` names the pushing instance and no
 * other instance is registered: a NOTIFY serializes the commits of every transaction that sends
 * one, and the pusher hears of its own todo directly (TodoService's fan-out). An instance that
 * registers later catches up on what became ready meanwhile (its LISTEN catch-up, the stream
 * digest, the long-poll's look again). A body this webhook already received within the
 * window writes nothing and answers with the todo it made; an idempotency key that matches a live
 * todo of the endpoint answers with that todo (created=false).
 */
export async function insertEventAndTodo(
  sql: Sql,
  event: EventInput,
  todo: NewTodo,
  now: Date,
  instanceId: string | null = null,
): Promise<Inserted> {
  const [inserted] = await insertDeliveries(sql, [{ event, todo, now }], instanceId);
  return inserted!;
}

/**
 * insertEventAndTodo for several deliveries in one statement (DeliveryBatches): each row is
 * written, refused or collapsed onto a live todo exactly as it would be alone. They must share one
 * endpoint and one replay window, and no two may carry the same replay key or idempotency key
 * (one statement cannot write a unique key twice). The statement's failure rejects the returned
 * promise; each delivery's own outcome (a replay whose todo is gone, the endpoint revoked) is its
 * own promise's.
 */
export async function insertDeliveries(sql: Sql, deliveries: readonly ProducedTodo[], instanceId: string | null = null): Promise<Promise<Inserted>[]> {
  const first = deliveries[0]!;
  const endpoint = first.todo.endpointId;
  const window = replayWindowMs(first.event, first.now);
  const rows = deliveries.map(({ event, todo, now }, i): InsertRow => {
    if (todo.endpointId !== endpoint || replayWindowMs(event, now) !== window) {
      throw new Error('insertDeliveries: the deliveries of one statement share an endpoint and a replay window');
    }
    const fromBody = todo.payloadIsBody === true && event.payload != null;
    return {
      ...eventRow(i + 1, event, endpoint, now),
      todo_id: newTodoId(),
      queue: todo.queue,
      source: todo.source ?? null,
      kind: todo.kind ?? null,
      title: todo.title,
      payload: fromBody ? null : (todo.payload ?? {}),
      payload_is_body: fromBody,
      key: todo.idempotencyKey ? todo.idempotencyKey : null,
      max_attempts: todo.maxAttempts ?? 5,
      priority: todo.priority ?? 0,
      run_at: todo.runAt ? todo.runAt.toISOString() : null,
      synthetic: todo.synthetic ?? false,
      routing: todo.routing ?? null,
    };
  });
  const args: InsertArgs = { ...deliveryArgs(endpoint, window, rows), instance: instanceId };
  const answers = await insertStatement(sql, rows.length).run<TodoRow & { n: number; active: boolean; new_event_id: string | null; push_eligible: boolean; woken: number }>(sql, args);
  const byRow = new Map(answers.map((a) => [a.n, a]));
  return deliveries.map((d, i) => settle(sql, d, rows[i]!, byRow.get(i + 1)!));
}

/** One delivery's outcome from its row of the statement's answer. */
async function settle(
  sql: Sql,
  { event, todo }: ProducedTodo,
  { key, payload_is_body: fromBody }: InsertRow,
  answer: TodoRow & { n: number; active: boolean; new_event_id: string | null; push_eligible: boolean; woken: number },
): Promise<Inserted> {
  const { n: _n, active, new_event_id: newEventId, push_eligible: eligible, woken: _woken, ...fields } = answer;
  if (!active) return endpointGone(sql, todo.endpointId);
  if (newEventId === null) {
    // A replay: this body already came to this webhook within the window.
    const prior = (await replayKeyHolder(sql, event.webhookId!, event.replay!.bodySha256, todo.endpointId))?.todo;
    if (!prior) throw conflict('this body was already delivered to this webhook; the todo it made is gone');
    return { todo: prior, created: false, eventId: prior.event_id, pushEligible: false };
  }
  if (fields.id) {
    const row = (fromBody ? { ...fields, payload: todo.payload } : fields) as TodoRow;
    return { todo: row, created: true, eventId: newEventId, pushEligible: eligible };
  }
  // A duplicate by key changes nothing: drop the event (and the body's key) just written, or keep
  // it as a repeat when the key is a `once` rule's subject.
  if (todo.repeatKeepsEvent) await markEventRepeat(sql, newEventId);
  else await dropEvent(sql, newEventId);
  const [existing] = await sql<TodoRow[]>`
    select *, event_id::text as event_id from todos
    where endpoint_id = ${todo.endpointId} and idempotency_key = ${key} and ${liveKey(sql)}`;
  if (!existing) throw conflict('a concurrent delivery with the same key is still being written; retry');
  // A repeat's own event is the one kept; a plain duplicate answers with the event of the todo it matched.
  return { todo: existing, created: false, eventId: todo.repeatKeepsEvent ? newEventId : existing.event_id, pushEligible: false };
}

/** A row of the delivery statement's input: the event's columns, then the todo's. */
interface InsertRow extends EventRow {
  todo_id: string;
  queue: string;
  source: string | null;
  kind: string | null;
  title: string;
  payload: unknown;
  payload_is_body: boolean;
  key: string | null;
  max_attempts: number;
  priority: number;
  run_at: string | null;
  synthetic: boolean;
  routing: unknown;
}

interface InsertArgs extends DeliveryArgs {
  /** The pushing instance (its directory id), or null to wake every instance whoever is registered. */
  instance: string | null;
}

/** The delivery statement for each number of rows, composed once (src/db/compiled.ts). */
const insertStatement = compiledPer<number, InsertArgs>((rowCount) => rowsBucket(rowCount), (sql, rowCount) => {
  const a = argsOf<InsertArgs>();
  const todoColumns = sql`
    todo_id text, queue text, source text, kind text, title text, payload jsonb, payload_is_body boolean, key text,
    max_attempts int, priority int, run_at timestamptz, synthetic boolean, routing jsonb`;
  return sql`
    with ${eventCtes(sql, rowCount, todoColumns)}, t as (
      insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, idempotency_key,
                         max_attempts, priority, run_at, synthetic, routing, created_at, updated_at)
      select i.todo_id, ${a('endpoint')}::uuid, i.queue, i.source, i.kind, i.title,
             case when i.payload_is_body then convert_from(i.ev_body, 'UTF8')::jsonb else i.payload end, ne.id, i.key,
             i.max_attempts, i.priority, i.run_at, i.synthetic, i.routing, i.now, i.now
      from new_event ne join ids using (id) join input i using (n)
      order by i.n
      on conflict (endpoint_id, idempotency_key) where ${liveKey(sql)} do nothing
      returning *
    ), eligible as materialized (
      select t.id, t.endpoint_id, t.queue from t where ${pushEligible(sql, 'new_event')}
    ), woken as materialized (
      select ${todoReadyNotifyPerRow(sql, 'endpoint_id', 'queue')} from eligible
      where ${a('instance')}::text is null or exists (select 1 from instances i where i.id <> ${a('instance')}::text)
    )
    select i.n, exists (select 1 from ep) as active, ne.id::text as new_event_id, e.id is not null as push_eligible,
           -- Read so that the notify runs: PostgreSQL skips a plain SELECT CTE nothing reads.
           (select count(*) from woken)::int as woken,
           ${sql.unsafe(TODO_ROW_COLUMNS.filter((c) => c !== 'payload' && c !== 'event_id').map((c) => `t.${c}`).join(', '))},
           -- A payload read from the body is not sent back: the caller has its own parse of those bytes.
           case when i.payload_is_body then null else t.payload end as payload,
           t.event_id::text as event_id
    from input i
    left join ids on ids.n = i.n
    left join new_event ne on ne.id = ids.id
    left join t on t.event_id = ne.id
    left join eligible e on e.id = t.id
    order by i.n`;
});

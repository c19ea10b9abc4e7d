import type { Sql } from '../../db/connect.ts';
import { conflict } from '../../domain/errors.ts';
import { argsOf, compiledPer } from '../../db/compiled.ts';
import { encodePayload, notifyEncoded } from '../channels.ts';
import { dropEvent, endpointGone, eventArgs, eventCtes, eventShape, replayKeyHolder, shapeKey, type EventArgs, type EventInput, type EventShape } from '../event-insert.ts';
import { liveKey, pushEligible } from './predicates.ts';
import { newTodoId, type TodoRow } from './row.ts';

export type { EventInput };

export interface NewTodo {
  endpointId: string;
  queue: string;
  title: string;
  source?: string | null;
  kind?: string | null;
  payload?: unknown;
  idempotencyKey?: string | null;
  maxAttempts?: number;
  /** Higher is claimed first; default 0. */
  priority?: number;
  /** Not claimable, nor rung, before this time (a delayed todo); absent or null: now. */
  runAt?: Date | null;
  synthetic?: boolean;
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
): Promise<{ todo: TodoRow; created: boolean; eventId: string | null; pushEligible: boolean }> {
  const key = todo.idempotencyKey ? todo.idempotencyKey : null;
  const args: InsertArgs = {
    ...eventArgs(event, todo.endpointId, now),
    todo_id: newTodoId(),
    queue: todo.queue,
    source: todo.source ?? null,
    kind: todo.kind ?? null,
    title: todo.title,
    // As JSON text: the driver types a parameter by its value, and a top-level array of booleans would be sent as one.
    payload: JSON.stringify(todo.payload ?? {}),
    key,
    max_attempts: todo.maxAttempts ?? 5,
    priority: todo.priority ?? 0,
    run_at: todo.runAt ?? null,
    synthetic: todo.synthetic ?? false,
    ready: encodePayload('todo_ready', { endpointId: todo.endpointId, queue: todo.queue }),
    instance: instanceId,
  };
  const [row] = await insertStatement(sql, eventShape(event)).run<TodoRow & { active: boolean; new_event_id: string | null; push_eligible: number; woken: number }>(sql, args);
  const { active, new_event_id: newEventId, push_eligible: eligible, woken: _woken, ...fields } = row!;
  if (!active) return endpointGone(sql, todo.endpointId);
  if (newEventId === null) {
    // A replay: this body already came to this webhook within the window.
    const prior = (await replayKeyHolder(sql, event.webhookId!, event.replay!.bodySha256, todo.endpointId))?.todo;
    if (!prior) throw conflict('this body was already delivered to this webhook; the todo it made is gone');
    return { todo: prior, created: false, eventId: prior.event_id, pushEligible: false };
  }
  if (fields.id) return { todo: fields as TodoRow, created: true, eventId: newEventId, pushEligible: eligible > 0 };
  // A duplicate by key changes nothing: drop the event (and the body's key) just written.
  await dropEvent(sql, newEventId);
  const [existing] = await sql<TodoRow[]>`
    select *, event_id::text as event_id from todos
    where endpoint_id = ${todo.endpointId} and idempotency_key = ${key} and ${liveKey(sql)}`;
  if (!existing) throw conflict('a concurrent delivery with the same key is still being written; retry');
  return { todo: existing, created: false, eventId: existing.event_id, pushEligible: false };
}

interface InsertArgs extends EventArgs {
  todo_id: string;
  queue: string;
  source: string | null;
  kind: string | null;
  title: string;
  /** JSON text. */
  payload: string;
  key: string | null;
  max_attempts: number;
  priority: number;
  run_at: Date | null;
  synthetic: boolean;
  /** The todo_ready payload (channels.ts encodes it). */
  ready: string;
  /** The pushing instance (its directory id), or null to wake every instance whoever is registered. */
  instance: string | null;
}

/** The delivery statement for each event shape, composed once (src/db/compiled.ts). */
const insertStatement = compiledPer<EventShape, InsertArgs>(shapeKey, (sql, shape) => {
  const a = argsOf<InsertArgs>();
  return sql`
    with ${eventCtes(sql, shape)}, t as (
      insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, idempotency_key,
                         max_attempts, priority, run_at, synthetic, created_at, updated_at)
      select ${a('todo_id')}::text, ${a('endpoint')}::uuid, ${a('queue')}::text, ${a('source')}::text, ${a('kind')}::text,
             ${a('title')}::text, ${a('payload')}::text::jsonb, new_event.id, ${a('key')}::text,
             ${a('max_attempts')}::int, ${a('priority')}::int, ${a('run_at')}::timestamptz, ${a('synthetic')}::boolean,
             ${a('now')}::timestamptz, ${a('now')}::timestamptz
      from new_event
      on conflict (endpoint_id, idempotency_key) where ${liveKey(sql)} do nothing
      returning *
    ), eligible as materialized (
      select 1 from t where ${pushEligible(sql, 'new_event')}
    ), woken as materialized (
      select ${notifyEncoded(sql, 'todo_ready', a('ready'))} from eligible
      where ${a('instance')}::text is null or exists (select 1 from instances i where i.id <> ${a('instance')}::text)
    )
    select exists (select 1 from ep) as active, (select id::text from new_event) as new_event_id,
           -- Read so that the notify runs: PostgreSQL skips a plain SELECT CTE nothing reads.
           (select count(*) from eligible)::int as push_eligible, (select count(*) from woken)::int as woken,
           t.*, t.event_id::text as event_id
    from (select 1) one left join t on true`;
});

import type { Sql } from '../../db/connect.ts';
import { conflict } from '../../domain/errors.ts';
import { notifyExpression } from '../channels.ts';
import { dropEvent, endpointGone, eventCtes, replayKeyHolder, type EventInput } from '../event-insert.ts';
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
 * `todo_ready` wakeup (delivered at commit). A body this webhook already received within the
 * window writes nothing and answers with the todo it made; an idempotency key that matches a live
 * todo of the endpoint answers with that todo (created=false).
 */
export async function insertEventAndTodo(
  sql: Sql,
  event: EventInput,
  todo: NewTodo,
  now: Date,
): Promise<{ todo: TodoRow; created: boolean; eventId: string | null; pushEligible: boolean }> {
  const key = todo.idempotencyKey ? todo.idempotencyKey : null;
  const ready = notifyExpression(sql, 'todo_ready', { endpointId: todo.endpointId, queue: todo.queue });
  const [row] = await sql<(TodoRow & { active: boolean; new_event_id: string | null; push_eligible: number })[]>`
    with ${eventCtes(sql, event, todo.endpointId, now)}, t as (
      insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, idempotency_key,
                         max_attempts, priority, run_at, synthetic, created_at, updated_at)
      select ${newTodoId()}, ${todo.endpointId}, ${todo.queue}, ${todo.source ?? null}, ${todo.kind ?? null},
             ${todo.title}, ${sql.json((todo.payload ?? {}) as never)}, new_event.id, ${key},
             ${todo.maxAttempts ?? 5}, ${todo.priority ?? 0}, ${todo.runAt ?? null}, ${todo.synthetic ?? false}, ${now}, ${now}
      from new_event
      on conflict (endpoint_id, idempotency_key) where ${liveKey(sql)} do nothing
      returning *
    ), ready as materialized (
      select ${ready} from t where ${pushEligible(sql, 'new_event')}
    )
    select exists (select 1 from ep) as active, (select id::text from new_event) as new_event_id,
           (select count(*) from ready)::int as push_eligible, t.*, t.event_id::text as event_id
    from (select 1) one left join t on true`;
  const { active, new_event_id: newEventId, push_eligible: eligible, ...fields } = row!;
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

import type { Sql, TxSql } from '../../db/connect.ts';
import { conflict } from '../../domain/errors.ts';
import { notifyExpression } from '../channels.ts';
import { endpointRevoked } from '../endpoints.ts';
import { isPushEligible, liveKey } from './predicates.ts';
import { newTodoId, type TodoRow } from './row.ts';

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
 * Records one producer delivery and the todo it mints, in one transaction. When the idempotency
 * key matches a live todo of the same endpoint, nothing is written and that todo is returned
 * with created=false.
 */
export async function insertEventAndTodo(
  sql: Sql,
  event: EventInput,
  todo: NewTodo,
  now: Date,
): Promise<{ todo: TodoRow; created: boolean; eventId: string | null; pushEligible: boolean }> {
  return sql.begin(async (tx) => {
    const key = todo.idempotencyKey ? todo.idempotencyKey : null;
    if (event.replay && event.webhookId) {
      const prior = await priorDelivery(tx, event.webhookId, todo.endpointId, event.replay);
      if (prior) return { todo: prior, created: false, eventId: prior.event_id, pushEligible: false };
    }
    // Event and todo in one statement; the todo may collapse onto a live one with the same key.
    // The endpoint is share-locked and must be active: a revocation that committed first leaves
    // nothing written, and one that comes later waits for this push and dead-letters its todo.
    const [row] = await tx<(TodoRow & { new_event_id: string })[]>`
      with ep as (
        select id from endpoints where id = ${todo.endpointId} and state = 'active' for share
      ), ev as (
        insert into events (source, family, event_type, external_id, trust_mode, verified, verify_detail,
                            content_type, headers, payload, payload_size, webhook_id, endpoint_id, received_at, body_sha256)
        select ${event.source}, ${event.family}, ${event.eventType ?? null}, ${event.externalId ?? null},
               ${event.trustMode}, ${event.verified}, ${event.verifyDetail ?? null}, ${event.contentType ?? null},
               ${tx.json(event.headers ?? {})}, ${event.payload ?? null}, ${event.payload?.length ?? 0},
               ${event.webhookId ?? null}, ${event.endpointId ?? todo.endpointId}, ${now}, ${event.replay?.bodySha256 ?? null}
        from ep
        returning id
      ), t as (
        insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, idempotency_key,
                           max_attempts, priority, run_at, synthetic, created_at, updated_at)
        select ${newTodoId()}, ${todo.endpointId}, ${todo.queue}, ${todo.source ?? null}, ${todo.kind ?? null},
               ${todo.title}, ${tx.json((todo.payload ?? {}) as never)}, ev.id, ${key},
               ${todo.maxAttempts ?? 5}, ${todo.priority ?? 0}, ${todo.runAt ?? null}, ${todo.synthetic ?? false}, ${now}, ${now}
        from ev
        on conflict (endpoint_id, idempotency_key) where ${liveKey(tx)} do nothing
        returning *
      )
      select ev.id::text as new_event_id, t.*, t.event_id::text as event_id from ev left join t on true`;
    if (!row) {
      // Only on this rare path: the slug, for the same refusal revocation gives everywhere else.
      const [gone] = await tx<{ slug: string }[]>`select slug from endpoints where id = ${todo.endpointId}`;
      throw endpointRevoked({ slug: gone?.slug ?? todo.endpointId, state: 'revoked' });
    }
    const { new_event_id: newEventId, ...fields } = row;
    const ev = { id: newEventId };
    const inserted = fields.id ? (fields as TodoRow) : undefined;
    if (inserted) {
      // The sender gate and, when it passes, the wakeup for other instances (delivered at commit).
      const ready = notifyExpression(tx, 'todo_ready', { endpointId: inserted.endpoint_id, queue: inserted.queue });
      const [gate] = await tx<{ eligible: boolean }[]>`
        select ${isPushEligible(tx, inserted.id)} as eligible,
               case when ${isPushEligible(tx, inserted.id)} then ${ready} end`;
      return { todo: inserted, created: true, eventId: ev.id, pushEligible: gate!.eligible };
    }
    // A duplicate delivery changes nothing: drop the event row we just wrote.
    await tx`delete from events where id = ${ev.id}`;
    const [existing] = await tx<TodoRow[]>`
      select *, event_id::text as event_id from todos
      where endpoint_id = ${todo.endpointId} and idempotency_key = ${key} and ${liveKey(tx)}`;
    if (!existing) throw conflict('a concurrent delivery with the same key is still being written; retry');
    return { todo: existing, created: false, eventId: existing.event_id, pushEligible: false };
  });
}

/**
 * The todo an earlier event of this webhook with the same body made (since `since`), or null.
 * Deliveries of one body to one webhook serialize on an advisory lock held to commit, so two
 * concurrent replays cannot both miss each other.
 */
async function priorDelivery(tx: TxSql, webhookId: string, endpointId: string, r: { bodySha256: Buffer; since: Date }): Promise<TodoRow | null> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`replay:${webhookId}:${r.bodySha256.toString('hex')}`}, 0))`;
  const [prior] = await tx<TodoRow[]>`
    select t.*, t.event_id::text as event_id
    from events ev left join todos t on t.event_id = ev.id and t.endpoint_id = ${endpointId}
    where ev.webhook_id = ${webhookId} and ev.body_sha256 = ${r.bodySha256} and ev.received_at >= ${r.since}
    order by ev.received_at, ev.id limit 1`;
  if (!prior) return null;
  if (!prior.id) throw conflict('this body was already delivered to this webhook; the todo it made is gone');
  return prior;
}

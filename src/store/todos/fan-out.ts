import type { Sql, TxSql } from '../../db/connect.ts';
import { todoReadyNotifyPerRow } from '../channels.ts';
import { deliveryArgs, endpointGone, eventOnlyStatement, eventRow, replayKeyHolder, replayWindowMs, type EventInput } from '../event-insert.ts';
import { liveKey, pushEligible } from './predicates.ts';
import { newTodoId, type TodoRow } from './row.ts';

// A routing rule's fan-out: one delivery, one event on the webhook's endpoint, and one todo on each
// target endpoint of the same human, all in one transaction. A target that is not the owner's
// human's, is revoked, or has not the queue in its scope is skipped and said so (the rule was
// checked at save; this is what changed since). Each todo is idempotent per target (its key is the
// target's own), so a redelivery makes none; `todo_ready` goes out at commit for each new one.

export interface FanOutTodo {
  /** The target endpoint's slug. */
  slug: string;
  queue: string;
  title: string;
  source: string;
  kind: string | null;
  /** The todo's payload is the event's body, read as JSON by PostgreSQL (as for a single push). */
  payloadIsBody: boolean;
  payload: unknown;
  /** The idempotency key, unique among the target's live todos (`once` keys repeat on a subject). */
  key: string;
  routing: unknown;
}

export type FanOutSkip = 'not_found' | 'revoked' | 'out_of_scope';

export interface FanOutOutcome {
  slug: string;
  /** The todo made, or the live one the key matched; null when the target was skipped. */
  todo: TodoRow | null;
  created: boolean;
  pushEligible: boolean;
  skipped: FanOutSkip | null;
}

export interface FannedOut {
  /** The event written, or (a replay of a signed body) the one that holds it. */
  eventId: string;
  /** False when the event was a replay: nothing new was written and `todos` are what it made then. */
  created: boolean;
  todos: FanOutOutcome[];
}

/**
 * Writes the event (owned by `owner`'s endpoint, which must be active) and one todo per target in
 * one transaction. The targets must belong to `humanId`: another human's endpoint is `not_found`,
 * whatever its slug.
 */
export async function insertFanOut(sql: Sql, event: EventInput, owner: { endpointId: string; humanId: string }, targets: readonly FanOutTodo[], now: Date): Promise<FannedOut> {
  return sql.begin(async (tx) => {
    const args = deliveryArgs(owner.endpointId, replayWindowMs(event, now), [eventRow(1, event, owner.endpointId, now)]);
    // Composed against the pool (the statement text is the same), run in the transaction.
    const [row] = await eventOnlyStatement(sql).run<{ active: boolean; new_event_id: string | null }>(tx, args);
    if (!row!.active) return endpointGone(sql, owner.endpointId);
    if (row!.new_event_id === null) {
      const holder = await replayKeyHolder(tx as unknown as Sql, event.webhookId!, event.replay!.bodySha256, owner.endpointId);
      const eventId = holder?.eventId ?? '';
      const made = await tx<(TodoRow & { slug: string })[]>`
        select t.*, t.event_id::text as event_id, e.slug from todos t join endpoints e on e.id = t.endpoint_id where t.event_id = ${eventId}::bigint`;
      return { eventId, created: false, todos: made.map(({ slug, ...t }) => ({ slug, todo: t as TodoRow, created: false, pushEligible: false, skipped: null })) };
    }
    const eventId = row!.new_event_id;
    const todos: FanOutOutcome[] = [];
    for (const t of targets) todos.push(await insertOne(tx, eventId, owner.humanId, t, now));
    return { eventId, created: true, todos };
  });
}

async function insertOne(tx: TxSql, eventId: string, humanId: string, t: FanOutTodo, now: Date): Promise<FanOutOutcome> {
  const [target] = await tx<{ id: string; state: string; in_scope: boolean }[]>`
    select e.id, e.state, ${t.queue} = any(e.scope_queues) as in_scope
    from endpoints e join agents a on a.id = e.agent_id
    where e.slug = ${t.slug} and a.owner_human_id = ${humanId}
    for share of e`;
  const skip = (skipped: FanOutSkip): FanOutOutcome => ({ slug: t.slug, todo: null, created: false, pushEligible: false, skipped });
  if (!target) return skip('not_found');
  if (target.state !== 'active') return skip('revoked');
  if (!target.in_scope) return skip('out_of_scope');
  const [made] = await tx<(TodoRow & { eligible: boolean })[]>`
    with t as (
      insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, idempotency_key, routing, created_at, updated_at)
      select ${newTodoId()}, ${target.id}::uuid, ${t.queue}, ${t.source}, ${t.kind}, ${t.title},
             ${t.payloadIsBody ? tx`(select convert_from(payload, 'UTF8')::jsonb from events where id = ${eventId}::bigint)` : tx`${tx.json(t.payload as never)}::jsonb`},
             ${eventId}::bigint, ${t.key}, ${tx.json(t.routing as never)}::jsonb, ${now}, ${now}
      on conflict (endpoint_id, idempotency_key) where ${liveKey(tx)} do nothing
      returning *
    ), eligible as materialized (
      select t.id, t.endpoint_id, t.queue from t where ${pushEligible(tx)}
    ), woken as materialized (
      select ${todoReadyNotifyPerRow(tx, 'endpoint_id', 'queue')} from eligible
    )
    -- woken is read so that the notify runs: PostgreSQL skips a SELECT CTE nothing reads.
    select t.*, t.event_id::text as event_id, exists (select 1 from eligible) as eligible, (select count(*) from woken)::int as woken
    from t`;
  if (made) {
    const { eligible, woken: _woken, ...todo } = made as TodoRow & { eligible: boolean; woken: unknown };
    return { slug: t.slug, todo: todo as TodoRow, created: true, pushEligible: eligible, skipped: null };
  }
  const [existing] = await tx<TodoRow[]>`
    select *, event_id::text as event_id from todos where endpoint_id = ${target.id} and idempotency_key = ${t.key} and ${liveKey(tx)}`;
  return { slug: t.slug, todo: existing ?? null, created: false, pushEligible: false, skipped: null };
}

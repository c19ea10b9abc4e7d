import type { Sql, TxSql } from '../../db/connect.ts';
import { withdrawSweepRings, type BacklogTodo } from './announce.ts';
import { pushEligible } from './predicates.ts';
import { todoMetaColumns, type TodoMetaRow } from './row.ts';

// Which todos ring: the reads and charges of the doorbell, all through the one sender gate.

/** Of the given todos, those that pass the sender gate now (e.g. just re-queued by the reaper). */
export async function pushEligibleTodosByIds(sql: Sql, ids: readonly string[]): Promise<TodoMetaRow[]> {
  if (ids.length === 0) return [];
  return sql<TodoMetaRow[]>`
    select ${sql.unsafe(todoMetaColumns('t'))} from todos t
    where t.id = any(${sql.array([...ids])}::text[]) and ${pushEligible(sql)}`;
}

/**
 * What a `todo_ready` wakeup rings: the push-eligible todos of one endpoint and queue that became
 * ready within the last `freshSeconds` (created or re-queued), at most `limit` of the latest.
 * Older work is the sweep's, with its budget; the wakeup only carries new work to sessions on
 * other instances.
 */
export async function freshReadyTodos(
  sql: Sql,
  endpointId: string,
  queue: string,
  now: Date,
  opts: { freshSeconds?: number; limit?: number } = {},
): Promise<TodoMetaRow[]> {
  // The latest to become ready, so that the one whose todo_ready this answers is among them however
  // many older ones still wait unclaimed (those rang when they became ready); rung oldest first.
  return sql<TodoMetaRow[]>`
    select r.* from (
      select ${sql.unsafe(todoMetaColumns('t'))}, t.seq from todos t join endpoints e on e.id = t.endpoint_id and e.state = 'active'
      where t.endpoint_id = ${endpointId} and t.queue = ${queue} and ${pushEligible(sql)}
        and t.updated_at >= ${now}::timestamptz - make_interval(secs => ${opts.freshSeconds ?? 60})
      order by t.updated_at desc, t.seq desc
      limit ${opts.limit ?? 16}
    ) r order by r.created_at, r.seq`;
}

/**
 * freshReadyTodos for many endpoints at once, every queue (the catch-up after a LISTEN reconnect):
 * at most `limit` per endpoint and queue, the latest to become ready, in one statement.
 */
export async function freshReadyTodosOf(
  sql: Sql,
  endpointIds: readonly string[],
  now: Date,
  opts: { freshSeconds?: number; limit?: number } = {},
): Promise<TodoMetaRow[]> {
  if (endpointIds.length === 0) return [];
  return sql<TodoMetaRow[]>`
    select r.* from (
      select ${sql.unsafe(todoMetaColumns('t'))}, t.seq,
             row_number() over (partition by t.endpoint_id, t.queue order by t.updated_at desc, t.seq desc) as nth
      from todos t join endpoints e on e.id = t.endpoint_id and e.state = 'active'
      where t.endpoint_id = any(${sql.array([...endpointIds])}::uuid[]) and ${pushEligible(sql)}
        and t.updated_at >= ${now}::timestamptz - make_interval(secs => ${opts.freshSeconds ?? 60})
    ) r where r.nth <= ${opts.limit ?? 16}
    order by r.created_at, r.seq`;
}

/**
 * The push-eligible pending todos of one endpoint (the hooks' todos.backlog summary). With
 * `readyBy`, only those that became ready (created or re-queued) no later than that moment.
 */
export async function pushEligibleBacklog(sql: Sql, endpointId: string, readyBy?: Date): Promise<BacklogTodo[]> {
  return sql<BacklogTodo[]>`
    select t.id, t.queue, t.created_at from todos t
    where t.endpoint_id = ${endpointId} and ${pushEligible(sql)}
      ${readyBy ? sql`and t.updated_at <= ${readyBy}` : sql``}
    order by t.created_at, t.seq`;
}

export async function pushEligibleCount(sql: Sql, endpointId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from todos t where t.endpoint_id = ${endpointId} and ${pushEligible(sql)}`;
  return row?.n ?? 0;
}

/** The wait before the next ring, keyed by that ring's number (1-based): 5 m, 20 m, 1 h, 6 h, 6 h. */
export const RING_INTERVALS_SECONDS = [300, 1200, 3600, 21_600, 21_600] as const;
export const RING_BUDGET = RING_INTERVALS_SECONDS.length;
export const SWEEP_LIMIT = 3;

/**
 * After a return to in is claimed, its digest goes first: for this long a todo the return's digest
 * has not marked is not rung singly (DESIGN decision 9). The claim commits before its digests mark
 * the backlog, so without this a sweep on another instance in between would ring each held todo
 * singly. Once it has passed, a todo no digest marked (none was written) rings on its own
 * schedule, from its last ring or creation, not from the return.
 */
export const RETURN_DIGEST_GRACE_SECONDS = 60;

/**
 * The sweep's due predicate over todo `t` and its endpoint `e`, evaluated again under the row lock.
 * The budget is written as a literal, so that a generic plan sees it implies todos_ring_due_idx's
 * predicate (migration 0029).
 */
const ringDue = (sql: Sql | TxSql, now: Date) => {
  const intervals = sql.array([...RING_INTERVALS_SECONDS]);
  return sql`
    ${pushEligible(sql)}
    and t.ring_attempts < ${sql.unsafe(String(RING_BUDGET))}
    and coalesce(t.last_ringed_at, t.created_at) <= ${now}::timestamptz - make_interval(secs => (${intervals}::int[])[t.ring_attempts + 1])
    and not (coalesce(e.presence_changed_at > ${now}::timestamptz - make_interval(secs => ${RETURN_DIGEST_GRACE_SECONDS}), false)
             and coalesce(t.last_ringed_at < e.presence_changed_at, true))`;
};

/**
 * The heartbeat sweep's pick-and-charge, in one transaction: pending push-eligible todos of active
 * endpoints among `receivers` whose return to in has been claimed (presence_seen; the digest
 * covers an unclaimed one) and whose next ring is due, ranked per endpoint so one deep backlog
 * cannot starve the rest, at most `limit`, each charged one ring and announced by it. The due
 * predicate is checked again as each row is locked: a digest that marked it after the pick (or
 * is marking it now: the row is skipped) has announced it. Unscoped by design: it has no caller,
 * and each row it returns names its own endpoint.
 *
 * The pick walks each receiver's todos that still have rings left in ring order
 * (todos_ring_due_idx) and stops at its first `limit` due ones: no todo past an endpoint's
 * `limit`-th can be picked, since its own endpoint's earlier ones rank before it. Ranking every
 * due todo of every receiver read all their pending work (20,000 receivers over 1,000,000 pending
 * todos: 280,000 rows and a scan of events, 733 ms; bench/loops.ts).
 *
 * `ring` writes the doorbells while the charged rows are still locked and answers the ids that
 * reached no session; their announcement is withdrawn in the same transaction. A digest counting
 * the endpoint meanwhile waits for the outcome instead of skipping a todo whose ring then fails.
 */
export async function chargeDueRingsUnscoped(
  sql: Sql,
  receivers: readonly string[],
  now: Date,
  opts: { limit?: number; ring?: (charged: TodoMetaRow[]) => string[] } = {},
): Promise<TodoMetaRow[]> {
  if (receivers.length === 0) return [];
  const limit = opts.limit ?? SWEEP_LIMIT;
  const charged = await sql.begin(async (tx) => {
    // Ids first, in a materialized CTE: a LIMIT under FOR UPDATE SKIP LOCKED inside WHERE id IN (...)
    // can be re-run per row by the planner and reach past the cap.
    const picked = await tx<{ id: string }[]>`
      with due as materialized (
        select d.id, d.endpoint_id, d.last_ringed_at, d.created_at, d.seq
        from endpoints e
        cross join lateral (
          select t.id, t.endpoint_id, t.last_ringed_at, t.created_at, t.seq from todos t
          where t.endpoint_id = e.id and ${ringDue(tx, now)}
          order by t.last_ringed_at nulls first, t.created_at, t.seq
          limit ${limit}
        ) d
        where e.id = any(${tx.array([...receivers])}::uuid[]) and e.state = 'active' and e.presence_seen = 'in'
      ), ranked as (
        select id, last_ringed_at, created_at, seq,
               row_number() over (partition by endpoint_id order by last_ringed_at nulls first, created_at, seq) as turn
        from due
      )
      select id from ranked order by turn, last_ringed_at nulls first, created_at, seq limit ${limit}`;
    if (picked.length === 0) return [];
    const rows: TodoMetaRow[] = await tx<TodoMetaRow[]>`
      with locked as materialized (
        select t.id from todos t join endpoints e on e.id = t.endpoint_id and e.state = 'active' and e.presence_seen = 'in'
        where t.id = any(${tx.array(picked.map((p) => p.id))}::text[]) and ${ringDue(tx, now)}
        for update of t skip locked
      )
      update todos t set ring_attempts = t.ring_attempts + 1, last_ringed_at = ${now}, last_ringed_by = 'ring'
      from locked where t.id = locked.id
      returning ${tx.unsafe(todoMetaColumns('t'))}`;
    if (opts.ring) await withdrawSweepRings(tx, opts.ring(rows), now);
    return rows;
  });
  return charged as TodoMetaRow[];
}

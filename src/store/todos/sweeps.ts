import type { Sql } from '../../db/connect.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';
import { leaseExpired, pushEligible, retryDue } from './predicates.ts';
import type { Moved, TodoRow } from './row.ts';
import { unclaimSet } from './transitions.ts';

// Background sweeps: no caller, so no endpoint predicate; each row moves only within its own
// lifecycle, and the caller learns which endpoints and queues changed.

/** Expired leases go back to pending, or become dead letters once their attempts are spent. */
export async function reapExpiredLeasesUnscoped(sql: Sql, now: Date, limit = 1000): Promise<Moved[]> {
  return sql<Moved[]>`
    with expired as materialized (
      select id from todos
      where ${leaseExpired(sql, now)} and queue <> ${RESERVED_QUEUE}
      order by lease_expires_at
      limit ${limit}
      for update skip locked
    )
    update todos t set
      state = case when t.attempt < t.max_attempts then 'pending' else 'failed' end,
      result = case when t.attempt < t.max_attempts then t.result
                    else ${sql.json({ error: 'lease_expired', detail: 'lease expired on the last attempt' })} end,
      completed_at = case when t.attempt < t.max_attempts then null else ${now}::timestamptz end,
      owner = null, ${unclaimSet(sql)}, claimed_at = null, updated_at = ${now}
    from expired where t.id = expired.id
    returning t.id, t.endpoint_id, t.queue, t.state`;
}

/** Failed todos whose retry wait is over become pending again. */
export async function requeueDueRetriesUnscoped(sql: Sql, now: Date, limit = 1000): Promise<Moved[]> {
  return sql<Moved[]>`
    with due as materialized (
      select id from todos
      where ${retryDue(sql, now)}
      order by next_retry_at
      limit ${limit}
      for update skip locked
    )
    update todos t set state = 'pending', owner = null, lease_expires_at = null, claimed_at = null,
      next_retry_at = null, updated_at = ${now}
    from due where t.id = due.id
    returning t.id, t.endpoint_id, t.queue, t.state`;
}

/** The wait before the next ring, keyed by that ring's number (1-based): 5 m, 20 m, 1 h, 6 h, 6 h. */
export const RING_INTERVALS_SECONDS = [300, 1200, 3600, 21_600, 21_600] as const;
export const RING_BUDGET = RING_INTERVALS_SECONDS.length;
export const SWEEP_LIMIT = 3;

/**
 * The heartbeat sweep's pick-and-charge, in one transaction: pending push-eligible todos of active
 * endpoints among `receivers` whose next ring is due, ranked per endpoint so one deep backlog
 * cannot starve the rest, at most `limit`, each charged one ring. Unscoped by design: it has no
 * caller, and each row it returns names its own endpoint.
 */
export async function chargeDueRingsUnscoped(
  sql: Sql,
  receivers: readonly string[],
  now: Date,
  limit = SWEEP_LIMIT,
): Promise<TodoRow[]> {
  if (receivers.length === 0) return [];
  const intervals = sql.array([...RING_INTERVALS_SECONDS]);
  const charged = await sql.begin(async (tx) => {
    // Ids first, in a materialized CTE: a LIMIT under FOR UPDATE SKIP LOCKED inside WHERE id IN (...)
    // can be re-run per row by the planner and reach past the cap.
    const picked = await tx<{ id: string }[]>`
      with due as materialized (
        select t.id, t.last_ringed_at, t.created_at, t.seq,
               row_number() over (partition by t.endpoint_id order by t.last_ringed_at nulls first, t.created_at, t.seq) as turn
        from todos t join endpoints e on e.id = t.endpoint_id and e.state = 'active'
        where t.endpoint_id = any(${tx.array([...receivers])}::uuid[])
          and ${pushEligible(tx)}
          and t.ring_attempts < ${RING_BUDGET}
          and coalesce(t.last_ringed_at, t.created_at)
              <= ${now}::timestamptz - make_interval(secs => (${intervals}::int[])[t.ring_attempts + 1])
      )
      select id from due order by turn, last_ringed_at nulls first, created_at, seq limit ${limit}`;
    if (picked.length === 0) return [];
    const rows: TodoRow[] = await tx<TodoRow[]>`
      with locked as materialized (
        select id from todos where id = any(${tx.array(picked.map((p) => p.id))}::text[]) and state = 'pending'
        for update skip locked
      )
      update todos t set ring_attempts = t.ring_attempts + 1, last_ringed_at = ${now}
      from locked where t.id = locked.id
      returning t.*, t.event_id::text as event_id`;
    return rows;
  });
  return charged as TodoRow[];
}

import type { Sql } from '../../db/connect.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';
import { delayDue, leaseExpired, retryDue } from './predicates.ts';
import type { Moved } from './row.ts';
import { unclaimSet } from './transitions.ts';
import { unannounced } from './announce.ts';

// Background sweeps: no caller, so no endpoint predicate; each row moves only within its own
// lifecycle, and the caller learns which endpoints and queues changed.

/** Expired leases go back to pending (new work to announce), or become dead letters once their attempts are spent. */
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
      ${unannounced(sql)}, owner = null, ${unclaimSet(sql)}, claimed_at = null, updated_at = ${now}
    from expired where t.id = expired.id
    returning t.id, t.endpoint_id, t.queue, t.state`;
}

/** Failed todos whose retry wait is over become pending again, new work to announce. */
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
      next_retry_at = null, ${unannounced(sql)}, updated_at = ${now}
    from due where t.id = due.id
    returning t.id, t.endpoint_id, t.queue, t.state`;
}

/**
 * Delayed todos whose run_at has passed are released: run_at cleared (so they enter the claim
 * scan's index and pass the sender gate) and updated_at moved, which is what a todo_ready wakeup
 * reads as "became ready". They were claimable from run_at already; now they ring.
 */
export async function releaseDueDelayedUnscoped(sql: Sql, now: Date, limit = 1000): Promise<Moved[]> {
  return sql<Moved[]>`
    with due as materialized (
      select id from todos
      where ${delayDue(sql, now)}
      order by run_at
      limit ${limit}
      for update skip locked
    )
    update todos t set run_at = null, updated_at = ${now}
    from due where t.id = due.id
    returning t.id, t.endpoint_id, t.queue, t.state`;
}

import type { Sql } from '../../db/connect.ts';
import { histOfBinsSql, histSumSql } from './hist-sum.ts';

/** Minute buckets are kept two days, hour buckets thirty (issue 39). */
export const MINUTE_HISTORY_MS = 48 * 3600_000;
export const HOUR_HISTORY_MS = 30 * 86_400_000;

const minuteOf = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000);
const hourOf = (at: Date) => new Date(Math.floor(at.getTime() / 3600_000) * 3600_000);

const COUNT_COLUMNS = ['created', 'claimed', 'completed', 'failed', 'dead', 'pending_change', 'claimed_change', 'rings_sent', 'heard_claim', 'heard_ack', 'unheard', 'digests'];
const sums = (from: string) => COUNT_COLUMNS.map((c) => `sum(${from}${c}) as ${c}`).join(', ');

/**
 * Folds the triggers' rows (a row per change, migration 0032) of minutes before `before` into
 * their minute buckets, their hour buckets and every queue's depth now (todo_depth), in one
 * statement: the rows it deletes are the ones it adds, so two instances folding at once count each
 * once. An hour is added to as its minutes are folded (a late row, a ring found unheard hours after
 * it was sent, adds to its own old minute and hour), so no pass reads the minutes again to roll
 * them up. A read's depth at a point's end is the depth now less the changes after it (read.ts), so
 * a queue that did not change writes nothing: the work is the changes, not the queues (a count of
 * every live todo each minute took 6.6 s at 1,000,000 pending over 100,000 endpoints; issue 40).
 * Answers the minute buckets written, the earliest of them, and the queues whose depth changed.
 */
export async function foldHistoryDeltasUnscoped(sql: Sql, before: Date): Promise<{ rows: number; earliest: Date | null; queues: number }> {
  const [row] = await sql<{ rows: number; earliest: Date | null; queues: number }[]>`
    with moved as (delete from todo_history_delta where bucket < ${minuteOf(before)} returning *),
    kept as (
      -- The rows of an endpoint deleted meanwhile go with it (a probe per row, endpoints_pkey: as
      -- EXISTS the planner hashed every endpoint for a minute's few rows).
      select m.* from moved m where (select true from endpoints e where e.id = m.endpoint_id)
    ), minutes as (
      select bucket, endpoint_id, queue, ${sql.unsafe(sums(''))}, ${sql.unsafe(histOfBinsSql('wait_bin'))} as wait_hist
      from kept group by bucket, endpoint_id, queue
    ), hours as (
      select date_trunc('hour', bucket) as bucket, endpoint_id, queue, ${sql.unsafe(sums(''))}, ${sql.unsafe(histSumSql('wait_hist'))} as wait_hist
      from minutes group by 1, 2, 3
    ), buckets as (
      insert into todo_history as h (width, bucket, endpoint_id, queue, ${sql.unsafe(COUNT_COLUMNS.join(', '))}, wait_hist)
      select 'm', * from minutes
      union all
      select 'h', * from hours
      on conflict (width, endpoint_id, bucket, queue) do update set
        ${sql.unsafe(COUNT_COLUMNS.map((c) => `${c} = h.${c} + excluded.${c}`).join(', '))},
        wait_hist = history_hist_add(h.wait_hist, excluded.wait_hist)
      returning width, bucket
    ), depth as (
      insert into todo_depth as d (endpoint_id, queue, pending, claimed)
      select endpoint_id, queue, sum(pending_change), sum(claimed_change) from minutes
      group by 1, 2 having sum(pending_change) <> 0 or sum(claimed_change) <> 0
      on conflict (endpoint_id, queue) do update set pending = d.pending + excluded.pending, claimed = d.claimed + excluded.claimed
      returning 1
    )
    select (select count(*) from buckets where width = 'm')::int as rows,
           (select min(bucket) from buckets where width = 'm') as earliest,
           (select count(*) from depth)::int as queues`;
  return row!;
}

/**
 * Rolls the (folded) minute buckets of the hours from `since` to `at` up into hour buckets (replacing what
 * was there: the sums are recomputed, so running it twice changes nothing). The history loop no
 * longer runs it (the fold adds to the hours as it goes); it rebuilds hours from their minutes.
 */
export async function rollUpHoursUnscoped(sql: Sql, since: Date, at: Date): Promise<number> {
  // One pass over the minutes, grouped once: the depth is the last snapshot's (array_agg ordered
  // by bucket), the histogram the sum of the group's (histSumSql). A histogram per group looked up
  // in a CTE by a correlated subquery read that whole CTE once per group: 32 s for the last two
  // hours of 1,000 endpoints (bench/history.ts), quadratic in the endpoints.
  const rows = await sql`
    insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, failed, dead,
                              pending, claimed_depth, pending_change, claimed_change, wait_hist, rings_sent, heard_claim, heard_ack, unheard, digests)
    select 'h', date_trunc('hour', m.bucket), m.endpoint_id, m.queue, sum(m.created), sum(m.claimed), sum(m.completed), sum(m.failed), sum(m.dead),
           (array_agg(m.pending order by m.bucket desc) filter (where m.pending is not null))[1],
           (array_agg(m.claimed_depth order by m.bucket desc) filter (where m.pending is not null))[1],
           sum(m.pending_change), sum(m.claimed_change),
           ${sql.unsafe(histSumSql('m.wait_hist'))},
           sum(m.rings_sent), sum(m.heard_claim), sum(m.heard_ack), sum(m.unheard), sum(m.digests)
    from todo_history m
    where m.width = 'm' and m.bucket >= ${hourOf(since)} and m.bucket < ${new Date(hourOf(at).getTime() + 3600_000)}
    group by date_trunc('hour', m.bucket), m.endpoint_id, m.queue
    on conflict (width, endpoint_id, bucket, queue) do update set
      created = excluded.created, claimed = excluded.claimed, completed = excluded.completed, failed = excluded.failed,
      dead = excluded.dead, pending = excluded.pending, claimed_depth = excluded.claimed_depth,
      pending_change = excluded.pending_change, claimed_change = excluded.claimed_change, wait_hist = excluded.wait_hist,
      rings_sent = excluded.rings_sent, heard_claim = excluded.heard_claim, heard_ack = excluded.heard_ack,
      unheard = excluded.unheard, digests = excluded.digests`;
  return rows.count;
}

/**
 * Deletes buckets past their keep (minutes 48 h, hours 30 days), at most `batch` of each width,
 * oldest first: in bucket order the pick walks todo_history_bucket_idx and stops at the keep, so a
 * pass with nothing to prune reads nothing (unordered, a generic plan scanned the table for them).
 */
export async function pruneHistoryUnscoped(sql: Sql, at: Date, batch: number): Promise<number> {
  const minutes = await sql`
    delete from todo_history where ctid in (
      select ctid from todo_history where width = 'm' and bucket < ${new Date(at.getTime() - MINUTE_HISTORY_MS)} order by bucket limit ${batch})`;
  const hours = await sql`
    delete from todo_history where ctid in (
      select ctid from todo_history where width = 'h' and bucket < ${new Date(at.getTime() - HOUR_HISTORY_MS)} order by bucket limit ${batch})`;
  return Math.max(minutes.count, hours.count);
}

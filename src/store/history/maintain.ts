import type { Sql } from '../../db/connect.ts';
import { COUNT_COLUMNS } from './columns.ts';
import { histOfBinsSql, histSumSql } from './hist-sum.ts';

/** Minute buckets are kept two days, hour buckets thirty (issue 39). */
export const MINUTE_HISTORY_MS = 48 * 3600_000;
export const HOUR_HISTORY_MS = 30 * 86_400_000;

const minuteOf = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000);

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
 * Answers the minute buckets written and the queues whose depth changed.
 */
export async function foldHistoryDeltasUnscoped(sql: Sql, before: Date): Promise<{ rows: number; queues: number }> {
  const [row] = await sql<{ rows: number; queues: number }[]>`
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
      returning width
    ), depth as (
      insert into todo_depth as d (endpoint_id, queue, pending, claimed)
      select endpoint_id, queue, sum(pending_change), sum(claimed_change) from minutes
      group by 1, 2 having sum(pending_change) <> 0 or sum(claimed_change) <> 0
      on conflict (endpoint_id, queue) do update set pending = d.pending + excluded.pending, claimed = d.claimed + excluded.claimed
      returning 1
    )
    select (select count(*) from buckets where width = 'm')::int as rows,
           (select count(*) from depth)::int as queues`;
  return row!;
}

/**
 * Deletes buckets past their keep (minutes 48 h, hours 30 days), at most `batch` of each width and table,
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
  // The sums per human (migration 0035), on the same keeps.
  const humans = await sql`
    delete from todo_history_human where ctid in (
      (select ctid from todo_history_human where width = 'm' and bucket < ${new Date(at.getTime() - MINUTE_HISTORY_MS)} order by bucket limit ${batch})
      union all
      (select ctid from todo_history_human where width = 'h' and bucket < ${new Date(at.getTime() - HOUR_HISTORY_MS)} order by bucket limit ${batch}))`;
  return Math.max(minutes.count, hours.count, humans.count);
}

import type { Sql } from '../../db/connect.ts';
import { histSumSql } from './hist-sum.ts';

/** Minute buckets are kept two days, hour buckets thirty (issue 39). */
export const MINUTE_HISTORY_MS = 48 * 3600_000;
export const HOUR_HISTORY_MS = 30 * 86_400_000;

const minuteOf = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000);
const hourOf = (at: Date) => new Date(Math.floor(at.getTime() / 3600_000) * 3600_000);

/**
 * Folds the triggers' depth changes (migration 0031) into every queue's depth now (todo_depth) and
 * into the changes of their minute and hour buckets (pending_change, claimed_change), in one
 * statement: the changes it deletes are the ones it adds, so two instances folding at once count
 * each once. A read's depth at a point's end is the depth now less the changes after the point
 * (read.ts), so a queue that did not change writes nothing: the work is the changes, not the
 * queues (a count of every live todo and a row per queue each minute took 6.6 s at 1,000,000
 * pending over 100,000 endpoints; issue 40). Answers how many queues changed.
 */
export async function foldDepthChangesUnscoped(sql: Sql): Promise<number> {
  const [row] = await sql<{ queues: number }[]>`
    with moved as (delete from todo_depth_delta returning bucket, endpoint_id, queue, pending, claimed),
    kept as (
      -- A change of an endpoint deleted meanwhile goes with it (a probe per change, endpoints_pkey:
      -- as EXISTS the planner hashed every endpoint for a minute's few changes).
      select m.* from moved m where (select true from endpoints e where e.id = m.endpoint_id)
    ), queues as (
      select endpoint_id, queue, sum(pending)::int as pending, sum(claimed)::int as claimed from kept
      group by 1, 2 having sum(pending) <> 0 or sum(claimed) <> 0
    ), now as (
      insert into todo_depth as d (endpoint_id, queue, pending, claimed)
      select endpoint_id, queue, pending, claimed from queues
      on conflict (endpoint_id, queue) do update set pending = d.pending + excluded.pending, claimed = d.claimed + excluded.claimed
      returning 1
    ), buckets as (
      insert into todo_history as h (width, bucket, endpoint_id, queue, pending_change, claimed_change)
      select 'm', bucket, endpoint_id, queue, sum(pending), sum(claimed) from kept
      group by bucket, endpoint_id, queue having sum(pending) <> 0 or sum(claimed) <> 0
      union all
      select 'h', date_trunc('hour', bucket), endpoint_id, queue, sum(pending), sum(claimed) from kept
      group by date_trunc('hour', bucket), endpoint_id, queue having sum(pending) <> 0 or sum(claimed) <> 0
      on conflict (width, endpoint_id, bucket, queue) do update set
        pending_change = h.pending_change + excluded.pending_change, claimed_change = h.claimed_change + excluded.claimed_change
      returning 1
    )
    select (select count(*) from now)::int as queues, (select count(*) from buckets)::int as buckets`;
  return row!.queues;
}

/** foldDepthChangesUnscoped, by the name bench/history.ts times it under (the depth step of a pass). */
export const snapshotDepthUnscoped = (sql: Sql, _at: Date): Promise<number> => foldDepthChangesUnscoped(sql);

/**
 * Folds the triggers' deltas of minutes before `before` into their minute buckets and their hour
 * buckets, in one statement: the deltas it deletes are the ones it adds, so two instances folding
 * at once count each once. An hour is added to as its minutes are folded (a late delta, a ring
 * found unheard hours after it was sent, adds to its own old minute and hour), so no pass reads
 * the minutes again to roll them up (the rollup re-read two hours of every queue's minutes each
 * minute). Answers the earliest minute it touched.
 */
export async function foldHistoryDeltasUnscoped(sql: Sql, before: Date): Promise<{ rows: number; earliest: Date | null }> {
  const rows = await sql<{ bucket: Date }[]>`
    with moved as (delete from todo_history_delta where bucket < ${minuteOf(before)} returning *),
    minutes as (
      select bucket, endpoint_id, queue, sum(created) as created, sum(claimed) as claimed, sum(completed) as completed,
             sum(failed) as failed, sum(dead) as dead, ${sql.unsafe(histSumSql('wait_hist'))} as wait_hist,
             sum(rings_sent) as rings_sent, sum(heard_claim) as heard_claim, sum(heard_ack) as heard_ack,
             sum(unheard) as unheard, sum(digests) as digests
      from moved group by bucket, endpoint_id, queue
    ), hours as (
      select date_trunc('hour', bucket) as bucket, endpoint_id, queue, sum(created) as created, sum(claimed) as claimed,
             sum(completed) as completed, sum(failed) as failed, sum(dead) as dead, ${sql.unsafe(histSumSql('wait_hist'))} as wait_hist,
             sum(rings_sent) as rings_sent, sum(heard_claim) as heard_claim, sum(heard_ack) as heard_ack,
             sum(unheard) as unheard, sum(digests) as digests
      from minutes group by 1, 2, 3
    )
    insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, failed, dead,
                              wait_hist, rings_sent, heard_claim, heard_ack, unheard, digests)
    select 'm', * from minutes
    union all
    select 'h', * from hours
    on conflict (width, endpoint_id, bucket, queue) do update set
      created = todo_history.created + excluded.created, claimed = todo_history.claimed + excluded.claimed,
      completed = todo_history.completed + excluded.completed, failed = todo_history.failed + excluded.failed,
      dead = todo_history.dead + excluded.dead, wait_hist = history_hist_add(todo_history.wait_hist, excluded.wait_hist),
      rings_sent = todo_history.rings_sent + excluded.rings_sent, heard_claim = todo_history.heard_claim + excluded.heard_claim,
      heard_ack = todo_history.heard_ack + excluded.heard_ack, unheard = todo_history.unheard + excluded.unheard,
      digests = todo_history.digests + excluded.digests
    returning width, bucket`;
  const minutes = rows.filter((r) => (r as unknown as { width: string }).width === 'm');
  const earliest = minutes.reduce<Date | null>((min, r) => (min === null || r.bucket < min ? r.bucket : min), null);
  return { rows: minutes.length, earliest };
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

import type { Sql } from '../../db/connect.ts';
import { histSumSql } from './hist-sum.ts';

/** Minute buckets are kept two days, hour buckets thirty (issue 39). */
export const MINUTE_HISTORY_MS = 48 * 3600_000;
export const HOUR_HISTORY_MS = 30 * 86_400_000;

const minuteOf = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000);
const hourOf = (at: Date) => new Date(Math.floor(at.getTime() / 3600_000) * 3600_000);

/**
 * The depth of every endpoint's queues at `at`, written into the minute bucket that ends at `at`
 * (the bucket before the minute `at` falls in): pending and claimed, synthetic todos excluded.
 * Idempotent: any instance may take it, the last one writing the same counts. Queues with nothing
 * live get no row, which reads as 0, except a queue that had some earlier in the same hour: it gets
 * an explicit 0, since a point's (and an hour's) depth is its last snapshot, which would otherwise
 * be that earlier one.
 */
export async function snapshotDepthUnscoped(sql: Sql, at: Date): Promise<number> {
  const bucket = new Date(minuteOf(at).getTime() - 60_000);
  const rows = await sql`
    with live as (
      select t.endpoint_id, t.queue,
             count(*) filter (where t.state = 'pending')::int as pending, count(*) filter (where t.state = 'claimed')::int as claimed_depth
      from todos t where t.state in ('pending', 'claimed') and not t.synthetic
      group by t.endpoint_id, t.queue
    ), drained as (
      select distinct h.endpoint_id, h.queue from todo_history h
      where h.width = 'm' and h.bucket >= ${hourOf(bucket)} and h.bucket < ${bucket} and (h.pending > 0 or h.claimed_depth > 0)
        and not exists (select 1 from live l where l.endpoint_id = h.endpoint_id and l.queue = h.queue)
    )
    insert into todo_history (width, bucket, endpoint_id, queue, pending, claimed_depth)
    select 'm', ${bucket}, endpoint_id, queue, pending, claimed_depth from live
    union all
    select 'm', ${bucket}, endpoint_id, queue, 0, 0 from drained
    on conflict (width, endpoint_id, bucket, queue) do update
      set pending = excluded.pending, claimed_depth = excluded.claimed_depth`;
  return rows.count;
}

/**
 * Folds the triggers' deltas of minutes before `before` into the minute buckets, in one statement:
 * the deltas it deletes are the ones it adds, so two instances folding at once count each once.
 * Answers the earliest minute it touched: a ring found unheard hours after it was sent adds to
 * its own (old) minute, whose hour must be rolled up again.
 */
export async function foldHistoryDeltasUnscoped(sql: Sql, before: Date): Promise<{ rows: number; earliest: Date | null }> {
  const rows = await sql<{ bucket: Date }[]>`
    with moved as (delete from todo_history_delta where bucket < ${minuteOf(before)} returning *)
    insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, failed, dead,
                              wait_hist, rings_sent, heard_claim, heard_ack, unheard, digests)
    select 'm', bucket, endpoint_id, queue, sum(created), sum(claimed), sum(completed), sum(failed), sum(dead),
           history_hist_sum(array_agg(wait_hist) filter (where wait_hist is not null)),
           sum(rings_sent), sum(heard_claim), sum(heard_ack), sum(unheard), sum(digests)
    from moved group by bucket, endpoint_id, queue
    on conflict (width, endpoint_id, bucket, queue) do update set
      created = todo_history.created + excluded.created, claimed = todo_history.claimed + excluded.claimed,
      completed = todo_history.completed + excluded.completed, failed = todo_history.failed + excluded.failed,
      dead = todo_history.dead + excluded.dead, wait_hist = history_hist_add(todo_history.wait_hist, excluded.wait_hist),
      rings_sent = todo_history.rings_sent + excluded.rings_sent, heard_claim = todo_history.heard_claim + excluded.heard_claim,
      heard_ack = todo_history.heard_ack + excluded.heard_ack, unheard = todo_history.unheard + excluded.unheard,
      digests = todo_history.digests + excluded.digests
    returning bucket`;
  const earliest = rows.reduce<Date | null>((min, r) => (min === null || r.bucket < min ? r.bucket : min), null);
  return { rows: rows.length, earliest };
}

/**
 * Rolls the (folded) minute buckets of the hours from `since` to `at` up into hour buckets (replacing what
 * was there: the sums are recomputed, so running it twice changes nothing). The depth of an hour
 * is its last minute's snapshot.
 */
export async function rollUpHoursUnscoped(sql: Sql, since: Date, at: Date): Promise<number> {
  // One pass over the minutes, grouped once: the depth is the last snapshot's (array_agg ordered
  // by bucket), the histogram the sum of the group's (histSumSql). A histogram per group looked up
  // in a CTE by a correlated subquery read that whole CTE once per group: 32 s for the last two
  // hours of 1,000 endpoints (bench/history.ts), quadratic in the endpoints.
  const rows = await sql`
    insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, failed, dead,
                              pending, claimed_depth, wait_hist, rings_sent, heard_claim, heard_ack, unheard, digests)
    select 'h', date_trunc('hour', m.bucket), m.endpoint_id, m.queue, sum(m.created), sum(m.claimed), sum(m.completed), sum(m.failed), sum(m.dead),
           (array_agg(m.pending order by m.bucket desc) filter (where m.pending is not null))[1],
           (array_agg(m.claimed_depth order by m.bucket desc) filter (where m.pending is not null))[1],
           ${sql.unsafe(histSumSql('m.wait_hist'))},
           sum(m.rings_sent), sum(m.heard_claim), sum(m.heard_ack), sum(m.unheard), sum(m.digests)
    from todo_history m
    where m.width = 'm' and m.bucket >= ${hourOf(since)} and m.bucket < ${new Date(hourOf(at).getTime() + 3600_000)}
    group by date_trunc('hour', m.bucket), m.endpoint_id, m.queue
    on conflict (width, endpoint_id, bucket, queue) do update set
      created = excluded.created, claimed = excluded.claimed, completed = excluded.completed, failed = excluded.failed,
      dead = excluded.dead, pending = excluded.pending, claimed_depth = excluded.claimed_depth, wait_hist = excluded.wait_hist,
      rings_sent = excluded.rings_sent, heard_claim = excluded.heard_claim, heard_ack = excluded.heard_ack,
      unheard = excluded.unheard, digests = excluded.digests`;
  return rows.count;
}

/** Deletes buckets past their keep (minutes 48 h, hours 30 days), at most `batch` of each width. */
export async function pruneHistoryUnscoped(sql: Sql, at: Date, batch: number): Promise<number> {
  const minutes = await sql`
    delete from todo_history where ctid in (
      select ctid from todo_history where width = 'm' and bucket < ${new Date(at.getTime() - MINUTE_HISTORY_MS)} limit ${batch})`;
  const hours = await sql`
    delete from todo_history where ctid in (
      select ctid from todo_history where width = 'h' and bucket < ${new Date(at.getTime() - HOUR_HISTORY_MS)} limit ${batch})`;
  return Math.max(minutes.count, hours.count);
}

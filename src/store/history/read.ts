import type { Sql } from '../../db/connect.ts';
import { histSumSql } from './hist-sum.ts';

/** One point of history: a bucket's counts, summed over queues and shards as the read asked. */
export interface HistoryRow {
  bucket: Date;
  queue: string;
  created: number;
  claimed: number;
  completed: number;
  failed: number;
  dead: number;
  /** Depth at the bucket's end; null when no snapshot covered it. */
  pending: number | null;
  claimed_depth: number | null;
  wait_hist: number[] | null;
  rings_sent: number;
  heard_claim: number;
  heard_ack: number;
  unheard: number;
  digests: number;
}

export interface HistoryWindow {
  width: 'm' | 'h';
  /** Points are `stepSeconds` wide (a multiple of the width), aligned to it. */
  stepSeconds: number;
  from: Date;
  to: Date;
}

/** The owned endpoints among `endpointIds` (a CTE), and the window's rows, folded and not, of those. */
function windowRows(sql: Sql, humanId: string, endpointIds: readonly string[], w: HistoryWindow) {
  return sql`
    owned as (
      select e.id from endpoints e join agents a on a.id = e.agent_id
      where a.owner_human_id = ${humanId} and e.id = any(${sql.array([...endpointIds])}::uuid[])
    ), buckets as not materialized (
      select h.bucket, h.endpoint_id, h.queue, h.created, h.claimed, h.completed, h.failed, h.dead, h.pending, h.claimed_depth,
             h.wait_hist, h.rings_sent, h.heard_claim, h.heard_ack, h.unheard, h.digests
      from todo_history h
      where h.width = ${w.width} and h.endpoint_id in (select id from owned) and h.bucket >= ${w.from} and h.bucket < ${w.to}
      union all
      -- Minutes the history loop has not folded yet (the current one, at least).
      select d.bucket, d.endpoint_id, d.queue, d.created, d.claimed, d.completed, d.failed, d.dead, null, null,
             d.wait_hist, d.rings_sent, d.heard_claim, d.heard_ack, d.unheard, d.digests
      from todo_history_delta d
      where d.endpoint_id in (select id from owned) and d.bucket >= ${w.from} and d.bucket < ${w.to}
    )`;
}

/** The start of the point a row's bucket falls in (date_part is a double, where extract's numeric is slow). */
const pointOf = (sql: Sql, w: HistoryWindow) => sql`to_timestamp(floor(date_part('epoch', b.bucket) / ${w.stepSeconds}) * ${w.stepSeconds})`;

/**
 * A group's depth at its point's end: the last snapshot's, as [epoch, pending, claimed_depth]
 * (max of an array compares its first element first: the latest bucket), a plain aggregate, so a
 * group needs no sort of its rows.
 */
const LAST_DEPTH = `max(array[date_part('epoch', b.bucket)::bigint, b.pending, b.claimed_depth]) filter (where b.pending is not null)`;

const COUNT_SUMS = `sum(b.created)::int as created, sum(b.claimed)::int as claimed, sum(b.completed)::int as completed,
      sum(b.failed)::int as failed, sum(b.dead)::int as dead,
      sum(b.rings_sent)::int as rings_sent, sum(b.heard_claim)::int as heard_claim, sum(b.heard_ack)::int as heard_ack,
      sum(b.unheard)::int as unheard, sum(b.digests)::int as digests`;

/**
 * The buckets of the caller's endpoints in the window, per (point, endpoint, queue), summed over
 * the width's buckets in each point (folded and not). Depth is the last snapshot in the point.
 * Human-scoped: endpoints the human does not own contribute nothing.
 */
export async function historyOf(
  sql: Sql,
  humanId: string,
  endpointIds: readonly string[],
  w: HistoryWindow,
): Promise<(HistoryRow & { endpoint_id: string })[]> {
  if (endpointIds.length === 0) return [];
  const rows = await sql<(Omit<HistoryRow, 'pending' | 'claimed_depth'> & { endpoint_id: string; depth: string[] | null })[]>`
    with ${windowRows(sql, humanId, endpointIds, w)}
    select ${pointOf(sql, w)} as bucket, b.endpoint_id, b.queue, ${sql.unsafe(COUNT_SUMS)},
      ${sql.unsafe(LAST_DEPTH)} as depth, ${sql.unsafe(histSumSql('b.wait_hist'))} as wait_hist
    from buckets b
    group by 1, 2, 3
    order by 1, 2, 3`;
  return rows.map(({ depth, ...r }) => ({ ...r, pending: depth ? Number(depth[1]) : null, claimed_depth: depth ? Number(depth[2]) : null }));
}

/**
 * The buckets of the caller's endpoints in the window per (point, queue), summed over the
 * endpoints: counts and histograms added, depth the sum of each endpoint's last snapshot in the
 * point (the todos page's chart). What historyOf's rows add up to per queue, without a row per
 * endpoint: 96 points of a few queues come back for 10,000 endpoints, not a million rows.
 */
export async function queueHistoryOf(sql: Sql, humanId: string, endpointIds: readonly string[], w: HistoryWindow): Promise<HistoryRow[]> {
  if (endpointIds.length === 0) return [];
  return sql<HistoryRow[]>`
    with ${windowRows(sql, humanId, endpointIds, w)},
    counts as (
      select ${pointOf(sql, w)} as point, b.queue, ${sql.unsafe(COUNT_SUMS)}, ${sql.unsafe(histSumSql('b.wait_hist'))} as wait_hist
      from buckets b group by 1, 2
    ), depth as (
      select point, queue, sum(d[2])::int as pending, sum(d[3])::int as claimed_depth
      from (select ${pointOf(sql, w)} as point, b.endpoint_id, b.queue, ${sql.unsafe(LAST_DEPTH)} as d from buckets b where b.pending is not null group by 1, 2, 3) last
      group by 1, 2
    )
    select c.point as bucket, c.queue, c.created, c.claimed, c.completed, c.failed, c.dead, d.pending, d.claimed_depth, c.wait_hist,
           c.rings_sent, c.heard_claim, c.heard_ack, c.unheard, c.digests
    from counts c left join depth d using (point, queue)
    order by 1, 2`;
}

/**
 * Per endpoint, its pending depth at each point of the window: the sum over its queues of the
 * last snapshot in the point, as parallel arrays of point indexes (0 at `w.from`) and depths.
 * Only snapshot rows are read (the deltas carry no depth), and only their depth.
 */
export async function pendingDepthOf(
  sql: Sql,
  humanId: string,
  endpointIds: readonly string[],
  w: HistoryWindow,
): Promise<{ endpoint_id: string; points: number[]; pending: number[] }[]> {
  if (endpointIds.length === 0) return [];
  const from = w.from.getTime() / 1000;
  return sql<{ endpoint_id: string; points: number[]; pending: number[] }[]>`
    with owned as (
      select e.id from endpoints e join agents a on a.id = e.agent_id
      where a.owner_human_id = ${humanId} and e.id = any(${sql.array([...endpointIds])}::uuid[])
    ), last as (
      select b.endpoint_id, floor((date_part('epoch', b.bucket) - ${from}) / ${w.stepSeconds})::int as point,
             max(array[date_part('epoch', b.bucket)::bigint, b.pending]) as d
      from todo_history b
      where b.width = ${w.width} and b.endpoint_id in (select id from owned) and b.bucket >= ${w.from} and b.bucket < ${w.to}
        and b.pending is not null
      group by b.endpoint_id, 2, b.queue
    )
    select endpoint_id, array_agg(point order by point) as points, array_agg(pending order by point) as pending
    from (select endpoint_id, point, sum(d[2])::int as pending from last group by 1, 2) p
    group by 1`;
}

/**
 * Deliveries per point and outcome of one of the human's webhooks (the events it recorded):
 * routing's disposition (`routed` made a todo, `dropped`, `repeat`, `faulted`, `recorded`: nothing
 * to route, such as a ping). A refused delivery (bad signature, bad body) is never recorded, so it
 * is not here (switchboard_webhook_deliveries_total{verdict="rejected"} counts it); `verified` is
 * false for every delivery to a generic webhook (trusted by its URL), so it says nothing of a refusal.
 */
export async function webhookDeliveriesOf(
  sql: Sql,
  humanId: string,
  webhookId: string,
  w: Pick<HistoryWindow, 'stepSeconds' | 'from' | 'to'>,
): Promise<{ bucket: Date; outcome: string; n: number }[]> {
  return sql<{ bucket: Date; outcome: string; n: number }[]>`
    select to_timestamp(floor(extract(epoch from ev.received_at) / ${w.stepSeconds}) * ${w.stepSeconds}) as bucket,
           coalesce(ev.disposition, 'routed') as outcome,
           count(*)::int as n
    from events ev
    join webhooks wh on wh.id = ev.webhook_id
    join endpoints e on e.id = wh.endpoint_id join agents a on a.id = e.agent_id
    where wh.id = ${webhookId} and a.owner_human_id = ${humanId} and ev.received_at >= ${w.from} and ev.received_at < ${w.to}
    group by 1, 2 order by 1, 2`;
}

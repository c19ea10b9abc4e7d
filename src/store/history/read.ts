import type { Sql } from '../../db/connect.ts';
import { COUNT_COLUMNS } from './columns.ts';
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
  /**
   * Net change of the pending and claimed counts within the point (folded by the history loop,
   * migration 0031). The depth at a point's end is the depth now less the changes after it.
   */
  pending_change: number;
  claimed_change: number;
  wait_hist: number[] | null;
  rings_sent: number;
  heard_claim: number;
  heard_ack: number;
  unheard: number;
  digests: number;
}

/** A queue's (or a group's) pending and claimed todos now: the last fold's depth and the changes not folded yet. */
export interface DepthNow {
  queue: string;
  pending: number;
  claimed: number;
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
    ), unfolded as materialized (
      -- The triggers' rows the history loop has not folded yet (a minute or two of them): a row per
      -- change, its wait's bin as a histogram. The loop folds every closed minute each minute, so
      -- none is older than the window's start unless no instance has run it for the window's length.
      select d.bucket, d.endpoint_id, d.queue, d.created, d.claimed, d.completed, d.failed, d.dead, d.pending_change, d.claimed_change,
             history_one_hot(d.wait_bin) as wait_hist, d.rings_sent, d.heard_claim, d.heard_ack, d.unheard, d.digests
      from todo_history_delta d
      where d.endpoint_id in (select id from owned) and d.bucket >= ${w.from} and d.bucket < ${w.to}
    ), buckets as not materialized (
      select h.bucket, h.endpoint_id, h.queue, h.created, h.claimed, h.completed, h.failed, h.dead, h.pending_change, h.claimed_change,
             h.wait_hist, h.rings_sent, h.heard_claim, h.heard_ack, h.unheard, h.digests
      from todo_history h
      where h.width = ${w.width} and h.endpoint_id in (select id from owned) and h.bucket >= ${w.from} and h.bucket < ${w.to}
      union all
      select * from unfolded
    ), depth_now as (
      -- The depth as of the last fold, and the changes not folded yet.
      select d.endpoint_id, d.queue, d.pending, d.claimed from todo_depth d
      where d.endpoint_id in (select id from owned) and (d.pending <> 0 or d.claimed <> 0)
      union all
      select u.endpoint_id, u.queue, u.pending_change, u.claimed_change from unfolded u where u.pending_change <> 0 or u.claimed_change <> 0
    )`;
}

/** The start of the point a row's bucket falls in (date_part is a double, where extract's numeric is slow). */
const pointOf = (sql: Sql, w: HistoryWindow) => sql`to_timestamp(floor(date_part('epoch', b.bucket) / ${w.stepSeconds}) * ${w.stepSeconds})`;

const COUNT_SUMS = COUNT_COLUMNS.map((c) => `sum(b.${c})::int as ${c}`).join(', ');

/** A depth-now line in a read's rows: no bucket, its counts in the change columns. */
const DEPTH_NOW_ROW = (group: string) => `null::timestamptz as bucket, ${group}, 0, 0, 0, 0, 0, sum(n.pending)::int, sum(n.claimed)::int, 0, 0, 0, 0, 0, null::integer[]`;

type Split<R> = { rows: R[]; now: (DepthNow & Omit<R, keyof HistoryRow>)[] };
function split<R extends HistoryRow>(all: readonly (R & { bucket: Date | null })[]): Split<R> {
  const rows: R[] = [];
  const now: (DepthNow & Omit<R, keyof HistoryRow>)[] = [];
  for (const r of all) {
    if (r.bucket === null) {
      const { pending_change, claimed_change, ...rest } = r;
      now.push({ ...(rest as unknown as Omit<R, keyof HistoryRow>), queue: r.queue, pending: pending_change, claimed: claimed_change });
    } else rows.push(r);
  }
  return { rows, now };
}

/**
 * The buckets of the caller's endpoints in the window, per (point, endpoint, queue), summed over
 * the width's buckets in each point (folded and not), and each of their queues' depth now, read
 * together (one snapshot). Human-scoped: endpoints the human does not own contribute nothing.
 */
export async function historyOf(
  sql: Sql,
  humanId: string,
  endpointIds: readonly string[],
  w: HistoryWindow,
): Promise<Split<HistoryRow & { endpoint_id: string }>> {
  if (endpointIds.length === 0) return { rows: [], now: [] };
  const rows = await sql<(HistoryRow & { endpoint_id: string; bucket: Date | null })[]>`
    with ${windowRows(sql, humanId, endpointIds, w)}
    select bucket, endpoint_id, queue, created, claimed, completed, failed, dead, pending_change, claimed_change,
           rings_sent, heard_claim, heard_ack, unheard, digests, wait_hist from (
      select ${pointOf(sql, w)} as bucket, b.endpoint_id, b.queue, ${sql.unsafe(COUNT_SUMS)},
        ${sql.unsafe(histSumSql('b.wait_hist'))} as wait_hist
      from buckets b
      group by 1, 2, 3
    ) g
    union all
    select ${sql.unsafe(DEPTH_NOW_ROW('n.endpoint_id, n.queue'))} from depth_now n group by n.endpoint_id, n.queue
    order by 1 nulls first, 2, 3`;
  return split(rows);
}

/** A bucket's counts and depth changes, in HistoryRow's order, of the table aliased `t`. */
const countsOf = (t: string) => COUNT_COLUMNS.map((c) => `${t}.${c}`).join(', ');

/** Per (point, queue) of `buckets`, and each queue's depth now from `depth_now`: the CTEs both per-queue reads define. */
const perQueue = (sql: Sql, w: HistoryWindow) => sql`
    select bucket, queue, created, claimed, completed, failed, dead, pending_change, claimed_change,
           rings_sent, heard_claim, heard_ack, unheard, digests, wait_hist from (
      select ${pointOf(sql, w)} as bucket, b.queue, ${sql.unsafe(COUNT_SUMS)}, null::integer[] as wait_hist
      from buckets b group by 1, 2
    ) g
    union all
    select ${sql.unsafe(DEPTH_NOW_ROW('n.queue'))} from depth_now n group by n.queue
    order by 1 nulls first, 2`;

/**
 * The buckets of the caller's endpoints in the window per (point, queue), summed over the
 * endpoints: counts and depth changes added, and each queue's depth now summed over the endpoints
 * (the todos page's chart of one endpoint). No claim-wait histogram (wait_hist is null): the chart
 * draws depth and counts, and summing 48 bins a row was most of the read. All of a human's
 * endpoints read humanQueueHistoryOf instead.
 */
export async function queueHistoryOf(sql: Sql, humanId: string, endpointIds: readonly string[], w: HistoryWindow): Promise<Split<HistoryRow>> {
  if (endpointIds.length === 0) return { rows: [], now: [] };
  const rows = await sql<(HistoryRow & { bucket: Date | null })[]>`
    with ${windowRows(sql, humanId, endpointIds, w)}
    ${perQueue(sql, w)}`;
  return split(rows);
}

/**
 * What queueHistoryOf answers for every endpoint the human owns, from the sums per human
 * (todo_history_human, migration 0035) rather than each endpoint's buckets: a day of minutes of
 * the human's few queues, where the endpoints' own buckets were a day of minutes of each endpoint
 * (12.6 s at 10,000). The minute or two not folded yet and the depth now are still read per
 * endpoint; both are a row or two per queue.
 */
export async function humanQueueHistoryOf(sql: Sql, humanId: string, w: HistoryWindow): Promise<Split<HistoryRow>> {
  const rows = await sql<(HistoryRow & { bucket: Date | null })[]>`
    with owned as (
      select e.id from endpoints e join agents a on a.id = e.agent_id where a.owner_human_id = ${humanId}
    ), unfolded as materialized (
      select d.bucket, d.queue, ${sql.unsafe(countsOf('d'))}
      from todo_history_delta d
      where d.endpoint_id in (select id from owned) and d.bucket >= ${w.from} and d.bucket < ${w.to}
    ), buckets as not materialized (
      select h.bucket, h.queue, ${sql.unsafe(countsOf('h'))}
      from todo_history_human h
      where h.human_id = ${humanId} and h.width = ${w.width} and h.bucket >= ${w.from} and h.bucket < ${w.to}
      union all
      select * from unfolded
    ), depth_now as (
      select d.queue, d.pending, d.claimed from todo_depth d
      where d.endpoint_id in (select id from owned) and (d.pending <> 0 or d.claimed <> 0)
      union all
      select u.queue, u.pending_change, u.claimed_change from unfolded u where u.pending_change <> 0 or u.claimed_change <> 0
    )
    ${perQueue(sql, w)}`;
  return split(rows);
}

/**
 * Per endpoint, what its pending depth over the window is made of: its pending todos now (over
 * its queues) and the net change of them in each point with any, as parallel arrays of point
 * indexes (0 at `w.from`) and changes. Only the changes are read, not the buckets' counts.
 */
export async function pendingDepthOf(
  sql: Sql,
  humanId: string,
  endpointIds: readonly string[],
  w: HistoryWindow,
): Promise<{ endpoint_id: string; now: number; points: number[]; changes: number[] }[]> {
  if (endpointIds.length === 0) return [];
  const from = w.from.getTime() / 1000;
  return sql<{ endpoint_id: string; now: number; points: number[]; changes: number[] }[]>`
    with owned as (
      select e.id from endpoints e join agents a on a.id = e.agent_id
      where a.owner_human_id = ${humanId} and e.id = any(${sql.array([...endpointIds])}::uuid[])
    ), unfolded as materialized (
      -- The triggers' rows the history loop has not folded yet: in the depth now and its changes
      -- (none older than the window's start: see windowRows).
      select d.endpoint_id, d.bucket, d.pending_change from todo_history_delta d
      where d.endpoint_id in (select id from owned) and d.bucket >= ${w.from} and d.bucket < ${w.to} and d.pending_change <> 0
    ), changes as (
      select c.endpoint_id, floor((date_part('epoch', c.bucket) - ${from}) / ${w.stepSeconds})::int as point, sum(c.pending_change)::int as change
      from (
        select b.endpoint_id, b.bucket, b.pending_change from todo_history b
        where b.width = ${w.width} and b.endpoint_id in (select id from owned) and b.bucket >= ${w.from} and b.bucket < ${w.to}
          and b.pending_change <> 0
        union all
        select u.endpoint_id, u.bucket, u.pending_change from unfolded u
      ) c
      group by 1, 2
    ), now as (
      select n.endpoint_id, sum(n.pending)::int as now from (
        select d.endpoint_id, d.pending from todo_depth d where d.endpoint_id in (select id from owned)
        union all
        select u.endpoint_id, u.pending_change from unfolded u
      ) n group by 1
    )
    select o.id as endpoint_id, coalesce(n.now, 0) as now,
           coalesce(array_agg(c.point order by c.point) filter (where c.point is not null), '{}') as points,
           coalesce(array_agg(c.change order by c.point) filter (where c.point is not null), '{}') as changes
    from owned o left join now n on n.endpoint_id = o.id left join changes c on c.endpoint_id = o.id
    group by o.id, n.now`;
}

/**
 * Deliveries per point and outcome of one of the human's webhooks (the events it recorded):
 * routing's disposition (`routed` made a todo, `dropped`, `repeat`, `faulted`, `recorded`: nothing
 * to route, such as a ping), and `refused`: a delivery answered with an error (bad signature, bad
 * body, over the webhook's rate or the body limit), which is never recorded as an event; its count
 * comes from webhook_refusals. `verified` is false for every delivery to a generic webhook
 * (trusted by its URL), so it says nothing of a refusal.
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
    group by 1, 2
    union all
    -- Refused deliveries wrote no event: their counts per minute (migration 0033), every reason as one outcome.
    select to_timestamp(floor(extract(epoch from r.bucket) / ${w.stepSeconds}) * ${w.stepSeconds}), 'refused', sum(r.n)::int
    from webhook_refusals r
    join webhooks wh on wh.id = r.webhook_id
    join endpoints e on e.id = wh.endpoint_id join agents a on a.id = e.agent_id
    where r.webhook_id = ${webhookId} and a.owner_human_id = ${humanId} and r.bucket >= ${w.from} and r.bucket < ${w.to}
    group by 1
    order by 1, 2`;
}

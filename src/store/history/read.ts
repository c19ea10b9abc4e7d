import type { Sql } from '../../db/connect.ts';

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

/**
 * The buckets of the caller's endpoints in the window, per (point, endpoint, queue), summed over
 * shards and over the width's buckets in each point. Depth is the last snapshot in the point.
 * Human-scoped: endpoints the human does not own contribute nothing.
 */
export async function historyOf(
  sql: Sql,
  humanId: string,
  endpointIds: readonly string[],
  w: HistoryWindow,
): Promise<(HistoryRow & { endpoint_id: string })[]> {
  if (endpointIds.length === 0) return [];
  return sql<(HistoryRow & { endpoint_id: string })[]>`
    with owned as (
      select e.id from endpoints e join agents a on a.id = e.agent_id
      where a.owner_human_id = ${humanId} and e.id = any(${sql.array([...endpointIds])}::uuid[])
    ), buckets as (
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
    ), rows as (
      select to_timestamp(floor(extract(epoch from b.bucket) / ${w.stepSeconds}) * ${w.stepSeconds}) as point, b.*
      from buckets b
    ), depth as (
      select distinct on (endpoint_id, queue, point) endpoint_id, queue, point, pending, claimed_depth
      from rows where pending is not null order by endpoint_id, queue, point, bucket desc
    )
    select r.point as bucket, r.endpoint_id, r.queue,
      sum(r.created)::int as created, sum(r.claimed)::int as claimed, sum(r.completed)::int as completed,
      sum(r.failed)::int as failed, sum(r.dead)::int as dead,
      max(d.pending) as pending, max(d.claimed_depth) as claimed_depth,
      history_hist_sum(array_agg(r.wait_hist) filter (where r.wait_hist is not null)) as wait_hist,
      sum(r.rings_sent)::int as rings_sent, sum(r.heard_claim)::int as heard_claim, sum(r.heard_ack)::int as heard_ack,
      sum(r.unheard)::int as unheard, sum(r.digests)::int as digests
    from rows r left join depth d on d.endpoint_id = r.endpoint_id and d.queue = r.queue and d.point = r.point
    group by r.point, r.endpoint_id, r.queue
    order by r.point, r.endpoint_id, r.queue`;
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

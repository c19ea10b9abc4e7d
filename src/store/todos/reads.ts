import type { Sql, TxSql } from '../../db/connect.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';
import type { QueueStat } from '../../lib/metrics.ts';
import { deadLetter } from './predicates.ts';
import { todoMetaColumns, type TodoMetaRow, type TodoRow, type TodoStateFilter } from './row.ts';

import type { PageKey } from '../../domain/todo-cursor.ts';

export type { PageKey };

export interface ListFilter {
  /** Restrict to these queues; undefined means every queue of the endpoint. */
  queues?: readonly string[];
  queue?: string;
  /** A state, or `dead`: failed with no retry to come. */
  state?: TodoStateFilter;
  limit: number;
  /** Only rows after this one in the order (the next page). */
  after?: PageKey | null;
  includeSynthetic?: boolean;
}

const stateIs = (sql: Sql, state: TodoStateFilter) =>
  state === 'dead' ? sql`and ${deadLetter(sql)}` : sql`and state = ${state}`;

/**
 * Newest first, one endpoint, the given queues only, never the reserved queue; a page of at most
 * `limit` rows and the key of the next page (null when this one reached the end). Keyset paging on
 * (created_at, seq), both fixed at insert, so todos pushed while paging never shift a page.
 */
export async function listTodos(sql: Sql, endpointId: string, f: ListFilter): Promise<{ rows: TodoMetaRow[]; next: PageKey | null }> {
  const rows = await sql<(TodoMetaRow & { page_us: string; page_seq: string })[]>`
    select ${sql.unsafe(todoMetaColumns('todos'))},
      (extract(epoch from created_at) * 1000000)::bigint::text as page_us, seq::text as page_seq
    from todos
    where endpoint_id = ${endpointId}
      and queue <> ${RESERVED_QUEUE}
      ${f.queues ? sql`and queue = any(${sql.array([...f.queues])}::text[])` : sql``}
      ${f.queue ? sql`and queue = ${f.queue}` : sql``}
      ${f.state ? stateIs(sql, f.state) : sql``}
      ${f.includeSynthetic ? sql`` : sql`and not synthetic`}
      ${f.after ? sql`and (created_at, seq) < (timestamptz 'epoch' + ${f.after.createdUs.toString()}::bigint * interval '1 microsecond', ${f.after.seq.toString()}::bigint)` : sql``}
    order by created_at desc, seq desc
    limit ${f.limit + 1}`;
  const page = rows.slice(0, f.limit);
  const last = page.at(-1);
  const next = rows.length > f.limit && last ? { createdUs: BigInt(last.page_us), seq: BigInt(last.page_seq) } : null;
  return { rows: page.map(({ page_us: _us, page_seq: _seq, ...row }) => row), next };
}

/**
 * Per known queue (any queue a todo used or an endpoint is granted): counts by state and the age
 * of the oldest pending todo, for the metrics gauges. Self-test rows never count.
 */
export async function queueStatsUnscoped(sql: Sql, now: Date): Promise<QueueStat[]> {
  const rows = await sql<QueueStat[]>`
    with known as (
      select distinct queue from todos where not synthetic
      union select distinct unnest(scope_queues) from endpoints
    )
    select k.queue,
      count(t.id) filter (where t.state = 'pending')::int as pending,
      count(t.id) filter (where t.state = 'claimed')::int as claimed,
      count(t.id) filter (where t.state = 'done')::int as done,
      count(t.id) filter (where t.state = 'failed')::int as failed,
      count(t.id) filter (where t.state = 'canceled')::int as canceled,
      coalesce(extract(epoch from ${now}::timestamptz - min(t.created_at) filter (where t.state = 'pending')), 0)::float8 as oldest_pending_seconds
    from known k left join todos t on t.queue = k.queue and not t.synthetic
    where k.queue <> ${RESERVED_QUEUE}
    group by k.queue order by k.queue`;
  return [...rows];
}

export async function getTodo(
  sql: Sql | TxSql,
  endpointId: string,
  id: string,
  opts: { includeSynthetic?: boolean } = {},
): Promise<TodoRow | null> {
  const [row] = await sql<TodoRow[]>`
    select *, event_id::text as event_id from todos
    where id = ${id} and endpoint_id = ${endpointId} and queue <> ${RESERVED_QUEUE}
      ${opts.includeSynthetic ? sql`` : sql`and not synthetic`}`;
  return row ?? null;
}

/** The queue of any todo by id (a self-test ring names its todo's queue). Unscoped: no caller. */
export async function todoQueueUnscoped(sql: Sql, id: string): Promise<string | null> {
  const [row] = await sql<{ queue: string }[]>`select queue from todos where id = ${id}`;
  return row?.queue ?? null;
}

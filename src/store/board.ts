import type { Sql } from '../db/connect.ts';
import { RESERVED_QUEUE } from '../domain/scope.ts';
import type { SelfTestRow } from './selftests.ts';
import type { TodoRow, TodoState } from './todos/row.ts';
import { isTodoId } from '../domain/ids.ts';

/**
 * The board's reads across all of one human's endpoints. Every query reaches todos through
 * endpoints → agents.owner_human_id = the signed-in human, in the same statement; self-test
 * (synthetic) todos and the reserved queue never show.
 */

/** A todo as the board lists it: no payload, plus its endpoint's slug and agent name. */
export type HumanTodoRow = Pick<
  TodoRow,
  | 'id'
  | 'endpoint_id'
  | 'queue'
  | 'source'
  | 'kind'
  | 'title'
  | 'state'
  | 'owner'
  | 'attempt'
  | 'max_attempts'
  | 'lease_expires_at'
  | 'next_retry_at'
  | 'created_at'
  | 'updated_at'
  | 'payload_size'
  | 'claimed_session_id'
> & { endpoint_slug: string; agent_name: string } & ClaimingClient;

/** The claiming MCP session's client, while its row lasts (mcp_sessions holds client info per session). */
export interface ClaimingClient {
  claimed_client_name: string | null;
  claimed_client_version: string | null;
}

/** The claiming session's client columns; `t` is todos, joined within its own endpoint. */
const claimingClient = (sql: Sql) => sql`
  left join mcp_sessions s on s.id = t.claimed_session_id and s.endpoint_id = t.endpoint_id`;

const ownedTodo = (sql: Sql, humanId: string) => sql`
  a.owner_human_id = ${humanId} and not t.synthetic and t.queue <> ${RESERVED_QUEUE}`;

/** The signed-in human's todos across their endpoints, newest first. */
export async function listHumanTodos(
  sql: Sql,
  humanId: string,
  f: { endpointId?: string; state?: TodoState; queue?: string; limit: number },
): Promise<HumanTodoRow[]> {
  return sql<HumanTodoRow[]>`
    select t.id, t.endpoint_id, t.queue, t.source, t.kind, t.title, t.state, t.owner, t.attempt, t.max_attempts,
      t.lease_expires_at, t.next_retry_at, t.created_at, t.updated_at, t.payload_size, t.claimed_session_id,
      e.slug as endpoint_slug, a.name as agent_name, s.client_name as claimed_client_name, s.client_version as claimed_client_version
    from todos t join endpoints e on e.id = t.endpoint_id join agents a on a.id = e.agent_id ${claimingClient(sql)}
    where ${ownedTodo(sql, humanId)}
      ${f.endpointId ? sql`and t.endpoint_id = ${f.endpointId}` : sql``}
      ${f.state ? sql`and t.state = ${f.state}` : sql``}
      ${f.queue ? sql`and t.queue = ${f.queue}` : sql``}
    order by t.created_at desc, t.seq desc
    limit ${f.limit}`;
}

export interface TodoCount {
  endpoint_id: string;
  endpoint_slug: string;
  state: TodoState;
  queue: string;
  n: number;
}

/** How many of the human's todos are in each (endpoint, state, queue): the filter links' counts. */
export async function countHumanTodos(sql: Sql, humanId: string): Promise<TodoCount[]> {
  return sql<TodoCount[]>`
    select t.endpoint_id, e.slug as endpoint_slug, t.state, t.queue, count(*)::int as n
    from todos t join endpoints e on e.id = t.endpoint_id join agents a on a.id = e.agent_id
    where ${ownedTodo(sql, humanId)}
    group by t.endpoint_id, e.slug, t.state, t.queue order by e.slug, t.queue, t.state`;
}

/** Pending and claimed todos of each of the human's given endpoints (the cards' counts). */
export async function countEndpointTodos(
  sql: Sql,
  humanId: string,
  endpointIds: readonly string[],
): Promise<Map<string, { pending: number; claimed: number }>> {
  const out = new Map<string, { pending: number; claimed: number }>();
  if (endpointIds.length === 0) return out;
  // The human's endpoints first, then their todos counted: joined per todo, the count of a deep
  // endpoint (100,000 pending) probed endpoints and agents once per todo, 276 ms (issue 40).
  const rows = await sql<{ endpoint_id: string; pending: number; claimed: number }[]>`
    with mine as materialized (
      select e.id from endpoints e join agents a on a.id = e.agent_id
      where e.id = any(${sql.array([...endpointIds])}::uuid[]) and a.owner_human_id = ${humanId}
    )
    select t.endpoint_id,
      count(*) filter (where t.state = 'pending')::int as pending,
      count(*) filter (where t.state = 'claimed')::int as claimed
    from todos t
    where t.endpoint_id = any(array(select id from mine)) and t.state in ('pending', 'claimed')
      and not t.synthetic and t.queue <> ${RESERVED_QUEUE}
    group by t.endpoint_id`;
  for (const r of rows) out.set(r.endpoint_id, { pending: r.pending, claimed: r.claimed });
  return out;
}

/** One of the human's todos with its payload and result; another human's answers like a missing one. */
export async function getHumanTodo(sql: Sql, humanId: string, id: string): Promise<(TodoRow & { endpoint_slug: string; agent_name: string } & ClaimingClient) | null> {
  if (!isTodoId(id)) return null;
  const [row] = await sql<(TodoRow & { endpoint_slug: string; agent_name: string } & ClaimingClient)[]>`
    select t.*, t.event_id::text as event_id, e.slug as endpoint_slug, a.name as agent_name,
      s.client_name as claimed_client_name, s.client_version as claimed_client_version
    from todos t join endpoints e on e.id = t.endpoint_id join agents a on a.id = e.agent_id ${claimingClient(sql)}
    where t.id = ${id} and ${ownedTodo(sql, humanId)}`;
  return row ?? null;
}

/** The latest self-test of each given endpoint (callers pass only their own endpoints' ids). */
export async function latestSelfTests(sql: Sql, endpointIds: readonly string[]): Promise<SelfTestRow[]> {
  if (endpointIds.length === 0) return [];
  return sql<SelfTestRow[]>`
    select distinct on (endpoint_id) * from doorbell_tests
    where endpoint_id = any(${sql.array([...endpointIds])}::uuid[])
    order by endpoint_id, created_at desc, test_id desc`;
}

export interface TodoChange {
  id: string;
  endpoint_id: string;
  state: TodoState;
  created_at: Date;
  updated_at: Date;
}

/** Todos of the given endpoints changed at or after `since` (the live updates' cheap question). */
export async function todoChangesSince(sql: Sql, endpointIds: readonly string[], since: Date, limit = 200): Promise<TodoChange[]> {
  if (endpointIds.length === 0) return [];
  return sql<TodoChange[]>`
    select id, endpoint_id, state, created_at, updated_at from todos
    where endpoint_id = any(${sql.array([...endpointIds])}::uuid[]) and updated_at >= ${since}
      and not synthetic and queue <> ${RESERVED_QUEUE}
    order by updated_at, seq
    limit ${limit}`;
}

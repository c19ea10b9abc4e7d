import type { Sql, TxSql } from '../../db/connect.ts';
import { retryBackoffSeconds } from '../../domain/lifecycle.ts';
import { refusal, withinReach, type Caller } from './reach.ts';
import type { TodoRow } from './row.ts';

/**
 * Shared shape of heartbeat/complete/fail/release: the caller must hold the live claim, and a
 * fenced claim also needs its lease token (an unfenced one must be given none).
 */
async function transitionHeld(
  sql: Sql,
  caller: Caller,
  id: string,
  set: ReturnType<Sql>,
  what: string,
  leaseTokenHash: string | null,
): Promise<TodoRow> {
  const [row] = await sql<TodoRow[]>`
    update todos set ${set}
    where ${withinReach(sql, caller, id)} and state = 'claimed' and owner = ${caller.owner}
      and lease_token_hash is not distinct from ${leaseTokenHash}
    returning *, event_id::text as event_id`;
  if (row) return row;
  throw await refusal(sql, caller, id, (current) => {
    if (current.state === 'canceled') return `cannot ${what} todo ${id}: it was canceled, so this endpoint no longer holds its claim`;
    if (current.state !== 'claimed' || current.owner !== caller.owner) return `cannot ${what} todo ${id}: this endpoint does not hold its claim`;
    return current.lease_token_hash
      ? `cannot ${what} todo ${id}: its claim is fenced and lease_token is missing or wrong`
      : `cannot ${what} todo ${id}: its claim is not fenced, so pass no lease_token`;
  });
}

/** Columns cleared whenever a todo leaves the claimed state. */
export const unclaimSet = (sql: Sql | TxSql) => sql`lease_expires_at = null, lease_token_hash = null`;

export function heartbeatTodo(
  sql: Sql,
  caller: Caller,
  id: string,
  leaseSecs: number,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<TodoRow> {
  return transitionHeld(
    sql,
    caller,
    id,
    sql`lease_expires_at = ${now}::timestamptz + make_interval(secs => ${leaseSecs}), updated_at = ${now}`,
    'heartbeat',
    leaseTokenHash,
  );
}

export function completeTodo(
  sql: Sql,
  caller: Caller,
  id: string,
  result: unknown,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<TodoRow> {
  return transitionHeld(
    sql,
    caller,
    id,
    sql`state = 'done', result = ${result === undefined ? null : sql.json(result as never)},
        ${unclaimSet(sql)}, completed_at = ${now}, updated_at = ${now}`,
    'complete',
    leaseTokenHash,
  );
}

/** Below the attempt cap the todo waits out its backoff; at the cap it is a dead letter. */
export function failTodo(
  sql: Sql,
  caller: Caller,
  id: string,
  result: unknown,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<TodoRow> {
  // The backoff schedule is decided in lifecycle.ts; SQL indexes it by the attempt that failed.
  const table = sql.array(Array.from({ length: 32 }, (_, i) => retryBackoffSeconds(i + 1)));
  return transitionHeld(
    sql,
    caller,
    id,
    sql`state = 'failed', result = ${result === undefined ? null : sql.json(result as never)}, ${unclaimSet(sql)},
        next_retry_at = case when attempt >= max_attempts then null
          else ${now}::timestamptz + make_interval(secs => (${table}::int[])[least(greatest(attempt, 1), 32)]) end,
        completed_at = case when attempt >= max_attempts then ${now}::timestamptz else null end,
        updated_at = ${now}`,
    'fail',
    leaseTokenHash,
  );
}

/** Hands the todo back to the queue; the claim's attempt stays spent. */
export function releaseTodo(sql: Sql, caller: Caller, id: string, now: Date, leaseTokenHash: string | null = null): Promise<TodoRow> {
  return transitionHeld(
    sql,
    caller,
    id,
    sql`state = 'pending', owner = null, ${unclaimSet(sql)}, claimed_at = null, updated_at = ${now}`,
    'release',
    leaseTokenHash,
  );
}

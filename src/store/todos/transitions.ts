import { argsOf, compiledPer } from '../../db/compiled.ts';
import type { Sql, TxSql } from '../../db/connect.ts';
import { retryBackoffSeconds } from '../../domain/lifecycle.ts';
import { refusal, withinReach, type Caller } from './reach.ts';
import type { TodoRow } from './row.ts';

type Transition = 'heartbeat' | 'complete' | 'fail' | 'release';

/** The values a transition's statement takes at each run (src/db/compiled.ts). */
interface HeldArgs extends Record<string, unknown> {
  id: string;
  endpoint: string;
  queues: string[];
  owner: string;
  hash: string | null;
  now: Date;
  /** heartbeat: the new lease. */
  lease: number | null;
  /** complete and fail: the result as JSON text (null: none). */
  result: string | null;
}

/** Placeholders for the values of HeldArgs while a statement is composed. */
const a = argsOf<HeldArgs>();

/** What each transition writes, over the todo the caller holds. */
function assignments(sql: Sql, what: Transition) {
  const now = sql`${a('now')}::timestamptz`;
  const result = sql`${a('result')}::text::jsonb`;
  switch (what) {
    case 'heartbeat':
      return sql`lease_expires_at = ${now} + make_interval(secs => ${a('lease')}::int), updated_at = ${now}`;
    case 'complete':
      return sql`state = 'done', result = ${result}, ${unclaimSet(sql)}, completed_at = ${now}, updated_at = ${now}`;
    case 'fail': {
      // Below the attempt cap the todo waits out its backoff (decided in lifecycle.ts, indexed by the
      // attempt that failed); at the cap it is a dead letter.
      const table = sql.array(Array.from({ length: 32 }, (_, i) => retryBackoffSeconds(i + 1)));
      return sql`state = 'failed', result = ${result}, ${unclaimSet(sql)},
        next_retry_at = case when attempt >= max_attempts then null
          else ${now} + make_interval(secs => (${table}::int[])[least(greatest(attempt, 1), 32)]) end,
        completed_at = case when attempt >= max_attempts then ${now} else null end,
        updated_at = ${now}`;
    }
    case 'release':
      return sql`state = 'pending', owner = null, ${unclaimSet(sql)}, claimed_at = null, updated_at = ${now}`;
  }
}

/** Each transition's statement, composed once (src/db/compiled.ts). */
const heldStatement = compiledPer<Transition, HeldArgs>(
  (what) => what,
  (sql, what) => {
    const caller: Caller = { endpointId: a('endpoint'), owner: a('owner'), queues: a('queues') as unknown as string[] };
    return sql`
      update todos set ${assignments(sql, what)}
      where ${withinReach(sql, caller, a('id'))} and state = 'claimed' and owner = ${caller.owner}::text
        and lease_token_hash is not distinct from ${a('hash')}::text
      returning *, event_id::text as event_id`;
  },
);

/**
 * Shared shape of heartbeat/complete/fail/release: the caller must hold the live claim, and a
 * fenced claim also needs its lease token (an unfenced one must be given none).
 */
async function transitionHeld(
  sql: Sql,
  caller: Caller,
  id: string,
  what: Transition,
  values: { now: Date; leaseTokenHash: string | null; lease?: number; result?: unknown },
): Promise<TodoRow> {
  const [row] = await heldStatement(sql, what).run<TodoRow>(sql, {
    id,
    endpoint: caller.endpointId,
    queues: [...caller.queues],
    owner: caller.owner,
    hash: values.leaseTokenHash,
    now: values.now,
    lease: values.lease ?? null,
    // No result, or JSON null, stores SQL NULL.
    result: values.result === undefined || values.result === null ? null : JSON.stringify(values.result),
  });
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
  return transitionHeld(sql, caller, id, 'heartbeat', { now, leaseTokenHash, lease: leaseSecs });
}

export function completeTodo(
  sql: Sql,
  caller: Caller,
  id: string,
  result: unknown,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<TodoRow> {
  return transitionHeld(sql, caller, id, 'complete', { now, leaseTokenHash, result });
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
  return transitionHeld(sql, caller, id, 'fail', { now, leaseTokenHash, result });
}

/** Hands the todo back to the queue; the claim's attempt stays spent. */
export function releaseTodo(sql: Sql, caller: Caller, id: string, now: Date, leaseTokenHash: string | null = null): Promise<TodoRow> {
  return transitionHeld(sql, caller, id, 'release', { now, leaseTokenHash });
}

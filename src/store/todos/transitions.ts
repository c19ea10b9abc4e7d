import { argsOf, compiledPer, rowsBucket } from '../../db/compiled.ts';
import type { Fragment, Sql, TxSql } from '../../db/connect.ts';
import type { SwitchboardError } from '../../domain/errors.ts';
import { retryBackoffSeconds } from '../../domain/lifecycle.ts';
import { refusal, withinReach, type Caller } from './reach.ts';
import { isDead, todoMetaColumns, type TodoMetaRow } from './row.ts';
import { rfc3339 } from '../../domain/time.ts';

export type Transition = 'heartbeat' | 'complete' | 'fail' | 'release';

/** One call of a transition: the todo, its fence's hash, when, and what heartbeat or complete/fail give. */
export interface HeldCall {
  id: string;
  leaseTokenHash: string | null;
  now: Date;
  /** heartbeat: the new lease, in seconds. */
  lease?: number;
  /** complete and fail: the result (absent or null: none). */
  result?: unknown;
}

/** The values a transition's statement takes at each run (src/db/compiled.ts). */
interface HeldArgs extends Record<string, unknown> {
  endpoint: string;
  queues: string[];
  owner: string;
  /** JSON text: HeldRow[]. */
  rows: string;
}

/** A row of a transition statement's input; the names keep clear of todos' columns. */
interface HeldRow {
  n: number;
  todo_id: string;
  lease_hash: string | null;
  at: string;
  lease_secs: number | null;
  outcome: unknown;
}

/** Placeholders for the values of HeldArgs while a statement is composed. */
const a = argsOf<HeldArgs>();

/** What each transition writes, over the todo the caller holds, from its input row `r`. */
function assignments(sql: Sql, what: Transition) {
  const now = sql`r.at`;
  const result = sql`r.outcome`;
  switch (what) {
    case 'heartbeat':
      return sql`lease_expires_at = ${now} + make_interval(secs => r.lease_secs), updated_at = ${now}`;
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

/** Each transition's statement for each number of rows, composed once (src/db/compiled.ts). */
const heldStatement = compiledPer<{ what: Transition; rows: number }, HeldArgs>(
  (v) => `${v.what}/${rowsBucket(v.rows)}`,
  (sql, { what, rows }) => heldUpdate(sql, what, rows, { endpointId: a('endpoint'), owner: a('owner'), queues: a('queues') as unknown as string[] }),
);

/**
 * A transition's UPDATE for up to `rows` input rows (the `rows` arg, JSON text of HeldRow[]) of
 * `caller` (its fields are args of the statement it goes in), returning each todo the caller held
 * as a TodoMetaRow with its row's `n`.
 */
export function heldUpdate(sql: Sql, what: Transition, rows: number, caller: Caller): Fragment {
  // The todo's id comes from the row: a fragment where withinReach takes a value.
  const rowTodo = sql`r.todo_id` as unknown as string;
  return sql`
    update todos set ${assignments(sql, what)}
    from (
      select * from jsonb_to_recordset(${a('rows')}::text::jsonb)
        as r(n int, todo_id text, lease_hash text, at timestamptz, lease_secs int, outcome jsonb)
      -- The planner takes a set-returning function for 100 rows; a literal limit tells it how few.
      limit ${sql.unsafe(String(rowsBucket(rows)))}
    ) r
    where ${withinReach(sql, caller, rowTodo)} and state = 'claimed' and owner = ${caller.owner}::text
      and lease_token_hash is not distinct from r.lease_hash
    returning ${sql.unsafe(todoMetaColumns('todos'))}, r.n`;
}

/** The input rows of heldUpdate, as its `rows` arg takes them: call i is row n = i + 1. */
export function heldRows(calls: readonly HeldCall[]): string {
  const rows: HeldRow[] = calls.map((c, i) => ({
    n: i + 1,
    todo_id: c.id,
    lease_hash: c.leaseTokenHash,
    at: c.now.toISOString(),
    lease_secs: c.lease ?? null,
    // No result, or JSON null, stores SQL NULL.
    outcome: c.result === undefined ? null : c.result,
  }));
  return JSON.stringify(rows);
}

/**
 * Runs one transition for several todos of one caller in one statement. `[i]` is call i's todo
 * after it, or undefined when the caller did not hold it (heldRefusal says why). No two calls may
 * name the same todo.
 */
export async function transitionHeldTodos(sql: Sql, caller: Caller, what: Transition, calls: readonly HeldCall[]): Promise<(TodoMetaRow | undefined)[]> {
  const answers = await heldStatement(sql, { what, rows: calls.length }).run<TodoMetaRow & { n: number }>(sql, {
    endpoint: caller.endpointId,
    queues: [...caller.queues],
    owner: caller.owner,
    rows: heldRows(calls),
  });
  const byCall: (TodoMetaRow | undefined)[] = new Array(calls.length);
  for (const { n, ...row } of answers) byCall[n - 1] = row;
  return byCall;
}

/**
 * Why a transition of `id` touched nothing: the todo is finished or waiting (its state says which),
 * another agent holds it, or the fence is wrong. A conflict carrying `state` (reach.ts).
 */
export function heldRefusal(sql: Sql, caller: Caller, id: string, what: Transition): Promise<SwitchboardError> {
  return refusal(sql, caller, id, (current) => {
    const cannot = `cannot ${what} todo ${id}`;
    switch (current.state) {
      case 'canceled':
        return `${cannot}: it was canceled, so this endpoint no longer holds its claim`;
      case 'done':
        return `${cannot}: it is already finished (state done), so no claim on it is left`;
      case 'failed':
        return isDead(current)
          ? `${cannot}: it is already finished (state failed, a dead letter), so no claim on it is left`
          : `${cannot}: it already failed (state failed) and waits for its retry at ${rfc3339(current.next_retry_at)}; claim it again then`;
      case 'pending':
        return `${cannot}: it is pending, so no one holds its claim (a lapsed lease or a release hands a todo back); claim it first`;
    }
    if (current.owner !== caller.owner) return `${cannot}: another agent holds its claim`;
    return current.lease_token_hash
      ? `${cannot}: its claim is fenced and lease_token is missing or wrong`
      : `${cannot}: its claim is not fenced, so pass no lease_token`;
  });
}

/**
 * Shared shape of heartbeat/complete/fail/release: the caller must hold the live claim, and a
 * fenced claim also needs its lease token (an unfenced one must be given none).
 */
async function transitionHeld(sql: Sql, caller: Caller, what: Transition, call: HeldCall): Promise<TodoMetaRow> {
  const [row] = await transitionHeldTodos(sql, caller, what, [call]);
  if (row) return row;
  throw await heldRefusal(sql, caller, call.id, what);
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
): Promise<TodoMetaRow> {
  return transitionHeld(sql, caller, 'heartbeat', { id, now, leaseTokenHash, lease: leaseSecs });
}

export function completeTodo(
  sql: Sql,
  caller: Caller,
  id: string,
  result: unknown,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<TodoMetaRow> {
  return transitionHeld(sql, caller, 'complete', { id, now, leaseTokenHash, result });
}

/** Below the attempt cap the todo waits out its backoff; at the cap it is a dead letter. */
export function failTodo(
  sql: Sql,
  caller: Caller,
  id: string,
  result: unknown,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<TodoMetaRow> {
  return transitionHeld(sql, caller, 'fail', { id, now, leaseTokenHash, result });
}

/** Hands the todo back to the queue; the claim's attempt stays spent. */
export function releaseTodo(sql: Sql, caller: Caller, id: string, now: Date, leaseTokenHash: string | null = null): Promise<TodoMetaRow> {
  return transitionHeld(sql, caller, 'release', { id, now, leaseTokenHash });
}

import type { Sql, TxSql } from '../../db/connect.ts';
import { conflict, notFound } from '../../domain/errors.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';
import { notifyExpression } from '../channels.ts';
import { unannounced } from './announce.ts';
import { isPushEligible } from './predicates.ts';
import { getTodo } from './reads.ts';
import type { TodoRow } from './row.ts';
import { unclaimSet } from './transitions.ts';

// What the human who owns an endpoint does to one of its todos (cancel, retry). The endpoint is
// already resolved and owned; every statement still names it, so another endpoint's todo, a
// self-test todo and the reserved queue answer exactly like a missing todo.

const ownTodo = (sql: Sql | TxSql, endpointId: string, id: string) =>
  sql`id = ${id} and endpoint_id = ${endpointId} and not synthetic and queue <> ${RESERVED_QUEUE}`;

/** Who canceled, as the canceled todo's result records it. */
export interface Canceler {
  id: string;
  handle: string;
  /** A sentence for people: who, and through what. */
  detail: string;
}

/**
 * Pending, claimed or failed (a retry waiting or a dead letter) -> canceled, terminal. A claim
 * ends with it: the lease and its token go, so the holder's heartbeat, complete, fail and release
 * are refused as after a lost lease. The result records who canceled, the state it left and the
 * idempotency key, which the todo gives up: a later push with that key makes a new todo.
 */
export async function cancelTodo(sql: Sql, endpointId: string, id: string, by: Canceler, now: Date): Promise<TodoRow> {
  const [row] = await sql<TodoRow[]>`
    update todos set state = 'canceled',
      result = jsonb_strip_nulls(jsonb_build_object(
        'canceled_by', ${sql.json({ id: by.id, handle: by.handle })}::jsonb,
        'detail', ${by.detail}::text,
        'previous_state', state,
        'idempotency_key', idempotency_key)),
      idempotency_key = null, next_retry_at = null, ${unclaimSet(sql)},
      completed_at = ${now}, updated_at = ${now}
    where ${ownTodo(sql, endpointId, id)} and state in ('pending', 'claimed', 'failed')
    returning *, event_id::text as event_id`;
  if (row) return row;
  const current = await getTodo(sql, endpointId, id);
  if (!current) throw notFound(`no todo ${id} on this endpoint`);
  throw conflict(`todo ${id} is already ${current.state}; only a pending, claimed or failed todo can be canceled`, { state: current.state });
}

/** PostgreSQL's unique_violation: here, a live todo already holds the retried todo's key. */
const UNIQUE_VIOLATION = '23505';

/**
 * A failed todo (a dead letter, or one waiting for its retry) back to pending now: attempts start
 * again from 0 and the ring budget is full again. Like a push, it wakes every instance (todo_ready
 * at commit) when it passes the sender gate; `pushEligible` says whether it did, for this
 * instance's own fan-out. Canceled and done todos stay finished (409).
 */
export async function retryTodo(sql: Sql, endpointId: string, id: string, now: Date): Promise<{ todo: TodoRow; pushEligible: boolean }> {
  let updated: TodoRow | undefined;
  let eligible = false;
  try {
    ({ updated, eligible } = await sql.begin(async (tx) => {
      const [row] = await tx<TodoRow[]>`
        update todos set state = 'pending', attempt = 0, next_retry_at = null, run_at = null, owner = null,
          ${unclaimSet(tx)}, claimed_at = null, completed_at = null,
          ring_attempts = 0, ${unannounced(tx)}, updated_at = ${now}
        where ${ownTodo(tx, endpointId, id)} and state = 'failed'
        returning *, event_id::text as event_id`;
      if (!row) return { updated: undefined, eligible: false };
      const ready = notifyExpression(tx, 'todo_ready', { endpointId: row.endpoint_id, queue: row.queue });
      const [gate] = await tx<{ eligible: boolean }[]>`
        select ${isPushEligible(tx, row.id)} as eligible, case when ${isPushEligible(tx, row.id)} then ${ready} end`;
      return { updated: row, eligible: gate!.eligible };
    }));
  } catch (err) {
    if ((err as { code?: unknown }).code !== UNIQUE_VIOLATION) throw err;
    throw conflict(`todo ${id} cannot be retried: a live todo on this endpoint already holds its idempotency key`);
  }
  if (updated) return { todo: updated, pushEligible: eligible };
  const current = await getTodo(sql, endpointId, id);
  if (!current) throw notFound(`no todo ${id} on this endpoint`);
  throw conflict(`todo ${id} is ${current.state}; only a failed todo (a dead letter or one waiting for its retry) can be retried`, {
    state: current.state,
  });
}

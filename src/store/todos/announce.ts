import type { Sql, TxSql } from '../../db/connect.ts';
import { pushEligible } from './predicates.ts';

/**
 * Announced: the one decision of whether a pending todo has been told to its endpoint since it
 * became ready, and how (SPEC-0022; issue 34). A todo is announced by its own ring or by one digest,
 * never both. `last_ringed_by` says which ('ring' or 'digest') and `last_ringed_at` when:
 *
 * - the ready ring (push fan-out, todo_ready, the LISTEN catch-up) takes only a todo nobody has
 *   announced or charged since it became ready, and gives it back when nothing was written, in
 *   one transaction (`ringReadyOnce`);
 * - the heartbeat sweep re-rings on the backoff from `last_ringed_at` (push.ts), and says 'ring';
 *   a charged ring that reached no session keeps its charge but gives up the announcement, in the
 *   charge's transaction;
 * - a digest counts and marks, in one statement, the rows no ring announced at or after the moment
 *   it summarizes (`announceByDigest`), and keeps the mark only if the digest was written.
 *
 * Re-queueing (`unannounced`) clears both columns: the todo is new work to announce.
 */

/** The assignments that make a todo unannounced again, for a statement that re-queues it. */
export const unannounced = (sql: Sql | TxSql) => sql`last_ringed_at = null, last_ringed_by = null`;

/**
 * The ready ring, in one transaction: takes the todo if nobody announced or charged it since it
 * became ready, calls `ring` (which writes the doorbell synchronously and says whether it landed)
 * while the row is locked, and gives the announcement back when nothing was written. A digest
 * counting the endpoint meanwhile waits for the outcome, so a ring that fails never hides the
 * todo from it. Answers whether the doorbell was written ('not_claimed' when someone else has it).
 */
export async function ringReadyOnce(sql: Sql, todoId: string, at: Date, ring: () => boolean): Promise<'rung' | 'unheard' | 'not_claimed'> {
  return sql.begin(async (tx) => {
    const rows = await tx`
      update todos t set last_ringed_at = ${at}, last_ringed_by = 'ring'
      where t.id = ${todoId} and t.last_ringed_at is null and ${pushEligible(tx)}
      returning t.id`;
    if (rows.length === 0) return 'not_claimed' as const;
    if (ring()) return 'rung' as const;
    await tx`update todos set last_ringed_at = null, last_ringed_by = null where id = ${todoId}`;
    return 'unheard' as const;
  });
}

/** Sweep rings charged at `at` that reached no session: their charge stands (the budget is spent), their announcement does not. */
export async function withdrawSweepRings(sql: Sql | TxSql, todoIds: readonly string[], at: Date): Promise<void> {
  if (todoIds.length === 0) return;
  await sql`
    update todos set last_ringed_by = null
    where id = any(${sql.array([...todoIds])}::text[]) and last_ringed_by = 'ring' and last_ringed_at = ${at} and state = 'pending'`;
}

export interface BacklogTodo {
  id: string;
  queue: string;
  created_at: Date;
}

export interface DigestScope {
  /** The moment the digest summarizes (the return to in, or the stream's attach): a todo rung then or later is its ring's. */
  since: Date;
  /** Only todos that became ready (created or re-queued) no later than this (the reconnect digest: the attach). */
  readyBy?: Date;
}

/** Thrown inside the digest's transaction to roll its mark back when the digest was not written. */
class NotDelivered extends Error {}

/**
 * A digest's count and mark in one transaction: the endpoint's push-eligible pending todos in
 * `scope` that no ring announced since `scope.since` are marked announced by a digest at `at`
 * (`last_ringed_at`; `ring_attempts` untouched) and handed to `deliver`, which writes the digest
 * synchronously and says whether it was written. The mark commits only then, so exactly the rows
 * counted are marked, and only by a written digest; meanwhile the rows are locked, so a ring or a
 * claim waits for the answer instead of slipping between the count and the mark. Returns the
 * counted todos, oldest first, or null when there were some and the digest was not written.
 */
export async function announceByDigest(
  sql: Sql,
  endpointId: string,
  scope: DigestScope,
  at: Date,
  deliver: (counted: BacklogTodo[]) => boolean,
): Promise<BacklogTodo[] | null> {
  try {
    return await sql.begin(async (tx) => {
      const rows = await tx<(BacklogTodo & { seq: string })[]>`
        update todos t set last_ringed_at = ${at}, last_ringed_by = 'digest'
        where t.endpoint_id = ${endpointId} and ${pushEligible(tx)}
          ${scope.readyBy ? tx`and t.updated_at <= ${scope.readyBy}` : tx``}
          and not (t.last_ringed_by is not distinct from 'ring' and t.last_ringed_at >= ${scope.since})
        returning t.id, t.queue, t.created_at, t.seq`;
      const counted = rows
        .sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || Number(BigInt(a.seq) - BigInt(b.seq)))
        .map(({ id, queue, created_at }) => ({ id, queue, created_at }));
      if (counted.length === 0) return counted;
      if (!deliver(counted)) throw new NotDelivered();
      return counted;
    });
  } catch (err) {
    if (err instanceof NotDelivered) return null;
    throw err;
  }
}

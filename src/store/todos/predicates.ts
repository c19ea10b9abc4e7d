import type { Sql, TxSql } from '../../db/connect.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';

/**
 * The todo conditions more than one statement relies on, each written once. Unqualified fragments
 * name the columns of `todos`; pushEligible needs the table aliased `t`.
 */

/** A dead letter: failed, and no retry is coming (row.ts's isDead is the same rule for a row in hand). */
export const deadLetter = (sql: Sql | TxSql) => sql`(state = 'failed' and next_retry_at is null)`;

/**
 * Live: pending, claimed, or failed with a retry still to come (not done, not canceled, not
 * dead-lettered). Revocation dead-letters exactly these; the board and listings call the rest finished.
 */
export const live = (sql: Sql | TxSql) => sql`state <> 'done' and state <> 'canceled' and not ${deadLetter(sql)}`;

/**
 * Finished, the complement of live: done, canceled or a dead letter; nothing more will happen to
 * it. Spelled as migration 0015's todos_finished_idx is, so retention's scan can use that index
 * (predicates.test.ts keeps the two equal).
 */
export const finished = (sql: Sql | TxSql) => sql`(state = 'done' or state = 'canceled' or ${deadLetter(sql)})`;

/**
 * The live rows that hold their idempotency key: migration 0001's todos_live_key_idx predicate,
 * which ON CONFLICT must name to infer that index (SQL cannot import it; predicates.test.ts keeps
 * the two equal). It does not say `canceled` because cancelling gives the key up (sets it null),
 * so no canceled row is ever in it; 0015 explains why the index itself stayed as it was.
 */
export const liveKey = (sql: Sql | TxSql) =>
  sql`idempotency_key is not null and state <> 'done' and (state <> 'failed' or next_retry_at is not null)`;

/** A claimed todo whose lease ran out at `now`: the reaper's and a claimer's to take. */
export const leaseExpired = (sql: Sql | TxSql, now: Date) => sql`state = 'claimed' and lease_expires_at < ${now}`;

/** A failed todo whose retry wait is over at `now`. */
export const retryDue = (sql: Sql | TxSql, now: Date) =>
  sql`state = 'failed' and next_retry_at is not null and next_retry_at <= ${now}`;

/** Claims left: a lease that expired or a retry that came due may be claimed again only below the cap. */
const attemptsLeft = (sql: Sql | TxSql) => sql`attempt < max_attempts`;

/** A delayed todo whose run_at has passed at `now` but that the reaper has not released yet. */
export const delayDue = (sql: Sql | TxSql, now: Date) => sql`state = 'pending' and run_at is not null and run_at <= ${now}`;

/**
 * The four ways a todo becomes claimable, for a claim that scans each state by its own index:
 * pending and due (run_at null: todos_claim_scan_idx), a delayed todo come due before the reaper
 * released it, an expired lease, a retry whose wait is over.
 */
export const claimableStates = (sql: Sql | TxSql, now: Date) => ({
  pending: sql`state = 'pending' and run_at is null`,
  dueDelay: delayDue(sql, now),
  expiredLease: sql`${leaseExpired(sql, now)} and ${attemptsLeft(sql)}`,
  dueRetry: sql`${retryDue(sql, now)} and ${attemptsLeft(sql)}`,
});

/** Rows an owner may claim at `now`: pending and due, an expired lease, or a retry whose wait is over. */
export const claimable = (sql: Sql | TxSql, owner: string, now: Date) => {
  const states = claimableStates(sql, now);
  return sql`
  (assignee is null or assignee = ${owner})
  and ((state = 'pending' and (run_at is null or run_at <= ${now})) or (${states.expiredLease}) or (${states.dueRetry}))`;
};

/**
 * Push eligibility, the sender gate: the one predicate that decides whether a todo `t` may ring.
 * Pending and due (a delayed todo rings once the reaper released it), not quarantined, not a
 * self-test row, minted by a delivery that was verified
 * (signed or operator-authored) or arrived on a token-trust webhook. A todo with no event never
 * rings; it is still pulled and claimed as usual. `events` names the relation the todo's event is
 * read from: the table, or the CTE of a statement that inserts the event and its todo together
 * (its own rows are not yet visible in the table to that statement).
 */
export const pushEligible = (sql: Sql | TxSql, events: 'events' | 'new_event' = 'events') => sql`
  t.state = 'pending' and t.run_at is null and t.queue <> ${RESERVED_QUEUE} and not t.synthetic
  and exists (select 1 from ${sql(events)} ev where ev.id = t.event_id and (ev.verified or ev.trust_mode = 'token'))`;

/** A boolean expression: whether one todo passes the sender gate right now. */
export const isPushEligible = (sql: Sql | TxSql, todoId: string) =>
  sql`exists (select 1 from todos t where t.id = ${todoId} and ${pushEligible(sql)})`;

import type { Sql, TxSql } from '../../db/connect.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';

/**
 * The todo conditions more than one statement relies on, each written once. Unqualified fragments
 * name the columns of `todos`; pushEligible needs the table aliased `t`.
 */

/**
 * Live: pending, claimed, or failed with a retry still to come (not done, not dead-lettered).
 * Live rows hold their idempotency key, and revocation dead-letters exactly these. Migration 0001's
 * todos_live_key_idx repeats it (SQL cannot import it); predicates.test.ts keeps the two equal.
 */
export const live = (sql: Sql | TxSql) => sql`state <> 'done' and (state <> 'failed' or next_retry_at is not null)`;

/** The partial index's predicate: ON CONFLICT must name it to infer todos_live_key_idx. */
export const liveKey = (sql: Sql | TxSql) => sql`idempotency_key is not null and ${live(sql)}`;

/** A claimed todo whose lease ran out at `now`: the reaper's and a claimer's to take. */
export const leaseExpired = (sql: Sql | TxSql, now: Date) => sql`state = 'claimed' and lease_expires_at < ${now}`;

/** A failed todo whose retry wait is over at `now`. */
export const retryDue = (sql: Sql | TxSql, now: Date) =>
  sql`state = 'failed' and next_retry_at is not null and next_retry_at <= ${now}`;

/** Claims left: a lease that expired or a retry that came due may be claimed again only below the cap. */
const attemptsLeft = (sql: Sql | TxSql) => sql`attempt < max_attempts`;

/** The three ways a todo becomes claimable, for a claim that scans each state by its own index. */
export const claimableStates = (sql: Sql | TxSql, now: Date) => ({
  pending: sql`state = 'pending'`,
  expiredLease: sql`${leaseExpired(sql, now)} and ${attemptsLeft(sql)}`,
  dueRetry: sql`${retryDue(sql, now)} and ${attemptsLeft(sql)}`,
});

/** Rows an owner may claim at `now`: pending, an expired lease, or a retry whose wait is over. */
export const claimable = (sql: Sql | TxSql, owner: string, now: Date) => {
  const states = claimableStates(sql, now);
  return sql`
  (assignee is null or assignee = ${owner})
  and (${states.pending} or (${states.expiredLease}) or (${states.dueRetry}))`;
};

/**
 * Push eligibility, the sender gate: the one predicate that decides whether a todo `t` may ring.
 * Pending, not quarantined, not a self-test row, minted by a delivery that was verified
 * (signed or operator-authored) or arrived on a token-trust webhook. A todo with no event never
 * rings; it is still pulled and claimed as usual.
 */
export const pushEligible = (sql: Sql | TxSql) => sql`
  t.state = 'pending' and t.queue <> ${RESERVED_QUEUE} and not t.synthetic
  and exists (select 1 from events ev where ev.id = t.event_id and (ev.verified or ev.trust_mode = 'token'))`;

/** A boolean expression: whether one todo passes the sender gate right now. */
export const isPushEligible = (sql: Sql | TxSql, todoId: string) =>
  sql`exists (select 1 from todos t where t.id = ${todoId} and ${pushEligible(sql)})`;

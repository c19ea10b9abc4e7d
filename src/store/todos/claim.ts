import type { Fragment, Sql, TxSql } from '../../db/connect.ts';
import { acknowledgeRing, ackedRingColumns, type AckedRing } from '../rings.ts';
import { claimable } from './predicates.ts';
import { refusal, withinReach, type Caller } from './reach.ts';
import { rfc3339 } from '../../domain/time.ts';
import { isDead, type TodoRow } from './row.ts';

/** What a self-test todo's claim completes it with, in the same statement. */
export const SELF_TEST_RESULT = { self_test: true, note: 'no work needed' } as const;

/**
 * The claim's assignments on `todos t`. A self-test (synthetic) todo is completed by its claim
 * instead of leased: proving the doorbell loop is the only work it asks for.
 */
export const claimSet = (sql: Sql | TxSql, owner: string, session: string | null | Fragment, leaseTokenHash: string | null | Fragment, now: Date, lease: number) => sql`
  state = case when t.synthetic then 'done' else 'claimed' end,
  owner = ${owner},
  claimed_session_id = ${session},
  lease_token_hash = case when t.synthetic then null else ${leaseTokenHash} end,
  lease_expires_at = case when t.synthetic then null else ${now}::timestamptz + make_interval(secs => ${lease}) end,
  result = case when t.synthetic then ${sql.json(SELF_TEST_RESULT)} else t.result end,
  completed_at = case when t.synthetic then ${now}::timestamptz else t.completed_at end,
  attempt = t.attempt + 1, claimed_at = ${now}, next_retry_at = null, run_at = null, updated_at = ${now}`;

/** A claimed todo and the doorbell rings its claim acknowledged. */
export type ClaimedTodo = TodoRow & { acked_rings: AckedRing[] };

/**
 * Wraps a claiming UPDATE (a CTE named `claimed` returning t.*, one row or several) so that, in
 * the same statement and so the same transaction, each claim acknowledges every open ring of its
 * todo on that endpoint as the session that claimed it and, unless it is a self-test claim (which
 * touches only its own ring), every digest ring sent before it; a self-test claim is stamped on its
 * test report. When several todos of one endpoint are claimed together, an open digest ring is
 * acknowledged once, by one of them, as two claims one after the other would.
 *
 * The open rings are found per claimed todo in two branches, each an exact probe of its partial
 * index (a todo's rings by endpoint and todo id, an endpoint's digests by endpoint and time; a
 * digest has no todo id). One condition with an OR between the two could use neither index, and
 * the claim then read every open ring in the table, unheard ones of other endpoints included:
 * 6 ms per claim with 50,000 of them (src/store/plans.test.ts holds the plan).
 */
export const withAcknowledgements = (sql: Sql | TxSql, now: Date) => sql`
  ${acknowledgements(sql, now)}
  select c.*, c.event_id::text as event_id, ${ackedRingsOf(sql, 'c')} as acked_rings
  from claimed c`;

/** The CTEs of withAcknowledgements (`acked`, `tested`), for a statement that ends with its own select. */
export const acknowledgements = (sql: Sql | TxSql, now: Date) => sql`
  acked as (
    update doorbell_rings r set ${acknowledgeRing(sql, 'claim', sql`c.claimed_session_id`, now)}
    from claimed c cross join lateral (
      select o.ring_id from doorbell_rings o
      where o.endpoint_id = c.endpoint_id and o.todo_id = c.id and o.acked_at is null
      union all
      select o.ring_id from doorbell_rings o
      where o.endpoint_id = c.endpoint_id and o.kind = 'digest' and o.acked_at is null and o.sent_at <= ${now} and not c.synthetic
    ) open
    where r.ring_id = open.ring_id and r.acked_at is null
    returning ${ackedRingColumns(sql)}, c.id as claimed_id
  ),
  tested as (
    update doorbell_tests d set claimed_at = ${now}
    from claimed c where c.synthetic and d.endpoint_id = c.endpoint_id and d.todo_id = c.id and d.claimed_at is null
    returning d.test_id
  )`;

/** The rings `acknowledgements` acknowledged for the claimed row `alias`, as a JSON array. */
export const ackedRingsOf = (sql: Sql | TxSql, alias: string) =>
  sql`coalesce((select jsonb_agg(to_jsonb(a) - 'claimed_id') from acked a where a.claimed_id = ${sql.unsafe(alias)}.id), '[]'::jsonb)`;

/**
 * Claims one todo by id. With `leaseTokenHash` the claim is fenced: every later transition must
 * present the token whose hash this is. A self-test todo may be claimed this way (only this way).
 */
export async function claimTodo(
  sql: Sql,
  caller: Caller,
  id: string,
  leaseSecs: number,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<ClaimedTodo> {
  const [row] = await sql<ClaimedTodo[]>`
    with claimed as (
      update todos t set ${claimSet(sql, caller.owner, caller.sessionId ?? null, leaseTokenHash, now, leaseSecs)}
      where ${withinReach(sql, caller, id, { includeSynthetic: true })} and ${claimable(sql, caller.owner, now)}
      returning t.*
    ), ${withAcknowledgements(sql, now)}`;
  if (row) return row;
  throw await refusal(sql, caller, id, (t) => notClaimable(t, now), { includeSynthetic: true });
}

/** Why a todo that exists within the caller's reach could not be claimed at `now`. */
function notClaimable(t: TodoRow, now: Date): string {
  if (t.state === 'pending' && t.run_at && t.run_at > now) return `todo ${t.id} is delayed: it is not claimable until ${rfc3339(t.run_at)}`;
  if (t.state === 'done' || t.state === 'canceled') return `todo ${t.id} is not claimable: it is ${t.state}`;
  if (isDead(t)) return `todo ${t.id} is not claimable: it is a dead letter`;
  if (t.state === 'failed' && t.next_retry_at) return `todo ${t.id} is not claimable until its retry at ${rfc3339(t.next_retry_at)}`;
  return `todo ${t.id} is not claimable (claimed by someone else, finished, or waiting for its retry)`;
}

/**
 * The caller's own unclaimed self-test todo `todoId` (`todos t`), on one of `queues` (a text[]
 * value), claimable by the caller: what a claim of one's own test takes.
 */
const ownSelfTest = (sql: Sql | TxSql, caller: Caller, todoId: string, queues: ReturnType<Sql['array']>, now: Date) => sql`
  t.id = (
      select d.todo_id from doorbell_tests d
      where d.endpoint_id = ${caller.endpointId} and d.claimed_at is null and d.todo_id = ${todoId})
    and t.endpoint_id = ${caller.endpointId} and t.synthetic and t.queue = any(${queues}::text[])
    and ${claimable(sql, caller.owner, now)}`;

/**
 * Claims the caller's own self-test todo by id, which needs no claim grant (DESIGN decision 11:
 * only a claim by id counts; claim_next never hands one out). Null when the caller has no such
 * unclaimed todo on `queues`.
 */
export async function claimOwnTestTodo(
  sql: Sql,
  caller: Caller,
  queues: readonly string[],
  now: Date,
  todoId: string,
): Promise<ClaimedTodo | null> {
  const [row] = await sql<ClaimedTodo[]>`
    with claimed as (
      update todos t set ${claimSet(sql, caller.owner, caller.sessionId ?? null, null, now, 0)}
      where ${ownSelfTest(sql, caller, todoId, sql.array([...queues]), now)}
      returning t.*
    ), ${withAcknowledgements(sql, now)}`;
  return row ?? null;
}

import { randomUUID } from 'node:crypto';
import type { Sql, TxSql } from '../db/connect.ts';
import { conflict, forbidden, notFound, type SwitchboardError } from '../domain/errors.ts';
import { retryBackoffSeconds } from '../domain/lifecycle.ts';
import { RESERVED_QUEUE } from '../domain/scope.ts';
import { isPushEligibleFragment } from './doorbells.ts';
import type { QueueStat } from '../lib/metrics.ts';
import type { AckedRing } from './rings.ts';
import { rfc3339 } from '../domain/time.ts';

export type TodoState = 'pending' | 'claimed' | 'done' | 'failed';
export const TODO_STATES: readonly TodoState[] = ['pending', 'claimed', 'done', 'failed'];

export interface TodoRow {
  id: string;
  endpoint_id: string;
  queue: string;
  source: string | null;
  kind: string | null;
  title: string;
  payload: unknown;
  payload_size: number;
  event_id: string | null;
  idempotency_key: string | null;
  assignee: string | null;
  state: TodoState;
  owner: string | null;
  lease_expires_at: Date | null;
  attempt: number;
  max_attempts: number;
  result: unknown;
  created_at: Date;
  updated_at: Date;
  claimed_at: Date | null;
  completed_at: Date | null;
  next_retry_at: Date | null;
  last_ringed_at: Date | null;
  ring_attempts: number;
  synthetic: boolean;
  claimed_session_id: string | null;
  lease_token_hash: string | null;
}

/** The compact wire form: everything a listing needs, never the payload. */
export interface TodoSummary {
  id: string;
  queue: string;
  source?: string;
  kind?: string;
  title: string;
  state: TodoState;
  owner?: string;
  assignee?: string;
  attempt: number;
  max_attempts: number;
  lease_expires_at?: string;
  next_retry_at?: string;
  created_at: string;
  payload_size: number;
}

export function summarizeTodo(t: TodoRow): TodoSummary {
  const out: TodoSummary = {
    id: t.id,
    queue: t.queue,
    title: t.title,
    state: t.state,
    attempt: t.attempt,
    max_attempts: t.max_attempts,
    created_at: rfc3339(t.created_at),
    payload_size: t.payload_size,
  };
  if (t.source) out.source = t.source;
  if (t.kind) out.kind = t.kind;
  if (t.owner) out.owner = t.owner;
  if (t.assignee) out.assignee = t.assignee;
  if (t.state === 'claimed' && t.lease_expires_at) out.lease_expires_at = rfc3339(t.lease_expires_at);
  if (t.state === 'failed' && t.next_retry_at) out.next_retry_at = rfc3339(t.next_retry_at);
  return out;
}

/** The full form handed over at claim time: the summary plus the payload. */
export function fullTodo(t: TodoRow): TodoSummary & { payload: unknown } {
  return { ...summarizeTodo(t), payload: t.payload };
}

export const newTodoId = (): string => `td_${randomUUID()}`;

// ---------------------------------------------------------------------------------------------
// Producing

export interface EventInput {
  source: string;
  family: 'webhook' | 'operator';
  eventType?: string | null;
  externalId?: string | null;
  trustMode: 'signed' | 'token' | 'open' | 'operator';
  verified: boolean;
  verifyDetail?: string | null;
  contentType?: string | null;
  headers?: Record<string, string>;
  payload?: Buffer | null;
  /** The webhook that received it, and the endpoint that owns that webhook (or was pushed to). */
  webhookId?: string | null;
  endpointId?: string | null;
}

export interface NewTodo {
  endpointId: string;
  queue: string;
  title: string;
  source?: string | null;
  kind?: string | null;
  payload?: unknown;
  idempotencyKey?: string | null;
  maxAttempts?: number;
  synthetic?: boolean;
}

/** The live-row predicate of the dedup index; ON CONFLICT must name it to infer that index. */
const liveKeyPredicate = (sql: Sql | TxSql) =>
  sql`idempotency_key is not null and state <> 'done' and (state <> 'failed' or next_retry_at is not null)`;

/**
 * Records one producer delivery and the todo it mints, in one transaction. When the idempotency
 * key matches a live todo of the same endpoint, nothing is written and that todo is returned
 * with created=false.
 */
export async function insertEventAndTodo(
  sql: Sql,
  event: EventInput,
  todo: NewTodo,
  now: Date,
): Promise<{ todo: TodoRow; created: boolean; eventId: string | null; pushEligible: boolean }> {
  return sql.begin(async (tx) => {
    const key = todo.idempotencyKey ? todo.idempotencyKey : null;
    // Event and todo in one statement; the todo may collapse onto a live one with the same key.
    const [row] = await tx<(TodoRow & { new_event_id: string })[]>`
      with ev as (
        insert into events (source, family, event_type, external_id, trust_mode, verified, verify_detail,
                            content_type, headers, payload, payload_size, webhook_id, endpoint_id, received_at)
        values (${event.source}, ${event.family}, ${event.eventType ?? null}, ${event.externalId ?? null},
                ${event.trustMode}, ${event.verified}, ${event.verifyDetail ?? null}, ${event.contentType ?? null},
                ${tx.json(event.headers ?? {})}, ${event.payload ?? null}, ${event.payload?.length ?? 0},
                ${event.webhookId ?? null}, ${event.endpointId ?? todo.endpointId}, ${now})
        returning id
      ), t as (
        insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, idempotency_key,
                           max_attempts, synthetic, created_at, updated_at)
        select ${newTodoId()}, ${todo.endpointId}, ${todo.queue}, ${todo.source ?? null}, ${todo.kind ?? null},
               ${todo.title}, ${tx.json((todo.payload ?? {}) as never)}, ev.id, ${key},
               ${todo.maxAttempts ?? 5}, ${todo.synthetic ?? false}, ${now}, ${now}
        from ev
        on conflict (endpoint_id, idempotency_key) where ${liveKeyPredicate(tx)} do nothing
        returning *
      )
      select ev.id::text as new_event_id, t.*, t.event_id::text as event_id from ev left join t on true`;
    const { new_event_id: newEventId, ...fields } = row!;
    const ev = { id: newEventId };
    const inserted = fields.id ? (fields as TodoRow) : undefined;
    if (inserted) {
      // The sender gate and, when it passes, the wakeup for other instances (delivered at commit).
      const [gate] = await tx<{ eligible: boolean }[]>`
        select ${isPushEligibleFragment(tx, inserted.id)} as eligible,
               case when ${isPushEligibleFragment(tx, inserted.id)}
                    then pg_notify('todo_ready', ${`${inserted.endpoint_id}:${inserted.queue}`}) end`;
      return { todo: inserted, created: true, eventId: ev.id, pushEligible: gate!.eligible };
    }
    // A duplicate delivery changes nothing: drop the event row we just wrote.
    await tx`delete from events where id = ${ev.id}`;
    const [existing] = await tx<TodoRow[]>`
      select *, event_id::text as event_id from todos
      where endpoint_id = ${todo.endpointId} and idempotency_key = ${key} and ${liveKeyPredicate(tx)}`;
    if (!existing) throw conflict('a concurrent delivery with the same key is still being written; retry');
    return { todo: existing, created: false, eventId: existing.event_id, pushEligible: false };
  });
}

// ---------------------------------------------------------------------------------------------
// Reading

export interface ListFilter {
  /** Restrict to these queues; undefined means every queue of the endpoint. */
  queues?: readonly string[];
  queue?: string;
  state?: TodoState;
  limit: number;
  includeSynthetic?: boolean;
}

/** Newest first, one endpoint, the given queues only, never the reserved queue. */
export async function listTodos(sql: Sql, endpointId: string, f: ListFilter): Promise<TodoRow[]> {
  return sql<TodoRow[]>`
    select *, event_id::text as event_id from todos
    where endpoint_id = ${endpointId}
      and queue <> ${RESERVED_QUEUE}
      ${f.queues ? sql`and queue = any(${sql.array([...f.queues])}::text[])` : sql``}
      ${f.queue ? sql`and queue = ${f.queue}` : sql``}
      ${f.state ? sql`and state = ${f.state}` : sql``}
      ${f.includeSynthetic ? sql`` : sql`and not synthetic`}
    order by created_at desc, seq desc
    limit ${f.limit}`;
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

// ---------------------------------------------------------------------------------------------
// Agent transitions. Each takes the caller's endpoint and allowed queues; a todo of another
// endpoint is indistinguishable from one that never existed.

export interface Caller {
  endpointId: string;
  /** `agent:<agent_id>`: every session of one agent acts as the same owner. */
  owner: string;
  queues: readonly string[];
  /** The MCP session acting, recorded on the claims it makes. */
  sessionId?: string | null;
}

const todoNotFound = (id: string) => notFound(`no todo ${id} on this endpoint`);

/**
 * The caller's reach in one predicate: its endpoint, its granted queues, never the reserved queue,
 * and no self-test todo unless the path opts in (only a claim by id does).
 */
const withinReach = (sql: Sql | TxSql, caller: Caller, id: string, opts: { includeSynthetic?: boolean } = {}) => sql`
  id = ${id} and endpoint_id = ${caller.endpointId} ${opts.includeSynthetic ? sql`` : sql`and not synthetic`}
  and queue = any(${sql.array([...caller.queues])}::text[]) and queue <> ${RESERVED_QUEUE}`;

/**
 * Explains why a conditional update on `id` touched nothing, probing only within the caller's
 * endpoint: missing (or another endpoint's) → not_found, queue not granted → forbidden, otherwise
 * the todo exists but is in the wrong state → the conflict the caller describes.
 */
async function refusal(
  sql: Sql | TxSql,
  caller: Caller,
  id: string,
  describeConflict: (t: TodoRow) => string,
  opts: { includeSynthetic?: boolean } = {},
): Promise<SwitchboardError> {
  const row = await getTodo(sql, caller.endpointId, id, opts);
  if (!row) return todoNotFound(id);
  if (!caller.queues.includes(row.queue)) return forbidden(`todo ${id} is in queue "${row.queue}", which this endpoint is not granted`);
  return conflict(describeConflict(row));
}

/** Rows an owner may claim at `now`: pending, an expired lease, or a retry whose wait is over. */
const claimable = (sql: Sql | TxSql, owner: string, now: Date) => sql`
  (assignee is null or assignee = ${owner})
  and (state = 'pending'
       or (state = 'claimed' and lease_expires_at < ${now} and attempt < max_attempts)
       or (state = 'failed' and next_retry_at is not null and next_retry_at <= ${now} and attempt < max_attempts))`;

/** What a self-test todo's claim completes it with, in the same statement. */
export const SELF_TEST_RESULT = { self_test: true, note: 'no work needed' } as const;

/**
 * The claim's assignments on `todos t`. A self-test (synthetic) todo is completed by its claim
 * instead of leased: proving the doorbell loop is the only work it asks for.
 */
const claimSet = (sql: Sql | TxSql, caller: Caller, now: Date, lease: number, leaseTokenHash: string | null) => sql`
  state = case when t.synthetic then 'done' else 'claimed' end,
  owner = ${caller.owner},
  claimed_session_id = ${caller.sessionId ?? null},
  lease_token_hash = case when t.synthetic then null else ${leaseTokenHash} end,
  lease_expires_at = case when t.synthetic then null else ${now}::timestamptz + make_interval(secs => ${lease}) end,
  result = case when t.synthetic then ${sql.json(SELF_TEST_RESULT)} else t.result end,
  completed_at = case when t.synthetic then ${now}::timestamptz else t.completed_at end,
  attempt = t.attempt + 1, claimed_at = ${now}, next_retry_at = null, updated_at = ${now}`;

/** A claimed todo and the doorbell rings its claim acknowledged. */
export type ClaimedTodo = TodoRow & { acked_rings: AckedRing[] };

/**
 * Wraps a claiming UPDATE (a CTE named `claimed` returning t.*) so that, in the same statement and
 * so the same transaction, the claim acknowledges every open ring of that todo on that endpoint and
 * every digest ring sent before it, and a self-test claim is stamped on its test report.
 */
const withAcknowledgements = (sql: Sql | TxSql, caller: Caller, now: Date) => sql`
  acked as (
    update doorbell_rings r set acked_at = ${now}, ack_via = 'claim', acked_session_id = ${caller.sessionId ?? null}
    from claimed c
    where r.endpoint_id = c.endpoint_id and r.acked_at is null
      and ((r.kind <> 'digest' and r.todo_id = c.id) or (r.kind = 'digest' and r.sent_at <= ${now}))
    returning r.kind, r.synthetic, r.unheard_at
  ),
  tested as (
    update doorbell_tests d set claimed_at = ${now}
    from claimed c where c.synthetic and d.todo_id = c.id and d.claimed_at is null
    returning d.test_id
  )
  select c.*, c.event_id::text as event_id,
    coalesce((select json_agg(json_build_object('kind', a.kind, 'synthetic', a.synthetic, 'late', a.unheard_at is not null)) from acked a), '[]'::json) as acked_rings
  from claimed c`;

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
      update todos t set ${claimSet(sql, caller, now, leaseSecs, leaseTokenHash)}
      where ${withinReach(sql, caller, id, { includeSynthetic: true })} and ${claimable(sql, caller.owner, now)}
      returning t.*
    ), ${withAcknowledgements(sql, caller, now)}`;
  if (row) return row;
  throw await refusal(
    sql,
    caller,
    id,
    () => `todo ${id} is not claimable (claimed by someone else, finished, or waiting for its retry)`,
    { includeSynthetic: true },
  );
}

/**
 * Claims the oldest claimable todo across the caller's queues, or returns null when none is.
 *
 * The candidates come oldest first from one ordered index scan per queue over the pending rows
 * (todos_claim_scan_idx), merged with the few expired leases and due retries; each candidate is
 * then locked, skipping rows another claimer holds, until one is taken. A single scan of every
 * claimable state could use no index in that order: it walked the endpoint's whole history
 * (done todos included) or sorted all its pending rows on every claim, which grew with the queue.
 * The lock re-checks the claimable condition, so a row claimed meanwhile is passed over; a todo's
 * endpoint, queue and synthetic flag never change once inserted, so the scans' check of those
 * stands, and leaving them out of the lock's lookup keeps it on the primary key in every plan
 * (a generic plan made while the table was small once chose an endpoint index there instead).
 */
export async function claimNextTodo(
  sql: Sql,
  caller: Caller,
  queues: readonly string[],
  leaseSecs: number,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<ClaimedTodo | null> {
  const wanted = [...new Set(queues)].filter((q) => q !== RESERVED_QUEUE);
  if (wanted.length === 0) return null;
  const eligible = sql`endpoint_id = ${caller.endpointId} and not synthetic and (assignee is null or assignee = ${caller.owner})`;
  const branches = [
    ...wanted.map((q) => sql`(select id, created_at, seq from todos where ${eligible} and queue = ${q} and state = 'pending' order by created_at, seq)`),
    sql`(select id, created_at, seq from todos where ${eligible} and queue = any(${sql.array(wanted)}::text[])
           and state = 'claimed' and lease_expires_at < ${now} and attempt < max_attempts)`,
    sql`(select id, created_at, seq from todos where ${eligible} and queue = any(${sql.array(wanted)}::text[])
           and state = 'failed' and next_retry_at is not null and next_retry_at <= ${now} and attempt < max_attempts)`,
  ];
  const candidates = branches.reduce((all, b) => sql`${all} union all ${b}`);
  const [row] = await sql<ClaimedTodo[]>`
    with picked as materialized (
      select l.id from (${candidates}) c
      cross join lateral (
        select t.id from todos t where t.id = c.id and ${claimable(sql, caller.owner, now)}
        for update skip locked
      ) l
      order by c.created_at, c.seq
      limit 1
    ), claimed as (
      update todos t set ${claimSet(sql, caller, now, leaseSecs, leaseTokenHash)}
      from picked where t.id = picked.id
      returning t.*
    ), ${withAcknowledgements(sql, caller, now)}`;
  return row ?? null;
}

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
    if (current.state !== 'claimed' || current.owner !== caller.owner) return `cannot ${what} todo ${id}: this endpoint does not hold its claim`;
    return current.lease_token_hash
      ? `cannot ${what} todo ${id}: its claim is fenced and lease_token is missing or wrong`
      : `cannot ${what} todo ${id}: its claim is not fenced, so pass no lease_token`;
  });
}

/** Columns cleared whenever a todo leaves the claimed state. */
const unclaimSet = (sql: Sql | TxSql) => sql`lease_expires_at = null, lease_token_hash = null`;

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

// ---------------------------------------------------------------------------------------------
// Background sweeps: no caller, so no endpoint predicate; each row moves only within its own
// lifecycle, and the caller learns which endpoints and queues changed.

export interface Moved {
  id: string;
  endpoint_id: string;
  queue: string;
  state: TodoState;
}

/** Expired leases go back to pending, or become dead letters once their attempts are spent. */
export async function reapExpiredLeasesUnscoped(sql: Sql, now: Date, limit = 1000): Promise<Moved[]> {
  return sql<Moved[]>`
    with expired as materialized (
      select id from todos
      where state = 'claimed' and lease_expires_at < ${now} and queue <> ${RESERVED_QUEUE}
      order by lease_expires_at
      limit ${limit}
      for update skip locked
    )
    update todos t set
      state = case when t.attempt < t.max_attempts then 'pending' else 'failed' end,
      result = case when t.attempt < t.max_attempts then t.result
                    else ${sql.json({ error: 'lease_expired', detail: 'lease expired on the last attempt' })} end,
      completed_at = case when t.attempt < t.max_attempts then null else ${now}::timestamptz end,
      owner = null, ${unclaimSet(sql)}, claimed_at = null, updated_at = ${now}
    from expired where t.id = expired.id
    returning t.id, t.endpoint_id, t.queue, t.state`;
}

/** Failed todos whose retry wait is over become pending again. */
export async function requeueDueRetriesUnscoped(sql: Sql, now: Date, limit = 1000): Promise<Moved[]> {
  return sql<Moved[]>`
    with due as materialized (
      select id from todos
      where state = 'failed' and next_retry_at is not null and next_retry_at <= ${now}
      order by next_retry_at
      limit ${limit}
      for update skip locked
    )
    update todos t set state = 'pending', owner = null, lease_expires_at = null, claimed_at = null,
      next_retry_at = null, updated_at = ${now}
    from due where t.id = due.id
    returning t.id, t.endpoint_id, t.queue, t.state`;
}

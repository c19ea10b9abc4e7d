import { ulid } from 'ulidx';
import type { RingChoiceReason } from '../domain/doorbell-choice.ts';
import type { Fragment, Sql, TxSql } from '../db/connect.ts';

export type RingKind = 'todo' | 'digest' | 'test';

/** Minted before the write, so the doorbell and its record carry the same id. */
export const newRingId = (): string => `rg_${ulid()}`;

export interface NewRing {
  ringId: string;
  endpointId: string;
  sessionId: string;
  todoId: string | null;
  kind: RingKind;
  queue: string | null;
  synthetic: boolean;
  windowSeconds: number;
  sentAt: Date;
  /** Why its session was chosen (domain/doorbell-choice.ts); null on rings recorded before it was kept. */
  reason?: RingChoiceReason;
}

/**
 * The claim that acknowledges ring `r` (columns endpoint_id, todo_id, kind, sent_at,
 * window_seconds), if one came within its window: for a todo or test ring a claim of its todo, for
 * a digest ring a claim of any real todo of its endpoint. Read from the todos, so a ring recorded
 * after its claim committed agrees with that claim.
 *
 * One branch per kind, each with a condition an index can take (a CASE over the ring's kind is
 * opaque to the planner: the unheard sweep read every todo once per open ring). A todo ring's is
 * its todo by primary key; a digest's, its endpoint's todos changed since the ring was sent
 * (todos_endpoint_updated_idx): a claim sets updated_at to claimed_at and every later change moves
 * it on, so a claim at or after sent_at is on a row updated at or after it.
 */
const timelyClaim = (sql: Sql) => sql`
  select c.claimed_at, c.claimed_session_id from (
    select t.claimed_at, t.claimed_session_id from todos t
    where r.kind <> 'digest' and t.id = r.todo_id
      and t.claimed_at >= r.sent_at and t.claimed_at <= r.sent_at + make_interval(secs => r.window_seconds)
    union all
    (select t.claimed_at, t.claimed_session_id from todos t
     where r.kind = 'digest' and t.endpoint_id = r.endpoint_id and t.updated_at >= r.sent_at and not t.synthetic
       and t.claimed_at >= r.sent_at and t.claimed_at <= r.sent_at + make_interval(secs => r.window_seconds)
     order by t.claimed_at limit 1)
  ) c order by c.claimed_at limit 1`;

/**
 * Records a ring after its doorbell was written. The record is not awaited by the writer, so the
 * ring's todo may already be claimed: the ring is then recorded as acknowledged by that claim, and
 * returned for counting (null when nothing acknowledged it yet).
 */
export async function insertRing(sql: Sql, n: NewRing): Promise<AckedRing | null> {
  const [row] = await sql<{ acked: boolean }[]>`
    insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, queue, synthetic, window_seconds, sent_at, reason, acked_at, ack_via, acked_session_id)
    select r.*, c.claimed_at, case when c.claimed_at is not null then 'claim' end, c.claimed_session_id
    from (values (${n.ringId}::text, ${n.endpointId}::uuid, ${n.sessionId}::text, ${n.todoId}::text, ${n.kind}::text, ${n.queue}::text,
                  ${n.synthetic}::boolean, ${n.windowSeconds}::integer, ${n.sentAt}::timestamptz, ${n.reason ?? null}::text))
      as r(ring_id, endpoint_id, session_id, todo_id, kind, queue, synthetic, window_seconds, sent_at, reason)
    left join lateral (${timelyClaim(sql)}) c on true
    returning acked_at is not null as acked`;
  return row?.acked ? { kind: n.kind, synthetic: n.synthetic, late: false, unheardNow: false } : null;
}

/**
 * A ring an acknowledgement touched: `late` when its window had closed (no acknowledgement
 * counted), `unheardNow` when this acknowledgement was the first to find it closed and so made it
 * unheard (counted as unheard, once, like the sweep's rows).
 */
export interface AckedRing {
  kind: RingKind;
  synthetic: boolean;
  late: boolean;
  unheardNow: boolean;
}

/** Ring `r`'s ack window has closed at `now`: it ends at `sent_at + window`, not at the next sweep. */
const windowClosed = (sql: Sql | TxSql, now: Date) => sql`r.sent_at < ${now}::timestamptz - make_interval(secs => r.window_seconds)`;

/**
 * The assignments that acknowledge ring `r` at `now`, as `session` (a session id, or a column of
 * the statement that holds it). An acknowledgement after the window records
 * the ring as unheard at the window's end, an instant the sweep never writes (it marks strictly
 * later), which is how `ackedRingColumns` tells that this acknowledgement made it unheard.
 */
export const acknowledgeRing = (sql: Sql | TxSql, via: 'claim' | 'ack', session: string | null | Fragment, now: Date) => sql`
  acked_at = ${now}, ack_via = ${via}, acked_session_id = ${session},
  unheard_at = case when r.unheard_at is null and ${windowClosed(sql, now)} then r.sent_at + make_interval(secs => r.window_seconds) else r.unheard_at end`;

/** RETURNING columns of an acknowledging update of `r`, shaped as AckedRing. */
export const ackedRingColumns = (sql: Sql | TxSql) => sql`
  r.kind, r.synthetic, r.unheard_at is not null as late,
  coalesce(r.unheard_at = r.sent_at + make_interval(secs => r.window_seconds), false) as "unheardNow"`;

export type RingState = 'sent' | 'acknowledged' | 'unheard';

/**
 * ack_doorbell: acknowledges one ring of the caller's endpoint. Idempotent; another endpoint's
 * ring answers exactly like a missing one (null).
 */
export async function ackRing(
  sql: Sql,
  endpointId: string,
  ringId: string,
  sessionId: string,
  now: Date,
): Promise<{ state: RingState; acked: AckedRing | null } | null> {
  const [row] = await sql<AckedRing[]>`
    update doorbell_rings r set ${acknowledgeRing(sql, 'ack', sessionId, now)}
    where r.ring_id = ${ringId} and r.endpoint_id = ${endpointId} and r.acked_at is null
    returning ${ackedRingColumns(sql)}`;
  if (row) return { state: row.late ? 'unheard' : 'acknowledged', acked: row };
  const [existing] = await sql<{ unheard_at: Date | null }[]>`
    select unheard_at from doorbell_rings where ring_id = ${ringId} and endpoint_id = ${endpointId}`;
  if (!existing) return null;
  return { state: existing.unheard_at ? 'unheard' : 'acknowledged', acked: null };
}

export interface UnheardRing {
  kind: RingKind;
  synthetic: boolean;
  session_id: string;
}

/**
 * The unheard sweep: one conditional update claims every ring whose window passed with no
 * acknowledgement, exactly once across instances. Only the returned rows count. A ring whose
 * record and claim crossed (each committed unseen by the other) is first recorded as acknowledged
 * by that claim, also exactly once, and returned as `claimed`.
 */
export async function markUnheardRingsUnscoped(sql: Sql, now: Date): Promise<{ unheard: UnheardRing[]; claimed: AckedRing[] }> {
  const open = sql`r.acked_at is null and r.unheard_at is null and ${windowClosed(sql, now)}`;
  const claimed = await sql<AckedRing[]>`
    update doorbell_rings r set ack_via = 'claim', (acked_at, acked_session_id) = (select c.claimed_at, c.claimed_session_id from (${timelyClaim(sql)}) c)
    where ${open} and exists (${timelyClaim(sql)})
    returning r.kind, r.synthetic, false as late, false as "unheardNow"`;
  const unheard = await sql<UnheardRing[]>`
    update doorbell_rings r set unheard_at = ${now}
    where ${open} and not exists (${timelyClaim(sql)})
    returning r.kind, r.synthetic, r.session_id`;
  return { unheard: [...unheard], claimed: [...claimed] };
}

/** Ring records are kept 7 days after they were sent. */
export async function pruneRingsUnscoped(sql: Sql, now: Date): Promise<number> {
  const rows = await sql`delete from doorbell_rings where sent_at < ${now}::timestamptz - interval '7 days' returning 1`;
  return rows.length;
}

/** A session's latest ring: when, and why that session was chosen for it (null before reasons were kept). */
export interface LastRing {
  sent_at: Date;
  reason: RingChoiceReason | null;
}

/** The latest ring of each of these sessions (one index probe per session: doorbell_rings_session_idx). */
export async function lastRingsOfSessions(sql: Sql, sessionIds: readonly string[]): Promise<Map<string, LastRing>> {
  if (sessionIds.length === 0) return new Map();
  const rows = await sql<(LastRing & { session_id: string })[]>`
    select k.id as session_id, r.sent_at, r.reason
    from unnest(${sql.array([...sessionIds])}::text[]) as k(id)
    cross join lateral (
      select r.sent_at, r.reason from doorbell_rings r where r.session_id = k.id order by r.sent_at desc limit 1
    ) r`;
  return new Map(rows.map((r) => [r.session_id, { sent_at: r.sent_at, reason: r.reason }]));
}

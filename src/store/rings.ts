import { ulid } from 'ulidx';
import type { Sql } from '../db/connect.ts';

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
}

/** Records a ring after its doorbell was written. */
export async function insertRing(sql: Sql, r: NewRing): Promise<void> {
  await sql`
    insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, queue, synthetic, window_seconds, sent_at)
    values (${r.ringId}, ${r.endpointId}, ${r.sessionId}, ${r.todoId}, ${r.kind}, ${r.queue}, ${r.synthetic}, ${r.windowSeconds}, ${r.sentAt})`;
}

/** A ring an acknowledgement touched: `late` when it had already gone unheard (no counter moves). */
export interface AckedRing {
  kind: RingKind;
  synthetic: boolean;
  late: boolean;
}

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
  const [row] = await sql<{ kind: RingKind; synthetic: boolean; unheard_at: Date | null }[]>`
    update doorbell_rings set acked_at = ${now}, ack_via = 'ack', acked_session_id = ${sessionId}
    where ring_id = ${ringId} and endpoint_id = ${endpointId} and acked_at is null
    returning kind, synthetic, unheard_at`;
  if (row) {
    return {
      state: row.unheard_at ? 'unheard' : 'acknowledged',
      acked: { kind: row.kind, synthetic: row.synthetic, late: row.unheard_at !== null },
    };
  }
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
 * acknowledgement, exactly once across instances. Only the returned rows count.
 */
export async function markUnheardRingsUnscoped(sql: Sql, now: Date): Promise<UnheardRing[]> {
  return sql<UnheardRing[]>`
    update doorbell_rings set unheard_at = ${now}
    where acked_at is null and unheard_at is null
      and sent_at < ${now}::timestamptz - make_interval(secs => window_seconds)
    returning kind, synthetic, session_id`;
}

/**
 * Of the given sessions, those whose 3 most recent rings all went unheard with no acknowledgement
 * of a ring by that session since the first of them (`since`: the caller also checks the
 * acknowledgements that touched no ring, such as a claim of a todo that was never rung).
 */
export async function unheardSessions(sql: Sql, sessionIds: readonly string[]): Promise<{ session_id: string; since: Date }[]> {
  if (sessionIds.length === 0) return [];
  const rows = await sql<{ session_id: string; since: Date }[]>`
    with recent as (
      select r.session_id, r.sent_at, r.unheard_at,
             row_number() over (partition by r.session_id order by r.sent_at desc, r.ring_id desc) as n
      from doorbell_rings r where r.session_id = any(${sql.array([...sessionIds])}::text[]) and not r.synthetic
    ), last3 as (
      select session_id, count(*) filter (where unheard_at is not null) as unheard, count(*) as total, min(sent_at) as since
      from recent where n <= 3 group by session_id
    )
    select l.session_id, l.since from last3 l
    where l.total = 3 and l.unheard = 3
      and not exists (select 1 from doorbell_rings a where a.acked_session_id = l.session_id and a.acked_at >= l.since)`;
  return [...rows];
}

/** Ring records are kept 7 days after they were sent. */
export async function pruneRingsUnscoped(sql: Sql, now: Date): Promise<number> {
  const rows = await sql`delete from doorbell_rings where sent_at < ${now}::timestamptz - interval '7 days' returning 1`;
  return rows.length;
}

import type { Sql, TxSql } from '../db/connect.ts';
import { notifyExpression, sessionClosedNotifyPerRow } from './channels.ts';
import { deadAfter } from './instances.ts';

/** The cluster's view of one MCP session (migration 0013). */
export interface SessionRow {
  id: string;
  endpoint_id: string;
  protocol_version: string;
  client_name: string;
  client_version: string;
  initialized: boolean;
  created_at: Date;
  last_seen_at: Date;
  /** The live instance holding its GET stream, or null. */
  stream_instance: string | null;
  /** When that stream opened (null without one). */
  stream_opened_at: Date | null;
  unheard: boolean;
  /** When it last acknowledged a ring anywhere (flushed by the instance that saw it). */
  last_ack_at: Date | null;
  /** It has listed or called tools since initialize (flushed like last_seen_at). */
  called_tool: boolean;
}

export interface NewSession {
  id: string;
  endpointId: string;
  protocolVersion: string;
  clientName: string;
  clientVersion: string;
  at: Date;
}

/** The stream holder as the cluster sees it: a dead instance holds nothing, even before a live one deletes its row. */
const liveStream = (sql: Sql | TxSql) => sql`
  (select i.id from instances i where i.id = s.stream_instance and i.heartbeat_at > now() - ${deadAfter(sql)})`;

const sessionColumns = (sql: Sql | TxSql) => sql`
  s.id, s.endpoint_id, s.protocol_version, s.client_name, s.client_version, s.initialized,
  s.created_at, s.last_seen_at, ${liveStream(sql)} as stream_instance,
  s.stream_opened_at, s.unheard, s.last_ack_at, s.called_tool`;

/**
 * Inserts a session. At the endpoint's cap the stream-less session seen longest ago makes room
 * (and is announced closed); when every one holds a live stream nothing is inserted.
 */
export async function insertSession(
  sql: Sql,
  s: NewSession,
  opts: { maxPerEndpoint: number },
): Promise<{ inserted: boolean; evicted: string | null }> {
  return sql.begin(async (tx) => {
    // One initialize at a time per endpoint, so two cannot both take the last place.
    await tx`select 1 from endpoints where id = ${s.endpointId}::uuid for update`;
    const [count] = await tx<{ n: number }[]>`select count(*)::int as n from mcp_sessions where endpoint_id = ${s.endpointId}::uuid`;
    let evicted: string | null = null;
    if ((count?.n ?? 0) >= opts.maxPerEndpoint) {
      const [victim] = await tx<{ id: string }[]>`
        delete from mcp_sessions where id = (
          select s.id from mcp_sessions s where s.endpoint_id = ${s.endpointId}::uuid and ${liveStream(tx)} is null
          order by s.last_seen_at, s.seq limit 1)
        returning id, ${sessionClosedNotifyPerRow(tx, 'id')} as notified`;
      if (!victim) return { inserted: false, evicted: null };
      evicted = victim.id;
    }
    await tx`
      insert into mcp_sessions (id, endpoint_id, protocol_version, client_name, client_version, created_at, last_seen_at)
      values (${s.id}, ${s.endpointId}::uuid, ${s.protocolVersion}, ${s.clientName}, ${s.clientVersion}, ${s.at}, ${s.at})`;
    return { inserted: true, evicted };
  });
}

/** The session, only if it belongs to this endpoint. */
export async function findSession(sql: Sql, id: string, endpointId: string): Promise<SessionRow | null> {
  const [row] = await sql<SessionRow[]>`
    select ${sessionColumns(sql)} from mcp_sessions s where s.id = ${id} and s.endpoint_id = ${endpointId}::uuid`;
  return row ?? null;
}

/** Every session of these endpoints, oldest first. */
export async function sessionsOfEndpoints(sql: Sql, endpointIds: readonly string[]): Promise<SessionRow[]> {
  if (endpointIds.length === 0) return [];
  return [
    ...(await sql<SessionRow[]>`
      select ${sessionColumns(sql)} from mcp_sessions s where s.endpoint_id = any(${sql.array([...endpointIds])}::uuid[])
      order by s.created_at, s.seq`),
  ];
}

export interface SessionCounts {
  /** Live sessions: a stream open, or a call since `idleSince`. */
  sessions: number;
  streams: number;
  unheard: number;
  /** Sessions the janitor ended for idleness since the endpoint was vended. */
  idleEnded: number;
}

/**
 * Per endpoint: its live sessions (a stream open, or a call since `idleSince`: one idle longer is
 * dead and about to be ended), those with a live stream, those marked unheard, and how many idle
 * sessions were ended. An endpoint with no session row still gets its ended count.
 */
export async function sessionCountsOf(sql: Sql, endpointIds: readonly string[], idleSince: Date): Promise<Map<string, SessionCounts>> {
  if (endpointIds.length === 0) return new Map();
  const rows = await sql<{ endpoint_id: string; sessions: number; streams: number; unheard: number; idle_ended: number }[]>`
    select e.id as endpoint_id, coalesce(c.sessions, 0)::int as sessions, coalesce(c.streams, 0)::int as streams,
           coalesce(c.unheard, 0)::int as unheard, e.idle_sessions_ended::int as idle_ended
    from endpoints e
    left join lateral (
      select count(*) as sessions, count(l.stream) as streams, count(*) filter (where s.unheard) as unheard
      from mcp_sessions s cross join lateral (select ${liveStream(sql)} as stream) l
      where s.endpoint_id = e.id and (l.stream is not null or s.last_seen_at > ${idleSince}::timestamptz)
    ) c on true
    where e.id = any(${sql.array([...endpointIds])}::uuid[])`;
  return new Map(rows.map((r) => [r.endpoint_id, { sessions: r.sessions, streams: r.streams, unheard: r.unheard, idleEnded: r.idle_ended }]));
}

/** What the doorbell's session choice reads from the directory, per session. */
export interface SessionChoiceFacts {
  unheard: boolean;
  lastAckAt: Date | null;
  calledTool: boolean;
}

/**
 * The directory's marks and choice facts for these sessions (each bound to its endpoint): an
 * instance refreshes its copies with them, whichever instance's sweep set a mark or saw an
 * acknowledgement or a tool call. A session no longer in the directory is absent.
 */
export async function choiceFactsOf(sql: Sql, sessions: readonly { id: string; endpointId: string }[]): Promise<Map<string, SessionChoiceFacts>> {
  if (sessions.length === 0) return new Map();
  const rows = await sql<{ id: string; unheard: boolean; last_ack_at: Date | null; called_tool: boolean }[]>`
    select s.id, s.unheard, s.last_ack_at, s.called_tool from mcp_sessions s
    join unnest(${sql.array(sessions.map((x) => x.id))}::text[], ${sql.array(sessions.map((x) => x.endpointId))}::uuid[]) as k(id, endpoint_id)
      on s.id = k.id and s.endpoint_id = k.endpoint_id`;
  return new Map(rows.map((r) => [r.id, { unheard: r.unheard, lastAckAt: r.last_ack_at, calledTool: r.called_tool }]));
}

export interface SessionActivity {
  id: string;
  seenAt: Date;
  /** When it last acknowledged anything (a claim or ack_doorbell): clears its unheard mark. */
  ackedAt: Date | null;
  initialized: boolean;
  calledTool: boolean;
}

/** An acknowledgement by a session marked unheard clears the mark at once. */
export async function clearSessionUnheard(sql: Sql, id: string, ackedAt: Date): Promise<void> {
  await sql`update mcp_sessions set unheard = false, last_ack_at = greatest(last_ack_at, ${ackedAt}) where id = ${id}`;
}

/** Writes the activity an instance saw since its last flush, for many sessions in one statement. */
export async function recordSessionActivity(sql: Sql, activity: readonly SessionActivity[]): Promise<void> {
  if (activity.length === 0) return;
  await sql`
    update mcp_sessions s set
      last_seen_at = greatest(s.last_seen_at, v.seen_at),
      last_ack_at = case when v.acked_at is null then s.last_ack_at else greatest(s.last_ack_at, v.acked_at) end,
      unheard = s.unheard and v.acked_at is null,
      initialized = s.initialized or v.initialized,
      called_tool = s.called_tool or v.called_tool
    from unnest(${sql.array(activity.map((a) => a.id))}::text[], ${sql.array(activity.map((a) => a.seenAt.toISOString()))}::timestamptz[],
                ${sql.array(activity.map((a) => a.ackedAt?.toISOString() ?? null))}::timestamptz[],
                ${sql.array(activity.map((a) => a.initialized))}::boolean[],
                ${sql.array(activity.map((a) => a.calledTool))}::boolean[]) as v(id, seen_at, acked_at, initialized, called_tool)
    where s.id = v.id`;
}

/**
 * Names this instance as the holder of the session's stream and announces it, so the instance
 * that held it before ends its own (the newest stream wins). False when the session is gone.
 */
export async function attachSessionStream(sql: Sql, id: string, instanceId: string, at: Date): Promise<boolean> {
  const rows = await sql`
    update mcp_sessions set stream_instance = ${instanceId}, stream_opened_at = ${at}, ever_streamed = true, last_seen_at = greatest(last_seen_at, ${at})
    where id = ${id}
    returning ${notifyExpression(sql, 'mcp_session', { sessionId: id, change: 'stream', instanceId })} as notified`;
  return rows.length > 0;
}

/** The stream this instance held has closed; a newer stream elsewhere is left alone. */
export async function detachSessionStream(sql: Sql, id: string, instanceId: string, at: Date): Promise<void> {
  await sql`
    update mcp_sessions set stream_instance = null, stream_opened_at = null, last_seen_at = greatest(last_seen_at, ${at})
    where id = ${id} and stream_instance = ${instanceId}`;
}

/** Ends a session everywhere: deleted, and announced closed to every instance. */
export async function deleteSession(sql: Sql, id: string): Promise<boolean> {
  const rows = await sql`delete from mcp_sessions where id = ${id} returning ${sessionClosedNotifyPerRow(sql, 'id')} as notified`;
  return rows.length > 0;
}

/**
 * Ends, everywhere, the sessions with no live stream and no activity since `cutoff`, and counts
 * them on their endpoints (`idle_sessions_ended`), in one statement.
 */
export async function expireIdleSessionsUnscoped(sql: Sql, cutoff: Date, now: Date): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    with ended as (
      delete from mcp_sessions s
      where s.last_seen_at <= ${cutoff}::timestamptz and ${liveStream(sql)} is null
      returning s.id, s.endpoint_id, ${sessionClosedNotifyPerRow(sql, 'id')} as notified
    ), counted as (
      update endpoints e set idle_sessions_ended = e.idle_sessions_ended + n.ended, idle_session_ended_at = ${now}
      from (select endpoint_id, count(*) as ended from ended group by endpoint_id) n
      where e.id = n.endpoint_id
    )
    select id from ended`;
  return rows.map((r) => r.id);
}

export interface UnheardMark {
  id: string;
  endpoint_id: string;
  slug: string;
  client_name: string;
  client_version: string;
}

/**
 * Marks unheard the sessions whose last 3 real rings all went unheard with no acknowledgement from
 * them since the first of those (SPEC-0025 REQ-5). Returns those it marked now: the update is
 * conditional on the row itself (`not s.unheard`, rechecked on the locked row), so of two sweeps
 * racing for a session only the one whose update changed it gets it back and logs the warning. Each session's
 * last rings come from doorbell_rings_session_idx, three per session, so a sweep reads a few rows
 * per live session rather than every ring of the last 7 days.
 */
export async function markUnheardSessionsUnscoped(sql: Sql): Promise<UnheardMark[]> {
  return [
    ...(await sql<UnheardMark[]>`
      with last3 as (
        select s.id as session_id, count(*) filter (where r.unheard_at is not null) as unheard, count(*) as total, min(r.sent_at) as since
        from mcp_sessions s
        cross join lateral (
          select r.sent_at, r.unheard_at from doorbell_rings r
          where r.session_id = s.id and not r.synthetic
          order by r.sent_at desc, r.ring_id desc
          limit 3
        ) r
        where not s.unheard
        group by s.id
      )
      update mcp_sessions s set unheard = true
      from last3 l, endpoints e
      where s.id = l.session_id and e.id = s.endpoint_id and not s.unheard and l.total = 3 and l.unheard = 3
        and (s.last_ack_at is null or s.last_ack_at < l.since)
        and not exists (select 1 from doorbell_rings a where a.acked_session_id = l.session_id and a.acked_at >= l.since)
      returning s.id, s.endpoint_id, e.slug, s.client_name, s.client_version`),
  ];
}


/**
 * The data bench/loops.ts times the background loops on (issue 40 item 3): `endpoints` endpoints
 * of one human, `pending` pending todos over them, and around them what a deployment of that size
 * keeps: finished todos (retention's), events, claimed todos, doorbell rings and their sessions,
 * presence history, queue history, OAuth clients, grants, codes and tokens, replay keys. Written
 * with set-based SQL (generate_series) straight into the tables, with the history triggers off
 * while it loads (a fixture, not pushes); ids are made from the row number (md5(...)::uuid), so
 * no statement has to join to find another's rows. All times are relative to `now`.
 */
import type { Sql } from '../src/db/connect.ts';
import { parseShift } from '../src/domain/presence/index.ts';

export interface LoopSizes {
  endpoints: number;
  pending: number;
  /** Endpoints with a session on the timed instance: the heartbeat sweep's receivers. */
  receivers: number;
  /** Share of endpoints with a shift. */
  shifted: number;
  /** Finished todos kept (within the retention), and how many are past it (one retention tick's work). */
  finished: number;
  finishedPastRetention: number;
  claimed: number;
  /** Ring records over the 7 days they are kept, and how many are open with their window closed (the unheard sweep's work). */
  rings: number;
  ringsDue: number;
}

export const DEFAULT_SIZES: LoopSizes = {
  endpoints: 100_000,
  pending: 1_000_000,
  receivers: 20_000,
  shifted: 0.2,
  finished: 500_000,
  finishedPastRetention: 5_000,
  claimed: 10_000,
  rings: 1_000_000,
  ringsDue: 1_000,
};

/** SWITCHBOARD_RETENTION's default (720h). */
export const RETENTION_MS = 30 * 86_400_000;

/** Endpoint i (1-based) holds a deep backlog, and every 100th a busy one (bench/loops.ts says how deep). */
export const DEEP_ENDPOINT = 7;

/** Shifts in several zones and shapes, as bench/presence.ts has them. */
const ZONES = ['UTC', 'Europe/London', 'Europe/Berlin', 'Asia/Kolkata', 'Asia/Tokyo', 'America/New_York', 'America/Los_Angeles', 'Australia/Sydney'];
const SHAPES = ['Mon-Fri 09:00-17:00', 'Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00', 'Sun-Thu 22:00-02:00', 'Sat,Sun 10:00-14:00'];
export const SHIFTS = ZONES.flatMap((z) => SHAPES.map((s) => parseShift(`TZ=${z} ${s}`).canonical));

/** SQL for the uuid of endpoint / agent `i` (an expression over an integer column or literal). */
const endpointId = (i: string) => `md5('e' || (${i})::text)::uuid`;

export interface Loaded {
  humanId: string;
  seconds: number;
  rows: Record<string, number>;
  bytes: Record<string, number>;
}

/**
 * Loads everything in `sizes` at `now`. Pending todo g (1..pending) belongs to: g <= pending/2 an
 * endpoint spread evenly over all of them; g <= 0.9 pending one of the 1,000 busy endpoints
 * (every 100th); past that the deep endpoint DEEP_ENDPOINT. Every 7th is on queue `review`, the
 * rest on `work`; 5 % were created 31 to 60 days ago (an old backlog whose events retention
 * must keep), the rest within 30 days; their doorbell counts are those of a sweep that kept up
 * (rung at 5 m, 20 m, 1 h, 6 h, 6 h), except every 10th, due one ring.
 */
export async function loadLoopData(sql: Sql, sizes: LoopSizes, now: Date): Promise<Loaded> {
  const started = performance.now();
  const N = sizes.endpoints;
  const P = sizes.pending;
  const [human] = await sql<{ id: string }[]>`insert into humans (handle) values ('loops') returning id`;
  const humanId = human!.id;
  await sql`alter table todos disable trigger todo_history_insert, disable trigger todo_history_update, disable trigger todo_history_delete`;
  await sql`alter table doorbell_rings disable trigger ring_history_insert, disable trigger ring_history_update`;

  // Endpoints: one agent each, a share with shifts in several zones, every 50th out by its operator.
  await sql.unsafe(`
    insert into agents (id, owner_human_id, name, created_at)
    select ${endpointId('i')}, $1, 'agent-' || i, $2::timestamptz - interval '90 days'
    from generate_series(1, ${N}) i`, [humanId, now]);
  await sql.unsafe(`
    insert into endpoints (id, agent_id, slug, credential_hash, credential_prefix, scope_queues, scope_verbs, created_at, last_seen_at,
                           shift, presence_override, override_set_at, override_by, presence_seen)
    select ${endpointId('i')}, ${endpointId('i')}, 'ep-' || i, md5('c' || i), 'sbk_loops', '{work,review}', '{claim,push}',
           $1::timestamptz - interval '90 days', $1::timestamptz - (i % 600) * interval '1 second',
           case when i % 100 between 1 and ${Math.round(sizes.shifted * 100)} then ($2::text[])[1 + i % ${SHIFTS.length}] end,
           case when i % 50 = 25 then 'out' end, case when i % 50 = 25 then $1::timestamptz - interval '2 days' end,
           case when i % 50 = 25 then 'operator:' || $3::text end,
           case when i % 50 = 25 then 'out' else 'in' end
    from generate_series(1, ${N}) i`, [now, SHIFTS, humanId]);

  // Pending todos, each with its own event (as pushes make them); event id = g.
  const epOf = `case when g <= ${P / 2} then 1 + g % ${N} when g <= ${(P * 9) / 10} then 100 * (1 + g % ${Math.min(1000, Math.floor(N / 100))}) else ${DEEP_ENDPOINT} end`;
  const ageOf = `case when g % 20 = 0 then (31 * 86400 + (g::bigint * 7919) % (29 * 86400)) else (g::bigint * 7919) % (30 * 86400) end`;
  await sql.unsafe(`
    insert into events (id, source, family, trust_mode, verified, endpoint_id, received_at) overriding system value
    select g, 'operator', 'operator', 'operator', true, ${endpointId(epOf)}, $1::timestamptz - ${ageOf} * interval '1 second'
    from generate_series(1, ${P}) g`, [now]);
  // Rings a sweep that kept up would have charged by each age, seconds: 5 m, 25 m, 85 m, 445 m, 805 m.
  await sql.unsafe(`
    insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, created_at, updated_at, ring_attempts, last_ringed_at, last_ringed_by)
    select 'td_' || md5('t' || g)::uuid, ${endpointId(epOf)}, case when g % 7 = 0 then 'review' else 'work' end, 'operator', 'operator',
           'job ' || g, jsonb_build_object('n', g), g, c, c, a, case when a > 0 then c + (array[300, 1500, 5100, 26700, 48300])[a] * interval '1 second' end,
           case when a > 0 then 'ring' end
    from (
      select g, $1::timestamptz - ${ageOf} * interval '1 second' as c,
             greatest(0, (case when ${ageOf} >= 48300 then 5 when ${ageOf} >= 26700 then 4 when ${ageOf} >= 5100 then 3
                               when ${ageOf} >= 1500 then 2 when ${ageOf} >= 300 then 1 else 0 end) - (g % 10 = 0)::int) as a
      from generate_series(1, ${P}) g
    ) s`, [now]);

  // Claimed todos (agents at work), on the busy endpoints; ids and events after the pending ones.
  const C = sizes.claimed;
  await sql.unsafe(`
    insert into events (id, source, family, trust_mode, verified, endpoint_id, received_at) overriding system value
    select ${P} + g, 'operator', 'operator', 'operator', true, ${endpointId(`100 * (1 + g % ${Math.min(1000, Math.floor(N / 100))})`)}, $1::timestamptz - interval '1 hour'
    from generate_series(1, ${C}) g`, [now]);
  await sql.unsafe(`
    insert into todos (id, endpoint_id, queue, source, kind, title, event_id, state, owner, attempt, claimed_at, lease_expires_at, created_at, updated_at)
    select 'td_' || md5('t' || (${P} + g))::uuid, ${endpointId(`100 * (1 + g % ${Math.min(1000, Math.floor(N / 100))})`)}, 'work', 'operator', 'operator',
           'job', ${P} + g, 'claimed', 'agent:x', 1, $1::timestamptz - (g % 1800) * interval '1 second',
           $1::timestamptz + interval '5 minutes', $1::timestamptz - interval '1 hour', $1::timestamptz - (g % 1800) * interval '1 second'
    from generate_series(1, ${C}) g`, [now]);

  // Finished todos: done (1 in 50 a dead letter) over the 30 days kept, and a tick's worth past it.
  const F = sizes.finished;
  const FP = sizes.finishedPastRetention;
  const finishedAge = `case when g <= ${FP} then ${RETENTION_MS / 1000} + 60 + g % 540 else (g::bigint * 7919) % ${RETENTION_MS / 1000 - 60} end`;
  const base = P + C;
  await sql.unsafe(`
    insert into events (id, source, family, trust_mode, verified, endpoint_id, received_at) overriding system value
    select ${base} + g, 'operator', 'operator', 'operator', true, ${endpointId(`1 + g % ${N}`)}, $1::timestamptz - ${finishedAge} * interval '1 second' - interval '10 minutes'
    from generate_series(1, ${F + FP}) g`, [now]);
  await sql.unsafe(`
    insert into todos (id, endpoint_id, queue, source, kind, title, event_id, state, owner, attempt, claimed_at, completed_at, next_retry_at, result,
                       created_at, updated_at, ring_attempts, last_ringed_at, last_ringed_by)
    select 'td_' || md5('t' || (${base} + g))::uuid, ${endpointId(`1 + g % ${N}`)}, 'work', 'operator', 'operator', 'job', ${base} + g,
           case when g % 50 = 0 then 'failed' else 'done' end, 'agent:x', 1, f - interval '5 minutes', f, null, '{"ok":true}',
           f - interval '10 minutes', f, 1, f - interval '10 minutes', 'ring'
    from (select g, $1::timestamptz - ${finishedAge} * interval '1 second' as f from generate_series(1, ${F + FP}) g) s`, [now]);

  // Events no todo points at: deliveries routing dropped, half of them past the retention.
  const orphanBase = base + F + FP;
  await sql.unsafe(`
    insert into events (id, source, family, trust_mode, verified, endpoint_id, received_at, disposition) overriding system value
    select ${orphanBase} + g, 'github', 'webhook', 'signed', true, ${endpointId(`1 + g % ${N}`)},
           $1::timestamptz - case when g % 2 = 0 then ${RETENTION_MS / 1000} + g % 600 else (g::bigint * 7919) % ${RETENTION_MS / 1000} end * interval '1 second', 'dropped'
    from generate_series(1, 20000) g`, [now]);
  await sql`select setval(pg_get_serial_sequence('events', 'id'), (select max(id) from events))`;

  // Webhooks (one per 10th endpoint) and their replay keys, a week of deliveries, a tick's worth past the window.
  await sql.unsafe(`
    insert into webhooks (id, endpoint_id, source_type, trust_mode, target_queue, ingest_token_hash, ingest_token_hint, signing_secret, created_by, created_at)
    select md5('w' || i)::uuid, ${endpointId('i')}, 'github', 'signed', 'work', md5('wt' || i), 'hint', 'plain:s', 'operator', $1::timestamptz - interval '60 days'
    from generate_series(10, ${N}, 10) i`, [now]);
  await sql.unsafe(`
    insert into replay_keys (webhook_id, body_sha256, received_at, event_id)
    select md5('w' || (10 * (1 + g % ${Math.floor(N / 10)})))::uuid, sha256(('b' || g)::bytea),
           $1::timestamptz - case when g <= 5000 then ${RETENTION_MS / 1000} + g % 600 else (g::bigint * 7919) % ${RETENTION_MS / 1000} end * interval '1 second', g
    from generate_series(1, 200000) g`, [now]);

  // Sessions: one per receiver (endpoint 1..receivers, which holds the deep and 1 in 100 busy ones), a stream each.
  const R = sizes.receivers;
  await sql`insert into instances (id, started_at, heartbeat_at, version) values ('bench', ${now}, ${now}, 'bench')`;
  await sql.unsafe(`
    insert into mcp_sessions (id, endpoint_id, protocol_version, client_name, client_version, initialized, created_at, last_seen_at,
                              stream_instance, stream_opened_at, ever_streamed, called_tool)
    select 'ms_' || i, ${endpointId('i')}, '2025-11-25', 'claude-code', '2.0.0', true, $1::timestamptz - interval '2 hours',
           $1::timestamptz - (i % 60) * interval '1 second', 'bench', $1::timestamptz - interval '2 hours', true, true
    from generate_series(1, ${R}) i`, [now]);

  // Ring records over 7 days to the receivers' sessions: 1 in 5 a digest, most heard by claim, 1 in 8 unheard;
  // the last 15 minutes' still open, and `ringsDue` open past their 15-minute window (the unheard sweep's work).
  const RG = sizes.rings;
  const D = sizes.ringsDue;
  await sql.unsafe(`
    insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, queue, window_seconds, sent_at, acked_at, ack_via, acked_session_id, unheard_at, reason)
    select 'rg_' || lpad(g::text, 26, '0'), ${endpointId(`1 + g % ${R}`)}, 'ms_' || (1 + g % ${R}),
           case when g % 5 = 0 then null else 'td_' || md5('t' || (1 + (g * 13) % ${P}))::uuid end,
           case when g % 5 = 0 then 'digest' else 'todo' end, case when g % 5 = 0 then null else 'work' end, 900, s,
           case when open or g % 8 = 0 then null else s + interval '2 minutes' end,
           case when open or g % 8 = 0 then null else 'claim' end,
           case when open or g % 8 = 0 then null else 'ms_' || (1 + g % ${R}) end,
           case when not open and g % 8 = 0 then s + interval '15 minutes 30 seconds' end, 'newest_stream'
    from (
      select g, g > ${RG - D - 3000} as open,
             case when g > ${RG - D - 3000} then case when g > ${RG - 3000} then $1::timestamptz - ((g - ${RG - 3000}) * 0.3) * interval '1 second'
                                                      else $1::timestamptz - interval '15 minutes' - ((g - ${RG - D - 3000}) * 0.3) * interval '1 second' end
                  else $1::timestamptz - interval '20 minutes' - (g * 0.6) * interval '1 second' end as s
      from generate_series(1, ${RG}) g
    ) r`, [now]);

  // Presence history: the shifted endpoints' two changes a day over 32 days (two past the 30-day keep).
  await sql.unsafe(`
    insert into presence_history (endpoint_id, at, from_presence, to_presence, source, changed_by, reason, until)
    select e.id, $1::timestamptz - d * interval '1 day' - h * interval '8 hours', case when h = 0 then 'out' else 'in' end,
           case when h = 0 then 'in' else 'out' end, 'shift', 'shift', case when h = 0 then 'shift_start' else 'shift_end' end, null
    from endpoints e, generate_series(0, 31) d, generate_series(0, 1) h
    where e.shift is not null`, [now]);

  // OAuth: one client and grant per 2nd endpoint, a used code, an access and a refresh token each; 1 in 20 grants revoked
  // and left empty past the window, 1 in 10 clients that never got a grant.
  const G = Math.floor(N / 2);
  await sql.unsafe(`
    insert into oauth_clients (client_id, client_name, redirect_uris, created_at)
    select 'cl_' || g, 'Claude Code', '{http://127.0.0.1/cb}', $1::timestamptz - case when g % 10 = 0 then interval '40 days' else interval '35 days' end
    from generate_series(1, ${G}) g`, [now]);
  await sql.unsafe(`
    insert into oauth_grants (id, client_id, human_id, endpoint_id, resource, created_at, last_used_at, revoked_at, revoked_why)
    select md5('g' || g)::uuid, 'cl_' || g, $2, ${endpointId('2 * g')}, 'http://127.0.0.1/mcp/ep-' || (2 * g), $1::timestamptz - interval '35 days', $1::timestamptz,
           case when g % 20 = 0 then $1::timestamptz - interval '31 days' end, case when g % 20 = 0 then 'human' end
    from generate_series(1, ${G}) g where g % 10 <> 0`, [now, humanId]);
  await sql.unsafe(`
    insert into oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at, used_at)
    select md5('code' || g), md5('g' || g)::uuid, 'http://127.0.0.1/cb', 'x', $1::timestamptz - case when g % 3 = 0 then interval '31 days' else interval '5 days' end, $1::timestamptz - interval '35 days'
    from generate_series(1, ${G}) g where g % 10 <> 0`, [now]);
  await sql.unsafe(`
    insert into oauth_tokens (token_hash, grant_id, kind, expires_at, used_at)
    select md5('tok' || g || k), md5('g' || g)::uuid, k, $1::timestamptz + case when k = 'access' then interval '1 hour' else interval '30 days' end
             - case when g % 3 = 0 then interval '32 days' else interval '0' end, null
    from generate_series(1, ${G}) g, unnest(array['access', 'refresh']) k where g % 10 <> 0 and g % 20 <> 0`, [now]);

  // Queue history (migration 0025, 0031): every queue's depth now, as the history loop keeps it
  // (the triggers were off while loading); the 1,000 busy endpoints' two queues with a minute row
  // each minute of the last 2 hours and an hour row each hour of the week, and a pass's worth past
  // their keep (48 h, 30 days) for the prune; and the last closed minute's deltas, activity and
  // depth changes, for the fold.
  const busy = Math.min(1000, Math.floor(N / 100));
  await sql`
    insert into todo_depth (endpoint_id, queue, pending, claimed)
    select endpoint_id, queue, count(*) filter (where state = 'pending'), count(*) filter (where state = 'claimed')
    from todos where state in ('pending', 'claimed') and not synthetic group by 1, 2`;
  const minute = new Date(Math.floor(now.getTime() / 60_000) * 60_000);
  const hour = new Date(Math.floor(now.getTime() / 3_600_000) * 3_600_000);
  const busyQueues = `(select ${endpointId('100 * k')} as endpoint_id, q as queue, k from generate_series(1, ${busy}) k, unnest(array['work', 'review']) q) bq`;
  await sql.unsafe(`
    insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, pending_change, claimed_change, rings_sent, heard_claim)
    select 'm', $1::timestamptz - m * interval '1 minute', bq.endpoint_id, bq.queue, 1 + (m + k) % 4, 1 + (m + k) % 3, (m + k) % 3,
           (1 + (m + k) % 4) - (1 + (m + k) % 3), (1 + (m + k) % 3) - (m + k) % 3, (m + k) % 4, (m + k) % 3
    from ${busyQueues}, generate_series(1, 120) m
    union all
    select 'm', $1::timestamptz - interval '48 hours' - m * interval '1 minute', bq.endpoint_id, bq.queue, 1, 1, 1, 0, 0, 1, 1
    from ${busyQueues}, generate_series(1, 6) m
    union all
    select 'h', $2::timestamptz - h * interval '1 hour', bq.endpoint_id, bq.queue, 90, 80, 80, 10, 0, 60, 50
    from ${busyQueues}, generate_series(0, 167) h
    union all
    select 'h', $2::timestamptz - interval '30 days' - h * interval '1 hour', bq.endpoint_id, bq.queue, 90, 80, 80, 0, 0, 60, 50
    from ${busyQueues}, generate_series(1, 6) h`, [minute, hour]);
  await sql.unsafe(`
    insert into todo_history_delta (bucket, endpoint_id, queue, created, claimed, completed, rings_sent, pending_change, wait_bin)
    select $1::timestamptz - interval '1 minute', bq.endpoint_id, bq.queue, r.created, r.claimed, r.completed, r.rings_sent, r.pending_change, r.wait_bin
    from ${busyQueues}, (values (1, 0, 0, 1, 1, null::smallint), (1, 0, 0, 0, 1, null), (0, 1, 0, 0, -1, 12), (0, 0, 1, 0, 0, null)) as r(created, claimed, completed, rings_sent, pending_change, wait_bin)`, [minute]);

  await sql`alter table todos enable trigger todo_history_insert, enable trigger todo_history_update, enable trigger todo_history_delete`;
  await sql`alter table doorbell_rings enable trigger ring_history_insert, enable trigger ring_history_update`;
  await sql`vacuum analyze`;

  const tables = ['endpoints', 'todos', 'events', 'doorbell_rings', 'mcp_sessions', 'presence_history', 'todo_history', 'todo_history_delta', 'todo_depth', 'oauth_clients', 'oauth_grants', 'oauth_codes', 'oauth_tokens', 'replay_keys'];
  const rows: Record<string, number> = {};
  const bytes: Record<string, number> = {};
  for (const t of tables) {
    const [r] = await sql.unsafe(`select count(*)::int as n, pg_total_relation_size('${t}')::float8 as b from ${t}`);
    rows[t] = r!.n as number;
    bytes[t] = r!.b as number;
  }
  return { humanId, seconds: (performance.now() - started) / 1000, rows, bytes };
}

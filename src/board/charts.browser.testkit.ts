import type { Sql } from '../db/connect.ts';
import { WAIT_BINS, waitBin, waitQuantileMs } from '../domain/history.ts';

// What the board's charts should show, computed from the rows themselves (todos, doorbell_rings,
// events, presence_history), never through the history service: charts.browser.test.ts compares
// each drawn chart and its table with these.

export interface Rows {
  created_at: Date;
  todos: { queue: string; created_at: Date; claimed_at: Date | null; updated_at: Date; state: string; next_retry_at: Date | null }[];
  rings: { kind: string; sent_at: Date; acked_at: Date | null; ack_via: string | null; unheard_at: Date | null; queue: string | null }[];
  events: { received_at: Date; outcome: string }[];
  /** When the deliveries the test saw refused were answered: a refusal writes no row of its own to read. */
  refused: Date[];
  presence: { at: Date; from: 'in' | 'out'; to: 'in' | 'out'; source: string }[];
}

export async function readRows(sql: Sql, endpointId: string, webhookId: string, refused: Date[]): Promise<Rows> {
  const [e] = await sql<{ created_at: Date }[]>`select created_at from endpoints where id = ${endpointId}`;
  return {
    created_at: e!.created_at,
    todos: await sql`select queue, created_at, claimed_at, updated_at, state, next_retry_at from todos where endpoint_id = ${endpointId} and not synthetic`,
    rings: await sql`select kind, sent_at, acked_at, ack_via, unheard_at, queue from doorbell_rings where endpoint_id = ${endpointId} and not synthetic and kind in ('todo', 'digest')`,
    events: await sql`select received_at, coalesce(disposition, 'routed') as outcome from events where webhook_id = ${webhookId}`,
    refused,
    presence: await sql`select at, from_presence as "from", to_presence as "to", source from presence_history where endpoint_id = ${endpointId} order by at`,
  };
}

export interface ExpectedPoint {
  t: string;
  created: number;
  claimed: number;
  completed: number;
  failed: number;
  dead: number;
  pending: number;
  claimed_depth: number;
  wait_p50_ms: number | null;
  wait_p95_ms: number | null;
  rings_sent: number;
  heard_claim: number;
  heard_ack: number;
  heard: number;
  unheard: number;
  digests: number;
}

const within = (d: Date | null, s: number, e: number) => d !== null && d.getTime() >= s && d.getTime() < e;

/** A todo's state at instant `m` (this day's todos are never retried: pending, then claimed, then done or failed). */
function stateAt(t: Rows['todos'][number], m: number): 'pending' | 'claimed' | 'finished' | null {
  if (t.created_at.getTime() > m) return null;
  if (!t.claimed_at || t.claimed_at.getTime() > m) return 'pending';
  if ((t.state === 'done' || t.state === 'failed') && t.updated_at.getTime() <= m) return 'finished';
  return 'claimed';
}

/**
 * Per point of window `w`: what happened in it (by the rows' own timestamps; heard and unheard by
 * the ring's send), and the depth at its end by the rows' timestamps, as far as the history loop's
 * last pass folded it (issue 40: the depth now, less the changes after the point); before any
 * pass, 0.
 */
export function expectedHistory(rows: Rows, w: { from: Date; stepSeconds: number; points: number }, passes: readonly Date[], queue?: string): ExpectedPoint[] {
  const todos = rows.todos.filter((t) => queue === undefined || t.queue === queue);
  const rings = rows.rings.filter((r) => queue === undefined || (r.queue ?? '') === queue);
  const out: ExpectedPoint[] = [];
  for (let i = 0; i < w.points; i++) {
    const s = w.from.getTime() + i * w.stepSeconds * 1000;
    const e = s + w.stepSeconds * 1000;
    const claims = todos.filter((t) => within(t.claimed_at, s, e));
    const hist = new Array<number>(WAIT_BINS).fill(0);
    for (const t of claims) hist[waitBin(t.claimed_at!.getTime() - t.created_at.getTime())]!++;
    const finished = (state: string) => todos.filter((t) => t.state === state && within(t.updated_at, s, e));
    const sent = rings.filter((r) => within(r.sent_at, s, e));
    // The point's end (a change at it is the next point's), or the last pass if that came first.
    const last = passes.length ? Math.max(...passes.map((p) => p.getTime())) : null;
    const depth = (st: 'pending' | 'claimed') => (last === null ? 0 : todos.filter((t) => stateAt(t, Math.min(e - 1, last)) === st).length);
    const heardClaim = sent.filter((r) => r.acked_at && r.ack_via === 'claim').length;
    const heardAck = sent.filter((r) => r.acked_at && r.ack_via === 'ack').length;
    out.push({
      t: new Date(s).toISOString(),
      created: todos.filter((t) => within(t.created_at, s, e)).length,
      claimed: claims.length,
      completed: finished('done').length,
      failed: finished('failed').length,
      dead: finished('failed').filter((t) => t.next_retry_at === null).length,
      pending: depth('pending'),
      claimed_depth: depth('claimed'),
      wait_p50_ms: waitQuantileMs(claims.length ? hist : null, 0.5),
      wait_p95_ms: waitQuantileMs(claims.length ? hist : null, 0.95),
      rings_sent: sent.filter((r) => r.kind === 'todo').length,
      heard_claim: heardClaim,
      heard_ack: heardAck,
      heard: heardClaim + heardAck,
      unheard: sent.filter((r) => r.unheard_at).length,
      digests: sent.filter((r) => r.kind === 'digest').length,
    });
  }
  return out;
}

/** Per outcome present in the window, the webhook's deliveries per point. */
export function expectedOutcomes(rows: Rows, w: { from: Date; stepSeconds: number; points: number }): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  const deliveries = [...rows.events, ...rows.refused.map((received_at) => ({ received_at, outcome: 'refused' }))];
  for (const ev of deliveries) {
    const i = Math.floor((ev.received_at.getTime() - w.from.getTime()) / (w.stepSeconds * 1000));
    if (i < 0 || i >= w.points) continue;
    (out[ev.outcome] ??= new Array<number>(w.points).fill(0))[i]!++;
  }
  return out;
}

/**
 * The week's spans of presence (ms), up to `now`: from the endpoint's creation (or 7 days ago),
 * each kept change starting one; before the first, its `from` with no source kept.
 */
export function expectedSpans(rows: Rows, _e: unknown, now: Date): { from: number; to: number; presence: string; source: string | null }[] {
  const since = Math.max(now.getTime() - 7 * 86_400_000, rows.created_at.getTime());
  const changes = rows.presence.filter((p) => p.at.getTime() >= since && p.at.getTime() < now.getTime());
  const spans: { from: number; to: number; presence: string; source: string | null }[] = [];
  let state: { presence: string; source: string | null } = { presence: changes[0]?.from ?? 'in', source: null };
  let at = since;
  for (const c of changes) {
    if (c.at.getTime() > at) spans.push({ from: at, to: c.at.getTime(), ...state });
    state = { presence: c.to, source: c.source };
    at = c.at.getTime();
  }
  spans.push({ from: at, to: now.getTime(), ...state });
  return spans;
}

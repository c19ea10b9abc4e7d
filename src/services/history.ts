import { WINDOWS, waitQuantileMs, windowAt, type HistoryRange } from '../domain/history.ts';
import { foldHistoryDeltasUnscoped, historyOf, pendingDepthOf, pruneHistoryUnscoped, queueHistoryOf, rollUpHoursUnscoped, snapshotDepthUnscoped, webhookDeliveriesOf, type HistoryRow } from '../store/history/index.ts';
import type { ServiceBase } from './base.ts';

/** One point of an endpoint's (or a queue's) history, as the API, the board's JSON and its tables show it. */
export interface HistoryPoint {
  t: string;
  created: number;
  claimed: number;
  completed: number;
  failed: number;
  dead: number;
  /** Depth at the point's end (0 when nothing was live). */
  pending: number;
  claimed_depth: number;
  /** Claim wait (created -> claimed) quantiles in ms, as histogram bin bounds; null with no claim. */
  wait_p50_ms: number | null;
  wait_p95_ms: number | null;
  rings_sent: number;
  heard_claim: number;
  heard_ack: number;
  unheard: number;
  digests: number;
}

export interface HistoryView {
  range: HistoryRange;
  step_seconds: number;
  from: string;
  to: string;
  points: HistoryPoint[];
}

const COUNTS = ['created', 'claimed', 'completed', 'failed', 'dead', 'rings_sent', 'heard_claim', 'heard_ack', 'unheard', 'digests'] as const;

/** Adds a row into a point being built (counts add; depth adds across queues; histograms add). */
function accumulate(into: { point: HistoryPoint; hist: number[] | null }, r: HistoryRow): void {
  for (const k of COUNTS) into.point[k] += r[k];
  into.point.pending += r.pending ?? 0;
  into.point.claimed_depth += r.claimed_depth ?? 0;
  if (r.wait_hist) into.hist = into.hist ? into.hist.map((n, i) => n + (r.wait_hist![i] ?? 0)) : [...r.wait_hist];
}

const emptyPoint = (t: Date): HistoryPoint => ({
  t: t.toISOString(),
  created: 0,
  claimed: 0,
  completed: 0,
  failed: 0,
  dead: 0,
  pending: 0,
  claimed_depth: 0,
  wait_p50_ms: null,
  wait_p95_ms: null,
  rings_sent: 0,
  heard_claim: 0,
  heard_ack: 0,
  unheard: 0,
  digests: 0,
});

/**
 * Queue history (issue 39): the buckets the database triggers write (migration 0025), read as
 * dense series for the board's charts and the API, and kept by the history loop (depth snapshots,
 * the hourly rollup, pruning).
 */
export class HistoryService {
  constructor(private readonly base: ServiceBase) {}

  /** Points of the human's endpoints (summed) in `range`, every step present. */
  async history(humanId: string, endpointIds: readonly string[], range: HistoryRange, opts: { queue?: string } = {}): Promise<HistoryView> {
    const w = windowAt(range, this.base.clock.now());
    const rows = (await historyOf(this.base.sql, humanId, endpointIds, w)).filter((r) => opts.queue === undefined || r.queue === opts.queue);
    return { range, step_seconds: w.stepSeconds, from: w.from.toISOString(), to: w.to.toISOString(), points: this.#dense(w, rows) };
  }

  /** Per queue, the points of the human's endpoints in `range` (the todos page's chart). */
  async byQueue(humanId: string, endpointIds: readonly string[], range: HistoryRange): Promise<{ step_seconds: number; from: string; to: string; queues: Record<string, HistoryPoint[]> }> {
    const w = windowAt(range, this.base.clock.now());
    const rows = await queueHistoryOf(this.base.sql, humanId, endpointIds, w);
    const queues: Record<string, HistoryPoint[]> = {};
    // Doorbell counts of digests carry no queue (''): they are not a queue's.
    for (const q of [...new Set(rows.map((r) => r.queue))].filter((q) => q !== '').sort()) queues[q] = this.#dense(w, rows.filter((r) => r.queue === q));
    return { step_seconds: w.stepSeconds, from: w.from.toISOString(), to: w.to.toISOString(), queues };
  }

  /** Per endpoint, its pending depth over the last 24 h (96 points): the endpoints page's sparklines, in one query. */
  async pendingSparklines(humanId: string, endpointIds: readonly string[]): Promise<Map<string, number[]>> {
    const w = windowAt('24h', this.base.clock.now());
    const out = new Map<string, number[]>(endpointIds.map((id) => [id, new Array<number>(w.points).fill(0)]));
    for (const r of await pendingDepthOf(this.base.sql, humanId, endpointIds, w)) {
      const series = out.get(r.endpoint_id);
      if (!series) continue;
      r.points.forEach((i, k) => {
        if (i >= 0 && i < w.points) series[i] = r.pending[k]!;
      });
    }
    return out;
  }

  /** Deliveries per hour (or point of `range`) by outcome for one of the human's webhooks. */
  async webhookDeliveries(humanId: string, webhookId: string, range: HistoryRange): Promise<{ step_seconds: number; from: string; to: string; outcomes: Record<string, number[]> }> {
    // Deliveries read best per hour over a day or a week; the hour view keeps its minutes.
    const w = windowAt(range, this.base.clock.now());
    const rows = await webhookDeliveriesOf(this.base.sql, humanId, webhookId, w);
    const outcomes: Record<string, number[]> = {};
    for (const r of rows) {
      const i = Math.round((r.bucket.getTime() - w.from.getTime()) / (w.stepSeconds * 1000));
      if (i < 0 || i >= w.points) continue;
      (outcomes[r.outcome] ??= new Array<number>(w.points).fill(0))[i]! += r.n;
    }
    return { step_seconds: w.stepSeconds, from: w.from.toISOString(), to: w.to.toISOString(), outcomes };
  }

  #dense(w: ReturnType<typeof windowAt>, rows: readonly HistoryRow[]): HistoryPoint[] {
    const stepMs = w.stepSeconds * 1000;
    const built = Array.from({ length: w.points }, (_, i) => ({ point: emptyPoint(new Date(w.from.getTime() + i * stepMs)), hist: null as number[] | null }));
    for (const r of rows) {
      const slot = built[Math.round((r.bucket.getTime() - w.from.getTime()) / stepMs)];
      if (slot) accumulate(slot, r);
    }
    return built.map(({ point, hist }) => ({ ...point, wait_p50_ms: waitQuantileMs(hist, 0.5), wait_p95_ms: waitQuantileMs(hist, 0.95) }));
  }

  /**
   * One pass of the history loop: the triggers' deltas of closed minutes folded into their buckets,
   * the depth of every queue now (into the minute that just ended), the hourly rollup of the last
   * two hours, and pruning past the keep. Safe on every instance.
   */
  async maintain(batch = 10_000): Promise<{ depthRows: number; hourRows: number; pruned: number }> {
    const now = this.base.clock.now();
    const folded = await foldHistoryDeltasUnscoped(this.base.sql, now);
    const depthRows = await snapshotDepthUnscoped(this.base.sql, now);
    // The last two hours, and any older hour a late delta (an unheard mark, an ack) just changed.
    const recent = new Date(now.getTime() - 2 * 3600_000);
    const since = folded.earliest && folded.earliest < recent ? folded.earliest : recent;
    const hourRows = await rollUpHoursUnscoped(this.base.sql, since, now);
    const pruned = await pruneHistoryUnscoped(this.base.sql, now, batch);
    return { depthRows, hourRows, pruned };
  }
}

export { WINDOWS };

/** The history loop runs each minute: one depth snapshot per minute bucket. */
export const HISTORY_INTERVAL_MS = 60_000;

import { WINDOWS, waitQuantileMs, windowAt, type HistoryRange } from '../domain/history.ts';
import { foldHistoryDeltasUnscoped, historyOf, humanQueueHistoryOf, pendingDepthOf, pruneHistoryUnscoped, queueHistoryOf, webhookDeliveriesOf, type DepthNow, type HistoryRow } from '../store/history/index.ts';
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

/** A point being built: its counts, its histogram and the net change of its depth. */
interface Building {
  point: HistoryPoint;
  hist: number[] | null;
  pendingChange: number;
  claimedChange: number;
}

/** Adds a row into a point being built (counts, depth changes and histograms add). */
function accumulate(into: Building, r: HistoryRow): void {
  for (const k of COUNTS) into.point[k] += r[k];
  into.pendingChange += r.pending_change;
  into.claimedChange += r.claimed_change;
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
 * Queue history (issue 39): the rows the database triggers write (a row per change, migration
 * 0032), read as dense series for the board's charts and the API, and kept by the history loop
 * (folding closed minutes into minute and hour buckets and every queue's depth, pruning).
 */
export class HistoryService {
  constructor(private readonly base: ServiceBase) {}

  /** Points of the human's endpoints (summed) in `range`, every step present. */
  async history(humanId: string, endpointIds: readonly string[], range: HistoryRange, opts: { queue?: string } = {}): Promise<HistoryView> {
    const w = windowAt(range, this.base.clock.now());
    const read = await historyOf(this.base.sql, humanId, endpointIds, w);
    const mine = (r: { queue: string }) => opts.queue === undefined || r.queue === opts.queue;
    return { range, step_seconds: w.stepSeconds, from: w.from.toISOString(), to: w.to.toISOString(), points: this.#dense(w, read.rows.filter(mine), read.now.filter(mine)) };
  }

  /**
   * Per queue, the points in `range` of every endpoint the human owns, or of one of them (the
   * todos page's chart): counts and depth, no claim wait. Another human's endpoint counts nothing.
   */
  async byQueue(humanId: string, range: HistoryRange, opts: { endpointId?: string } = {}): Promise<{ step_seconds: number; from: string; to: string; queues: Record<string, HistoryPoint[]> }> {
    const w = windowAt(range, this.base.clock.now());
    const { rows, now } = opts.endpointId === undefined ? await humanQueueHistoryOf(this.base.sql, humanId, w) : await queueHistoryOf(this.base.sql, humanId, [opts.endpointId], w);
    const queues: Record<string, HistoryPoint[]> = {};
    // Doorbell counts of digests carry no queue (''): they are not a queue's.
    for (const q of [...new Set([...rows, ...now].map((r) => r.queue))].filter((q) => q !== '').sort()) {
      queues[q] = this.#dense(w, rows.filter((r) => r.queue === q), now.filter((r) => r.queue === q));
    }
    return { step_seconds: w.stepSeconds, from: w.from.toISOString(), to: w.to.toISOString(), queues };
  }

  /** Per endpoint, its pending depth over the last 24 h (96 points): the endpoints page's sparklines, in one query. */
  async pendingSparklines(humanId: string, endpointIds: readonly string[]): Promise<Map<string, number[]>> {
    const w = windowAt('24h', this.base.clock.now());
    const out = new Map<string, number[]>(endpointIds.map((id) => [id, new Array<number>(w.points).fill(0)]));
    for (const r of await pendingDepthOf(this.base.sql, humanId, endpointIds, w)) {
      const series = out.get(r.endpoint_id);
      if (!series) continue;
      const changes = new Array<number>(w.points).fill(0);
      r.points.forEach((i, k) => {
        if (i >= 0 && i < w.points) changes[i]! += r.changes[k]!;
      });
      // The depth at each point's end: now, less the changes after it.
      let depth = r.now;
      for (let i = w.points - 1; i >= 0; i--) {
        series[i] = depth;
        depth -= changes[i]!;
      }
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

  /**
   * Every point of the window from the rows (counts, histograms, depth changes) and the depth now:
   * a point's depth is the depth at its end, the depth now less the changes of the points after it.
   */
  #dense(w: ReturnType<typeof windowAt>, rows: readonly HistoryRow[], now: readonly DepthNow[]): HistoryPoint[] {
    const stepMs = w.stepSeconds * 1000;
    const built: Building[] = Array.from({ length: w.points }, (_, i) => ({ point: emptyPoint(new Date(w.from.getTime() + i * stepMs)), hist: null, pendingChange: 0, claimedChange: 0 }));
    for (const r of rows) {
      const slot = built[Math.round((r.bucket.getTime() - w.from.getTime()) / stepMs)];
      if (slot) accumulate(slot, r);
    }
    let pending = now.reduce((n, d) => n + d.pending, 0);
    let claimed = now.reduce((n, d) => n + d.claimed, 0);
    for (let i = built.length - 1; i >= 0; i--) {
      const b = built[i]!;
      b.point.pending = pending;
      b.point.claimed_depth = claimed;
      pending -= b.pendingChange;
      claimed -= b.claimedChange;
    }
    return built.map(({ point, hist }) => ({ ...point, wait_p50_ms: waitQuantileMs(hist, 0.5), wait_p95_ms: waitQuantileMs(hist, 0.95) }));
  }

  /**
   * One pass of the history loop: the triggers' rows of closed minutes folded into their minute
   * and hour buckets and into every queue's depth, and pruning past the keep. Each step's work is
   * what changed since the last pass (issue 40: the snapshot of every queue and the rollup of two
   * hours of minutes took 12.8 s a pass at 100,000 endpoints and 1,000,000 pending). Safe on every
   * instance. `depthRows`: queues whose depth changed; `hourRows`: minute buckets folded (each
   * added to its hour as well).
   */
  async maintain(batch = 10_000): Promise<{ depthRows: number; hourRows: number; pruned: number }> {
    const now = this.base.clock.now();
    const folded = await foldHistoryDeltasUnscoped(this.base.sql, now);
    const pruned = await pruneHistoryUnscoped(this.base.sql, now, batch);
    return { depthRows: folded.queues, hourRows: folded.rows, pruned };
  }
}

export { WINDOWS };

/** The history loop runs each minute: the last minute's changes folded. */
export const HISTORY_INTERVAL_MS = 60_000;

/**
 * The board's and API's history windows (issue 39) and the claim-wait histogram's bins: the one
 * definition the SQL triggers (migration 0025) and the reads agree on.
 */
export type HistoryRange = '1h' | '24h' | '7d';
export const HISTORY_RANGES: readonly HistoryRange[] = ['1h', '24h', '7d'];

/** Bin i of a wait histogram holds waits up to WAIT_BIN_BASE_MS * WAIT_BIN_FACTOR^i (the last: all longer). */
export const WAIT_BINS = 48;
export const WAIT_BIN_BASE_MS = 100;
export const WAIT_BIN_FACTOR = 1.5;

export interface HistoryWindowSpec {
  width: 'm' | 'h';
  stepSeconds: number;
  points: number;
}

/** 1 h: 60 one-minute points; 24 h: 96 quarter-hour points from minutes; 7 d: 168 hourly points. */
export const WINDOWS: Record<HistoryRange, HistoryWindowSpec> = {
  '1h': { width: 'm', stepSeconds: 60, points: 60 },
  '24h': { width: 'm', stepSeconds: 900, points: 96 },
  '7d': { width: 'h', stepSeconds: 3600, points: 168 },
};

/** The window of `range` ending with the point `now` falls in. */
export function windowAt(range: HistoryRange, now: Date): { width: 'm' | 'h'; stepSeconds: number; from: Date; to: Date; points: number } {
  const spec = WINDOWS[range];
  const stepMs = spec.stepSeconds * 1000;
  const to = new Date(Math.floor(now.getTime() / stepMs) * stepMs + stepMs);
  return { ...spec, from: new Date(to.getTime() - spec.points * stepMs), to };
}

/**
 * The `q` quantile (0..1) of a wait histogram, as its bin's upper bound in milliseconds; null when
 * it counted nothing. Coarse by design (bins grow by half), exact across instances and rollups.
 */
export function waitQuantileMs(hist: readonly number[] | null, q: number): number | null {
  if (!hist) return null;
  const total = hist.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(q * total);
  let seen = 0;
  for (let i = 0; i < hist.length; i++) {
    seen += hist[i]!;
    if (seen >= rank) return Math.round(WAIT_BIN_BASE_MS * WAIT_BIN_FACTOR ** i);
  }
  return Math.round(WAIT_BIN_BASE_MS * WAIT_BIN_FACTOR ** (hist.length - 1));
}

/** The bin a wait falls in (the SQL's history_hist_of, restated for tests and benches). */
export const waitBin = (ms: number): number => Math.min(WAIT_BINS - 1, Math.max(0, Math.ceil(Math.log(Math.max(ms, 1) / WAIT_BIN_BASE_MS) / Math.log(WAIT_BIN_FACTOR))));

/** Reconnect delays: 0.5 s doubling to 15 s, each spread by ±25 % so many bridges do not retry in step. */
export const BACKOFF_INITIAL_MS = 500;
export const BACKOFF_MAX_MS = 15_000;

/** The delay before reconnect attempt `attempt` (0 for the first retry); `random` is in [0, 1). */
export function backoffDelay(attempt: number, random: () => number = Math.random, opts = { initialMs: BACKOFF_INITIAL_MS, maxMs: BACKOFF_MAX_MS }): number {
  const base = Math.min(opts.maxMs, opts.initialMs * 2 ** Math.min(attempt, 30));
  return Math.min(opts.maxMs, Math.round(base * (0.75 + random() * 0.5)));
}

/** Shared by the bench scripts: a concurrent drain loop and its summary. */

export interface DrainResult {
  done: number;
  seconds: number;
  p50: number;
  p99: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Runs `workers` loops of `step` until each sees nothing left; times every successful step. */
export async function drain(workers: number, step: (worker: number) => Promise<boolean>): Promise<DrainResult> {
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (;;) {
        const t0 = performance.now();
        if (!(await step(w))) return;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { done: latencies.length, seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

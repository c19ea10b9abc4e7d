import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import { connect } from '../src/db/connect.ts';
import { WARMUP_JOBS, cpuCounter, freshStatistics, percentile, type DrainResult } from './lib.ts';

/** graphile-worker logs every job at info; the benches print their own tables. */
export const quiet = new Logger(() => () => {});

/**
 * How a graphile-worker runner is set up for a drain; every field left out keeps graphile-worker's
 * own default (no local queue, each completion its own statement, a pool of 10 connections).
 * `localQueueSize`, `completeJobBatchDelay` and `failJobBatchDelay` are graphile-worker 0.17's
 * batching (its docs: https://worker.graphile.org/docs/performance#batching).
 */
export interface GraphileTuning {
  /** Jobs run at once; the drain's `workers` when left out. */
  concurrency?: number;
  maxPoolSize?: number;
  /** preset.worker.localQueue.size: jobs fetched (and locked) in one query, handed out locally. */
  localQueueSize?: number;
  /** ms a completion waits for others to go in the same statement (0: the same tick). */
  completeJobBatchDelay?: number;
  failJobBatchDelay?: number;
}

/**
 * graphile-worker draining `jobs` no-op jobs on the cluster at `url`, run as `tuning` says
 * (`workers` at a time unless it says otherwise). A first runner drains WARMUP_JOBS untimed
 * (bench/lib.ts), as every path it is set beside does, and stops; the timed jobs are then added
 * and a fresh runner takes them. Feeding the timed jobs to the warm runner instead made
 * graphile-worker five to eight times slower in a trial (3-4 ms of PostgreSQL CPU per job), so
 * this is its best case.
 *
 * The clock and the CPU count start when the fresh runner's first task starts (its start-up, about
 * 70 ms, is not counted), and stop when the last completion has been committed: graphile-worker
 * does not wait for a job's completion before its worker takes the next job (with a batch delay
 * the completion waits in memory), so the last task's end is not yet every job done. A job's row
 * is deleted when its completion commits; the drain ends when the table has none left, polled
 * every millisecond once the last task has run.
 */
export async function graphileDrain(url: string, jobs: number, workers: number, tuning: GraphileTuning = {}): Promise<DrainResult> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  await utils.migrate();
  const pg = connect(url, { max: 1 });
  const addJobs = (n: number) =>
    pg.unsafe(`
      select graphile_worker.add_jobs(array(
        select row('bench', json_build_object('n', g), null, null, null, null, null, null)::graphile_worker.job_spec
        from generate_series(1, ${n}) g))`);
  const jobsLeft = async () => ((await pg`select count(*)::int as n from graphile_worker._private_jobs`)[0]!.n as number);
  const concurrency = tuning.concurrency ?? workers;
  const batching = {
    ...(tuning.localQueueSize !== undefined ? { localQueue: { size: tuning.localQueueSize } } : {}),
    ...(tuning.completeJobBatchDelay !== undefined ? { completeJobBatchDelay: tuning.completeJobBatchDelay } : {}),
    ...(tuning.failJobBatchDelay !== undefined ? { failJobBatchDelay: tuning.failJobBatchDelay } : {}),
  };
  const runUntil = async (n: number, task: () => void) => {
    let done = 0;
    let finished!: () => void;
    const all = new Promise<void>((r) => (finished = r));
    const runner = await run({
      connectionString: url,
      concurrency,
      ...(tuning.maxPoolSize !== undefined ? { maxPoolSize: tuning.maxPoolSize } : {}),
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quiet,
      preset: { worker: batching },
      taskList: {
        bench: async () => {
          task();
          if (++done === n) finished();
        },
      },
    });
    return { runner, all };
  };
  const untilCommitted = async () => {
    while ((await jobsLeft()) > 0) await new Promise((r) => setTimeout(r, 1));
  };
  await addJobs(WARMUP_JOBS);
  const warmup = await runUntil(WARMUP_JOBS, () => {});
  await warmup.all;
  await untilCommitted();
  await warmup.runner.stop();
  await addJobs(jobs);
  await freshStatistics(pg);
  // Time each job's task and the whole drain, from the first task's start.
  const latencies: number[] = [];
  let started = NaN;
  let last = NaN;
  let spent: ((jobs: number) => NonNullable<DrainResult['cpu']>) | undefined;
  const { runner, all } = await runUntil(jobs, () => {
    if (spent === undefined) {
      spent = cpuCounter();
      started = last = performance.now();
      return;
    }
    const now = performance.now();
    latencies.push(now - last);
    last = now;
  });
  await all;
  await untilCommitted();
  const seconds = (performance.now() - started) / 1000;
  // Read before the runner stops: its backends' CPU leaves /proc with them.
  const cpu = spent!(jobs);
  await runner.stop();
  await pg.end();
  await utils.release();
  // Per-job figure: the gap between task starts times the concurrency approximates one job's turn.
  const perJob = latencies.map((l) => l * concurrency).sort((a, b) => a - b);
  return { done: jobs, seconds, p50: percentile(perJob, 50), p99: percentile(perJob, 99), cpu };
}

import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import { connect } from '../src/db/connect.ts';
import { WARMUP_JOBS, cpuCounter, freshStatistics, percentile, type DrainResult } from './lib.ts';

/** graphile-worker logs every job at info; the benches print their own tables. */
export const quiet = new Logger(() => () => {});

/**
 * graphile-worker 0.16 draining `jobs` no-op jobs with `workers` concurrency, on the cluster at
 * `url`. A first runner drains WARMUP_JOBS untimed (bench/lib.ts), as every path it is set beside
 * does, and stops; the timed jobs are then added and a fresh runner takes them, the clock started
 * as it starts, as before the warm-up existed. Feeding the timed jobs to the warm runner instead
 * made graphile-worker five to eight times slower in a trial (3-4 ms of PostgreSQL CPU per job),
 * so this is its best case.
 */
export async function graphileDrain(url: string, jobs: number, workers: number): Promise<DrainResult> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  await utils.migrate();
  const pg = connect(url, { max: 1 });
  const addJobs = (n: number) =>
    pg.unsafe(`
      select graphile_worker.add_jobs(array(
        select row('bench', json_build_object('n', g), null, null, null, null, null, null)::graphile_worker.job_spec
        from generate_series(1, ${n}) g))`);
  const runUntil = async (n: number, task: () => void) => {
    let done = 0;
    let finished!: () => void;
    const all = new Promise<void>((r) => (finished = r));
    const runner = await run({
      connectionString: url,
      concurrency: workers,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quiet,
      taskList: {
        bench: async () => {
          task();
          if (++done === n) finished();
        },
      },
    });
    return { runner, all };
  };
  await addJobs(WARMUP_JOBS);
  const warmup = await runUntil(WARMUP_JOBS, () => {});
  await warmup.all;
  await warmup.runner.stop();
  await addJobs(jobs);
  await freshStatistics(pg);
  await pg.end();
  // Time each job's task and the whole drain.
  const latencies: number[] = [];
  const started = performance.now();
  let last = started;
  const spent = cpuCounter();
  const { runner, all } = await runUntil(jobs, () => {
    const now = performance.now();
    latencies.push(now - last);
    last = now;
  });
  await all;
  const seconds = (performance.now() - started) / 1000;
  // Read before the runner stops: its backends' CPU leaves /proc with them.
  const cpu = spent(jobs);
  await runner.stop();
  await utils.release();
  latencies.sort((a, b) => a - b);
  // Per-job figure: the gap between completions times the concurrency approximates one job's turn.
  const perJob = latencies.map((l) => l * workers).sort((a, b) => a - b);
  return { done: jobs, seconds, p50: percentile(perJob, 50), p99: percentile(perJob, 99), cpu };
}

import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import { connect } from '../src/db/connect.ts';
import { cpuCounter, percentile, type DrainResult } from './lib.ts';

/** graphile-worker logs every job at info; the benches print their own tables. */
export const quiet = new Logger(() => () => {});

/** graphile-worker 0.16 draining `jobs` no-op jobs with `workers` concurrency, on the cluster at `url`. */
export async function graphileDrain(url: string, jobs: number, workers: number): Promise<DrainResult> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  await utils.migrate();
  const pg = connect(url, { max: 1 });
  await pg.unsafe(`
    select graphile_worker.add_jobs(array(
      select row('bench', json_build_object('n', g), null, null, null, null, null, null)::graphile_worker.job_spec
      from generate_series(1, ${jobs}) g))`);
  await pg.end();
  // graphile-worker runs its own workers; time each job's task and the whole drain.
  const latencies: number[] = [];
  let done = 0;
  const started = performance.now();
  let finished!: () => void;
  const all = new Promise<void>((r) => (finished = r));
  let last = performance.now();
  const spent = cpuCounter();
  const runner = await run({
    connectionString: url,
    concurrency: workers,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: quiet,
    taskList: {
      bench: async () => {
        const now = performance.now();
        latencies.push(now - last);
        last = now;
        if (++done === jobs) finished();
      },
    },
  });
  await all;
  const seconds = (performance.now() - started) / 1000;
  // Read before the runner stops: its backends' CPU leaves /proc with them.
  const cpu = spent(done);
  await runner.stop();
  await utils.release();
  latencies.sort((a, b) => a - b);
  // Per-job figure: the gap between completions times the concurrency approximates one job's turn.
  const perJob = latencies.map((l) => l * workers).sort((a, b) => a - b);
  return { done, seconds, p50: percentile(perJob, 50), p99: percentile(perJob, 99), cpu };
}


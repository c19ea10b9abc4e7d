/**
 * The claim path alone, beside graphile-worker on the same throwaway PostgreSQL in one run: each
 * round drains `--jobs` todos through the store (claim_next + complete, in process) and then the
 * same number of graphile-worker jobs, `--workers` at a time; rounds alternate so that a noisy
 * neighbour hits both. Prints each round, the medians and the ratio (issue 20's store target is
 * at least 1.0x graphile-worker at 20,000 jobs and 8 workers; `npm run bench:peers` is the full run).
 * Beside each round: its CPU per job in this process and in PostgreSQL (from /proc). Each drain
 * first takes WARMUP_JOBS untimed (bench/lib.ts).
 *
 *   npm run bench:claim-store -- [--jobs 5000] [--workers 8] [--rounds 3] [--json]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { connect } from '../src/db/connect.ts';
import { systemClock } from '../src/lib/clock.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { graphileDrain } from './graphile.ts';
import { WARMUP_JOBS, cpuTotal, openLanes, storeDrain, type DrainResult, figure, printJsonLast, seedPendingTodos, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '5000' },
    workers: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    json: { type: 'boolean', default: false },
  },
});
const JOBS = Number(values.jobs);
const WORKERS = Number(values.workers);
const ROUNDS = Number(values.rounds);

const rate = (r: DrainResult) => r.done / r.seconds;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

await withBenchDatabase(WORKERS + 4, async ({ cluster, sql, pgVersion }) => {
  const human = await addHuman(sql, { handle: 'bench' });
  const store: DrainResult[] = [];
  const graphile: DrainResult[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const v = await vendEndpoint(sql, human.id, { name: `store-${round}`, queues: ['work'] }, systemClock.now());
    await seedPendingTodos(sql, v.endpoint.id, JOBS + WARMUP_JOBS);
    // The workers' own pool, connected before the clock starts.
    const pool = connect(cluster.url, { max: WORKERS });
    await Promise.all(Array.from({ length: WORKERS }, () => pool`select 1`));
    const lanes = await openLanes(cluster.url);
    const s = await storeDrain(pool, lanes.lanes, v.endpoint, WORKERS);
    await Promise.all([pool.end(), lanes.end()]);
    const g = await graphileDrain(cluster.url, JOBS, WORKERS);
    store.push(s);
    graphile.push(g);
    console.log(
      `round ${round}: store ${Math.round(rate(s))} jobs/s (p99 ${s.p99.toFixed(1)} ms; CPU per job: Node ${s.cpu!.node.toFixed(2)} ms, PostgreSQL ${s.cpu!.pg.toFixed(2)} ms), graphile-worker ${Math.round(rate(g))} jobs/s (p99 ${g.p99.toFixed(1)} ms; CPU per job: Node ${g.cpu!.node.toFixed(2)} ms, PostgreSQL ${g.cpu!.pg.toFixed(2)} ms), ratio ${(rate(s) / rate(g)).toFixed(2)}x`,
    );
  }
  const s = median(store.map(rate));
  const g = median(graphile.map(rate));
  const ratios = store.map((x, i) => rate(x) / rate(graphile[i]!));
  console.log(`\n${JOBS} jobs x ${WORKERS} workers, ${ROUNDS} rounds, ${os.cpus().length} cores, PostgreSQL ${pgVersion}`);
  const cpuRatios = store.map((x, i) => cpuTotal(x) / cpuTotal(graphile[i]!));
  console.log(`median: store ${Math.round(s)} jobs/s, graphile-worker ${Math.round(g)} jobs/s; median ratio ${median(ratios).toFixed(2)}x (target >= 1.0x)`);
  console.log(
    `CPU per job (this process + PostgreSQL), median: store ${median(store.map(cpuTotal)).toFixed(2)} ms, graphile-worker ${median(graphile.map(cpuTotal)).toFixed(2)} ms; ` +
      `median of the rounds' store/graphile-worker ratios ${median(cpuRatios).toFixed(2)} (below 1: the store costs less per job)`,
  );
  if (values.json) {
    printJsonLast('claim-store', pgVersion, {
      jobs: JOBS,
      workers: WORKERS,
      rounds: ROUNDS,
      store_jobs_per_second: figure(s, 0),
      graphile_jobs_per_second: figure(g, 0),
      store_ratio_to_graphile: figure(median(ratios)),
      store_cpu_ms_per_job: figure(median(store.map(cpuTotal))),
      graphile_cpu_ms_per_job: figure(median(graphile.map(cpuTotal))),
      store_cpu_ratio_to_graphile: figure(median(cpuRatios)),
      rounds_detail: store.map((x, i) => ({
        store: figure(rate(x), 0),
        graphile: figure(rate(graphile[i]!), 0),
        store_node_cpu_ms_per_job: figure(x.cpu!.node),
        store_postgres_cpu_ms_per_job: figure(x.cpu!.pg),
        graphile_node_cpu_ms_per_job: figure(graphile[i]!.cpu!.node),
        graphile_postgres_cpu_ms_per_job: figure(graphile[i]!.cpu!.pg),
      })),
    });
  }
});

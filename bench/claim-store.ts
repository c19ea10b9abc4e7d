/**
 * The claim path alone, beside graphile-worker on the same throwaway PostgreSQL in one run: each
 * round drains `--jobs` todos through the store (claim_next + complete, in process) and then the
 * same number of graphile-worker jobs, `--workers` at a time; rounds alternate so that a noisy
 * neighbour hits both. Prints each round, the medians and the ratio (issue 20's store target is
 * at least 1.0x graphile-worker at 20,000 jobs and 8 workers; `npm run bench:peers` is the full run).
 * With `--mcp` each round also drains over MCP, bare HTTP from agents in a process of their own
 * (bench/mcp-driver.ts, wire), once with claim_next + complete and once with complete {next: true}
 * (issue 20's MCP target: at least 0.5x graphile-worker).
 * Beside each round: its CPU per job in this process and in PostgreSQL (from /proc). Each drain
 * first takes WARMUP_JOBS untimed (bench/lib.ts).
 *
 *   npm run bench:claim-store -- [--jobs 5000] [--workers 8] [--rounds 3] [--mcp] [--json]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { App } from '../src/app.ts';
import { connect } from '../src/db/connect.ts';
import { systemClock } from '../src/lib/clock.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { graphileDrain } from './graphile.ts';
import {
  WARMUP_JOBS,
  cpuTotal,
  openLanes,
  runMcpDriver,
  startBenchApp,
  storeDrain,
  type DrainResult,
  type McpDriverLoop,
  figure,
  printJsonLast,
  seedPendingTodos,
  withBenchDatabase,
} from './lib.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '5000' },
    workers: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    mcp: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});
const JOBS = Number(values.jobs);
const WORKERS = Number(values.workers);
const ROUNDS = Number(values.rounds);

const rate = (r: DrainResult) => r.done / r.seconds;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cpuParts = (r: DrainResult) =>
  `CPU per job: Node ${r.cpu!.node.toFixed(2)} ms, PostgreSQL ${r.cpu!.pg.toFixed(2)} ms${r.cpu!.agents !== undefined ? `, agents ${r.cpu!.agents.toFixed(2)} ms` : ''}`;

/** The paths drained each round before graphile-worker, by name. */
type Path = 'store' | 'mcp' | 'mcp_next';
const MCP_LOOPS: Record<Exclude<Path, 'store'>, McpDriverLoop> = { mcp: 'two-calls', mcp_next: 'next' };
const LABEL: Record<Path, string> = { store: 'store', mcp: 'MCP claim_next + complete', mcp_next: 'MCP complete {next}' };
const paths: Path[] = values.mcp ? ['store', 'mcp', 'mcp_next'] : ['store'];

await withBenchDatabase(WORKERS + 12, async ({ cluster, sql, pgVersion }) => {
  const human = await addHuman(sql, { handle: 'bench' });
  const app: App | null = values.mcp ? await startBenchApp(cluster.url) : null;
  const drained: Record<Path, DrainResult[]> = { store: [], mcp: [], mcp_next: [] };
  const graphile: DrainResult[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const path of paths) {
      const v = await vendEndpoint(sql, human.id, { name: `${path}-${round}`, queues: ['work'] }, systemClock.now());
      await seedPendingTodos(sql, v.endpoint.id, JOBS + WARMUP_JOBS);
      if (path === 'store') {
        // The workers' own pool, connected before the clock starts.
        const pool = connect(cluster.url, { max: WORKERS });
        await Promise.all(Array.from({ length: WORKERS }, () => pool`select 1`));
        const lanes = await openLanes(cluster.url);
        drained.store.push(await storeDrain(pool, lanes.lanes, v.endpoint, WORKERS));
        await Promise.all([pool.end(), lanes.end()]);
      } else {
        drained[path].push(await runMcpDriver('wire', `${app!.baseUrl}/mcp/${v.endpoint.slug}`, v.credential, WORKERS, MCP_LOOPS[path]));
      }
    }
    const g = await graphileDrain(cluster.url, JOBS, WORKERS);
    graphile.push(g);
    const shown = paths.map((path) => {
      const r = drained[path][round - 1]!;
      return `${LABEL[path]} ${Math.round(rate(r))} jobs/s (p99 ${r.p99.toFixed(1)} ms; ${cpuParts(r)}; ${(rate(r) / rate(g)).toFixed(2)}x)`;
    });
    console.log(`round ${round}: ${shown.join(', ')}, graphile-worker ${Math.round(rate(g))} jobs/s (p99 ${g.p99.toFixed(1)} ms; ${cpuParts(g)})`);
  }
  await app?.stop();

  const g = median(graphile.map(rate));
  const ratios = (path: Path) => drained[path].map((x, i) => rate(x) / rate(graphile[i]!));
  const cpuRatios = (path: Path) => drained[path].map((x, i) => cpuTotal(x) / cpuTotal(graphile[i]!));
  const target: Record<Path, number> = { store: 1.0, mcp: 0.5, mcp_next: 0.5 };
  console.log(`\n${JOBS} jobs x ${WORKERS} workers, ${ROUNDS} rounds, ${os.cpus().length} cores, PostgreSQL ${pgVersion}; graphile-worker median ${Math.round(g)} jobs/s`);
  for (const path of paths) {
    console.log(
      `median: ${LABEL[path]} ${Math.round(median(drained[path].map(rate)))} jobs/s; median ratio to graphile-worker ${median(ratios(path)).toFixed(2)}x (target >= ${target[path].toFixed(1)}x); ` +
        `CPU per job ${median(drained[path].map(cpuTotal)).toFixed(2)} ms against ${median(graphile.map(cpuTotal)).toFixed(2)} (median of the rounds' ratios ${median(cpuRatios(path)).toFixed(2)}; below 1: less per job)`,
    );
  }
  if (values.json) {
    const figures = (path: Path) => ({
      [`${path}_jobs_per_second`]: figure(median(drained[path].map(rate)), 0),
      [`${path}_ratio_to_graphile`]: figure(median(ratios(path))),
      [`${path}_cpu_ms_per_job`]: figure(median(drained[path].map(cpuTotal))),
      [`${path}_cpu_ratio_to_graphile`]: figure(median(cpuRatios(path))),
    });
    printJsonLast('claim-store', pgVersion, {
      jobs: JOBS,
      workers: WORKERS,
      rounds: ROUNDS,
      graphile_jobs_per_second: figure(g, 0),
      graphile_cpu_ms_per_job: figure(median(graphile.map(cpuTotal))),
      ...Object.assign({}, ...paths.map(figures)),
      rounds_detail: graphile.map((gr, i) => ({
        graphile: figure(rate(gr), 0),
        graphile_node_cpu_ms_per_job: figure(gr.cpu!.node),
        graphile_postgres_cpu_ms_per_job: figure(gr.cpu!.pg),
        ...Object.assign(
          {},
          ...paths.map((path) => ({
            [path]: figure(rate(drained[path][i]!), 0),
            [`${path}_node_cpu_ms_per_job`]: figure(drained[path][i]!.cpu!.node),
            [`${path}_postgres_cpu_ms_per_job`]: figure(drained[path][i]!.cpu!.pg),
          })),
        ),
      })),
    });
  }
});

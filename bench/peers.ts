/**
 * Switchboard beside its peers, on one throwaway PostgreSQL in one run (issue 10):
 *  1. claim throughput: the same number of jobs drained by `workers` concurrent workers from
 *     (a) Switchboard's store in process, (b) Switchboard over MCP HTTP (bare HTTP from a
 *     separate process, SDK-free: requests written on keep-alive sockets, bench/mcp-driver.ts),
 *     claim_next then complete, and again with each job's complete {next: true} claiming the
 *     next (one call per job), (c) pg-boss, each of its workers fetching `--pgboss-batches`
 *     jobs at a time (1 first) and completing their ids in one call, (d) graphile-worker with its
 *     defaults, then with its documented batching (a local queue, batched completions: the
 *     GRAPHILE_CONFIGS below); each first drains WARMUP_JOBS untimed from the same queue, and our
 *     paths are set beside each peer's defaults and its fastest configuration in the run;
 *     beside it, a side run on a shallow queue (`--sdk-jobs` each) of the MCP SDK `Client`, a
 *     node:http client, bare HTTP (both loops) and pg-boss: a client's own per-call cost is not the server's,
 *     and pg-boss's fetch slows with the queue's depth;
 *  2. add-to-wake latency: a todo pushed to a connected agent until its doorbell arrives, beside
 *     graphile-worker's add-to-start latency;
 *  3. PostgreSQL's own single-row insert commits (pgbench): the rate at `workers` clients, the
 *     write paths' ceiling, and one client's commit latency, the floor for add-to-wake.
 * The peers live in bench/package.json (`npm --prefix bench ci`), so the main install stays lean.
 *
 *   npm run bench:peers -- [--jobs 20000] [--workers 8] [--pings 200] [--sdk-jobs 1000] [--pgbench-seconds 5]
 *                          [--pgboss-batches 1,10,50,100,250,500] [--graphile-rounds 3] [--json] [--record]
 *
 * --json: every figure and ratio as one JSON object on the last line of stdout.
 * --record: the same object, with the commit, the options and the load average before and after,
 * written to bench/results/peers-<YYYY-MM-DD-HHMM>.json.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { makeWorkerUtils, run } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { systemClock } from '../src/lib/clock.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { insertEventAndTodo } from '../src/store/todos/index.ts';
import { connectAgent } from '../test/support/agents.ts';
import type { Sql } from '../src/db/connect.ts';
import { graphileDrain, quiet, type GraphileTuning } from './graphile.ts';
import { WARMUP_JOBS, benchCommit, cpuCounter, cpuTotal, freshStatistics, runMcpDriver, startBenchApp, storeDrain, type McpDriverMode, type McpDriverLoop, withLanes, type DrainResult, percentile, figure, pctOf, pgbenchInsertRate, printJsonLast, seedPendingTodos, summarize, timesOf, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '20000' },
    workers: { type: 'string', default: '8' },
    pings: { type: 'string', default: '200' },
    'sdk-jobs': { type: 'string', default: '1000' },
    'pgbench-seconds': { type: 'string', default: '5' },
    'pgboss-batches': { type: 'string', default: '1,10,50,100,250,500' },
    'graphile-rounds': { type: 'string', default: '3' },
    json: { type: 'boolean', default: false },
    record: { type: 'boolean', default: false },
  },
});
const JOBS = Number(values.jobs);
const WORKERS = Number(values.workers);
const PINGS = Number(values.pings);
const SDK_JOBS = Number(values['sdk-jobs']);
const PGBENCH_SECONDS = Number(values['pgbench-seconds']);
/** pg-boss batch sizes, each a drain of its own; the first is the one the `pgboss_` keys report. */
const PGBOSS_BATCHES = values['pgboss-batches'].split(',').map(Number);
/**
 * Drains of each graphile-worker configuration, the configurations taking turns; its median (by
 * rate) is its figure. A batched drain of 20,000 jobs takes well under a second here, short
 * enough for one noisy moment to move it; pg-boss's drains and ours run once (seconds to minutes).
 */
const GRAPHILE_ROUNDS = Number(values['graphile-rounds']);
const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
const versionOf = (pkg: string): string =>
  (JSON.parse(readFileSync(path.join(BENCH_DIR, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
const GRAPHILE_VERSION = versionOf('graphile-worker');
const PGBOSS_VERSION = versionOf('pg-boss');

/**
 * graphile-worker as it comes, then with the batching its performance page documents
 * (https://worker.graphile.org/docs/performance): a local queue of `concurrency + 1` (its
 * suggested start), of 500 (its own benchmark's), completions batched in the same tick (0) or
 * over 250 ms (the value its option's docs suggest starting from), and its benchmark's preset
 * whole: concurrency 24, a pool of 25. The first is the `graphile_` keys' (the default); the
 * fastest is `graphile_best_`, whichever it is in the run.
 */
const GRAPHILE_CONFIGS: { key: string; name: string; tuning: GraphileTuning }[] = [
  { key: 'defaults', name: 'defaults', tuning: {} },
  { key: `lq${WORKERS + 1}_c0`, name: `localQueue ${WORKERS + 1}, complete/fail batch delay 0`, tuning: { localQueueSize: WORKERS + 1, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
  { key: 'lq500_c0', name: 'localQueue 500, complete/fail batch delay 0', tuning: { localQueueSize: 500, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
  { key: 'lq500_c250', name: 'localQueue 500, complete/fail batch delay 250 ms', tuning: { localQueueSize: 500, completeJobBatchDelay: 250, failJobBatchDelay: 250 } },
  {
    key: 'docs_preset',
    name: 'its benchmark preset: concurrency 24, pool 25, localQueue 500, delay 0',
    tuning: { concurrency: 24, maxPoolSize: 25, localQueueSize: 500, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
  },
];

/**
 * pg-boss's fetch sorts every queued job of the queue (its index is on name and start_after, the
 * order is priority, created_on, id), so its rate depends on the queue's depth: `queue` names a
 * fresh queue per run. Each of the WORKERS loops fetches `batchSize` jobs, then completes their
 * ids in one call (pg-boss's batch fetch: `fetch(queue, {batchSize})`, `complete(queue, ids)`), so
 * a batch's jobs are done when its one completion commits. The first WARMUP_JOBS jobs go untimed.
 * p50 and p99 are of a round (one fetch and its completion), whatever its number of jobs.
 */
async function pgBossDrain(sql: Sql, url: string, queue: string, jobs: number, batchSize = 1): Promise<DrainResult> {
  const boss = new PgBoss({ connectionString: url, max: WORKERS + 2, supervise: false, schedule: false, migrate: true });
  boss.on('error', (e) => console.error('pg-boss:', e.message));
  await boss.start();
  await boss.createQueue(queue);
  const seeded = jobs + WARMUP_JOBS;
  for (let i = 0; i < seeded; i += 1000) {
    await boss.insert(Array.from({ length: Math.min(1000, seeded - i) }, (_, k) => ({ name: queue, data: { n: i + k } })));
  }
  await freshStatistics(sql);
  const round = async (want: number) => {
    const taken = await boss.fetch(queue, { batchSize: want });
    if (taken.length > 0) await boss.complete(queue, taken.map((j) => j.id));
    return taken.length;
  };
  await roundsDrain(WORKERS, batchSize, round, WARMUP_JOBS);
  const spent = cpuCounter();
  const result = await roundsDrain(WORKERS, batchSize, round);
  const cpu = spent(result.done);
  await boss.stop({ graceful: false, wait: true });
  if (result.done !== jobs) console.error(`pg-boss batch ${batchSize}: drained ${result.done} of ${jobs} jobs`);
  return { ...result, cpu };
}

/**
 * `workers` loops, each taking up to `batch` jobs a round (`round(n)` returns how many it took),
 * until a round finds none or `limit` jobs have been asked for. Counts jobs, not rounds, and times
 * every round that took any.
 */
async function roundsDrain(workers: number, batch: number, round: (want: number) => Promise<number>, limit = Infinity): Promise<DrainResult> {
  const latencies: number[] = [];
  const started = performance.now();
  let asked = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (;;) {
        const want = Math.min(batch, limit - asked);
        if (want <= 0) return;
        asked += want;
        const t0 = performance.now();
        const took = await round(want);
        if (took === 0) return;
        latencies.push(performance.now() - t0);
        done += took;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { done, seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

async function graphileAddToStart(url: string): Promise<number[]> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  const waits = new Map<number, (t: number) => void>();
  const runner = await run({
    connectionString: url,
    concurrency: 1,
    noHandleSignals: true,
    pollInterval: 2000,
    logger: quiet,
    taskList: { ping: async (payload) => waits.get((payload as { n: number }).n)?.(performance.now()) },
  });
  const out: number[] = [];
  for (let n = 0; n < PINGS; n++) {
    const started = new Promise<number>((r) => waits.set(n, r));
    const t0 = performance.now();
    await utils.addJob('ping', { n });
    out.push((await started) - t0);
  }
  await runner.stop();
  await utils.release();
  return out.sort((a, b) => a - b);
}

/** Issue 20's claim targets, stated at 20,000 jobs and 8 workers (and the 1,000-job side run). */
const TARGETS = { storeToGraphile: 1.0, mcpToPgboss: 1.0, mcpToGraphile: 0.5 };

async function main(): Promise<void> {
  let json: (() => void) | undefined;
  const loadBefore = os.loadavg().map((x) => Number(x.toFixed(2)));
  const startedAt = performance.now();
  await withBenchDatabase(20, async ({ cluster, sql, pgVersion }) => {
    const app = await startBenchApp(cluster.url);
    const human = await addHuman(sql, { handle: 'bench' });
    const endpoint = async (name: string, jobs: number) => {
      const v = await vendEndpoint(sql, human.id, { name, queues: ['work'] }, systemClock.now());
      // Every drain takes WARMUP_JOBS untimed first.
      if (jobs > 0) await seedPendingTodos(sql, v.endpoint.id, jobs + WARMUP_JOBS);
      return v;
    };

    // 2. Add-to-wake: push a todo to a connected agent, time until its doorbell arrives.
    const wakeEp = await endpoint('wake', 0);
    const agent = await connectAgent(app, { slug: wakeEp.endpoint.slug, token: wakeEp.credential });
    const wake: number[] = [];
    for (let n = 0; n < PINGS; n++) {
      const before = agent.heard.length;
      const t0 = performance.now();
      const { todo, pushEligible } = await insertEventAndTodo(
        sql,
        { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
        { endpointId: wakeEp.endpoint.id, queue: 'work', title: `ping ${n}` },
        systemClock.now(),
      );
      if (pushEligible) app.services.readyRings.ringReady(todo);
      while (agent.heard.length === before) await new Promise((r) => setImmediate(r));
      wake.push(performance.now() - t0);
    }
    await agent.client.close();
    wake.sort((a, b) => a - b);

    // 1. Claim throughput: each path drains its own JOBS todos (or jobs), one path at a time.
    const direct = await endpoint('direct', JOBS);
    const store = await withLanes(cluster.url, (lanes) => storeDrain(sql, lanes, direct.endpoint, WORKERS));
    const mcp = async (mode: McpDriverMode, name: string, jobs: number, loop: McpDriverLoop = 'two-calls') => {
      const ep = await endpoint(name, jobs);
      return runMcpDriver(mode, `${app.baseUrl}/mcp/${ep.endpoint.slug}`, ep.credential, WORKERS, loop);
    };
    const bare = await mcp('wire', 'wire', JOBS);
    // The same agents finishing each job with complete {next: true}: one call per job.
    const bareNext = await mcp('wire', 'wire-next', JOBS, 'next');
    // Every pg-boss batch size, each on a fresh queue of its own, then every graphile-worker set-up.
    const bossRuns: { batch: number; r: DrainResult }[] = [];
    for (const batch of PGBOSS_BATCHES) bossRuns.push({ batch, r: await pgBossDrain(sql, cluster.url, `bench-b${batch}`, JOBS, batch) });
    const graphileRounds = GRAPHILE_CONFIGS.map(() => [] as DrainResult[]);
    for (let round = 0; round < GRAPHILE_ROUNDS; round++) {
      for (const [i, c] of GRAPHILE_CONFIGS.entries()) graphileRounds[i]!.push(await graphileDrain(cluster.url, JOBS, WORKERS, c.tuning));
    }
    const byRate = (a: DrainResult, b: DrainResult) => a.done / a.seconds - b.done / b.seconds;
    const graphileRuns = GRAPHILE_CONFIGS.map((c, i) => {
      const all = graphileRounds[i]!;
      return { ...c, all, r: [...all].sort(byRate)[Math.floor((all.length - 1) / 2)]! };
    });
    const boss = bossRuns[0]!.r;
    const graphile = graphileRuns[0]!.r;
    // The SDK client and node:http beside bare HTTP and pg-boss on a shallow queue: each client's
    // own per-call cost is its difference to the wire driver's, and pg-boss's fetch is cheap on a
    // short queue.
    const sdkSide = await mcp('sdk', 'sdk-side', SDK_JOBS);
    const httpSide = await mcp('http', 'http-side', SDK_JOBS);
    const bareSide = await mcp('wire', 'wire-side', SDK_JOBS);
    const bareNextSide = await mcp('wire', 'wire-next-side', SDK_JOBS, 'next');
    const bossSide = await pgBossDrain(sql, cluster.url, 'bench-side', SDK_JOBS);

    const graphileWake = await graphileAddToStart(cluster.url);
    await app.stop();

    // 3. PostgreSQL's own limit: commits/s at WORKERS clients, one commit's latency at one client.
    const pg = await pgbenchInsertRate(cluster, WORKERS, PGBENCH_SECONDS);
    const pg1 = await pgbenchInsertRate(cluster, 1, PGBENCH_SECONDS);

    const rate = (r: DrainResult) => r.done / r.seconds;
    const fastest = <T extends { r: DrainResult }>(runs: T[]): T => runs.reduce((a, b) => (rate(b.r) > rate(a.r) ? b : a));
    const graphileBest = fastest(graphileRuns);
    const bossBest = fastest(bossRuns);
    const gBest = graphileBest.r;
    const bBest = bossBest.r;
    const ms = (x: number) => Number(x.toFixed(2));
    const times = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
    const cpuFigure = (r: DrainResult) =>
      r.cpu ? `${cpuTotal(r).toFixed(2)} (${r.cpu.node.toFixed(2)} + ${r.cpu.pg.toFixed(2)} PG${r.cpu.agents !== undefined ? ` + ${r.cpu.agents.toFixed(2)} agents` : ''})` : '';
    const row = (path: string, r: DrainResult, per = 'job') => ({
      path,
      jobs: r.done,
      'jobs/s': Math.round(rate(r)),
      [`p50 ms/${per}`]: ms(r.p50),
      [`p99 ms/${per}`]: ms(r.p99),
      'CPU ms/job': cpuFigure(r),
      'x graphile defaults': times(rate(r), rate(graphile)),
      'x graphile best': times(rate(r), rate(gBest)),
      'x pg-boss best': times(rate(r), rate(bBest)),
      'vs pgbench': pctOf(rate(r), pg.tps, 1),
    });
    const mcpMet = rate(bare) >= rate(boss);
    console.log(
      `cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${WORKERS} workers, ${JOBS} jobs per path; every path first drains ${WARMUP_JOBS} jobs untimed from the same queue (the MCP agents run in a process of their own). ` +
        'CPU ms/job: this process (the store, the server or the peer) + PostgreSQL (+ the agents\' process), counted during the drain alone. ' +
        `graphile-worker ${GRAPHILE_VERSION}: timed from its first task's start until its last completion has committed, each configuration the median of ${GRAPHILE_ROUNDS} drains (taking turns; every round's rate in --json). pg-boss ${PGBOSS_VERSION}: each worker fetches a batch, then completes its ids in one call; its p50/p99 are per round (one fetch and its completion).`,
    );
    console.table([
      row('Switchboard store, in process', store),
      row('Switchboard MCP over HTTP (bare, SDK-free)', bare),
      row('Switchboard MCP, complete with next (one call per job)', bareNext),
      ...bossRuns.map(({ batch, r }) => row(`pg-boss ${PGBOSS_VERSION}, fetch batchSize ${batch} + complete(ids)${r === bBest ? ' [best]' : ''}`, r, 'round')),
      ...graphileRuns.map(({ name, tuning, r }) =>
        row(`graphile-worker ${GRAPHILE_VERSION}, ${name} (concurrency ${tuning.concurrency ?? WORKERS})${r === gBest ? ' [best]' : ''}`, r),
      ),
    ]);
    console.log(
      `Fastest graphile-worker: ${graphileBest.name}, ${Math.round(rate(gBest))} jobs/s (${times(rate(gBest), rate(graphile))} its defaults). ` +
        `Store ${times(rate(store), rate(gBest))} of it (${times(rate(store), rate(graphile))} of the defaults); ` +
        `MCP ${times(rate(bare), rate(gBest))} (${times(rate(bare), rate(graphile))}); MCP with next ${times(rate(bareNext), rate(gBest))} (${times(rate(bareNext), rate(graphile))}). ` +
        `CPU per job, store ${times(cpuTotal(store), cpuTotal(gBest))} graphile-worker's best's, MCP ${times(cpuTotal(bare), cpuTotal(gBest))}.`,
    );
    console.log(
      `Fastest pg-boss: batchSize ${bossBest.batch}, ${Math.round(rate(bBest))} jobs/s (${times(rate(bBest), rate(boss))} batchSize ${bossRuns[0]!.batch}). ` +
        `Store ${times(rate(store), rate(bBest))} of it, MCP ${times(rate(bare), rate(bBest))}, MCP with next ${times(rate(bareNext), rate(bBest))}.`,
    );
    console.log(
      `Side run, ${SDK_JOBS} jobs each (a shallow queue): the MCP SDK Client and node:http beside bare HTTP (requests written on keep-alive sockets, bench/mcp-driver.ts) and pg-boss batchSize 1; "vs pg-boss" is to this run's pg-boss`,
    );
    const sideRow = (path: string, r: DrainResult) => ({
      path,
      jobs: r.done,
      'jobs/s': Math.round(rate(r)),
      'p50 ms/job': ms(r.p50),
      'p99 ms/job': ms(r.p99),
      'CPU ms/job': cpuFigure(r),
      'vs pg-boss': pctOf(rate(r), rate(bossSide)),
      'vs pgbench': pctOf(rate(r), pg.tps, 1),
    });
    console.table([
      sideRow('Switchboard MCP, SDK Client', sdkSide),
      sideRow('Switchboard MCP, node:http client', httpSide),
      sideRow('Switchboard MCP, bare HTTP', bareSide),
      sideRow('Switchboard MCP, bare HTTP, complete with next', bareNextSide),
      sideRow(`pg-boss ${PGBOSS_VERSION} fetch + complete`, bossSide),
    ]);
    console.table([
      {
        path: 'Switchboard: todo insert + commit -> doorbell at a connected SDK client',
        'p50 ms': ms(percentile(wake, 50)),
        'p99 ms': ms(percentile(wake, 99)),
        'p50 vs one pgbench commit': timesOf(percentile(wake, 50), pg1.latencyMs),
      },
      {
        path: `graphile-worker ${GRAPHILE_VERSION} (defaults): addJob -> task starts`,
        'p50 ms': ms(percentile(graphileWake, 50)),
        'p99 ms': ms(percentile(graphileWake, 99)),
        'p50 vs one pgbench commit': timesOf(percentile(graphileWake, 50), pg1.latencyMs),
      },
    ]);
    console.log(
      `pgbench single-row insert commits: ${Math.round(pg.tps)}/s (${pg.command}); one commit ${pg1.latencyMs.toFixed(3)} ms (${pg1.command}). ` +
        'A Switchboard job is two commits (claim, complete); a pg-boss batch is two (fetch, complete) for its jobs; graphile-worker by default fetches each job and completes it in statements of its own, not waiting for the completion; batched, it fetches a local queue in one statement and completes many jobs in one.',
    );
    console.log(
      `Target: claim throughput over MCP at least that of pg-boss (batchSize 1) on the same cluster: ${mcpMet ? 'met' : 'NOT met'} at ${JOBS} jobs ` +
        `(MCP ${Math.round(rate(bare))}/s, pg-boss ${Math.round(rate(boss))}/s, ${pctOf(rate(bare), rate(boss))}); ` +
        `at ${SDK_JOBS} jobs ${rate(bareSide) >= rate(bossSide) ? 'met' : 'NOT met'} over bare HTTP (${pctOf(rate(bareSide), rate(bossSide))}), ` +
        `${rate(httpSide) >= rate(bossSide) ? 'met' : 'NOT met'} with node:http (${pctOf(rate(httpSide), rate(bossSide))}), ` +
        `${rate(sdkSide) >= rate(bossSide) ? 'met' : 'NOT met'} with the SDK Client (${pctOf(rate(sdkSide), rate(bossSide))}).`,
    );

    const storeMet = rate(store) >= TARGETS.storeToGraphile * rate(graphile);
    const mcpGraphileMet = rate(bare) >= TARGETS.mcpToGraphile * rate(graphile);
    const mcpNextGraphileMet = rate(bareNext) >= TARGETS.mcpToGraphile * rate(graphile);
    const sideMet = rate(bareSide) >= TARGETS.mcpToPgboss * rate(bossSide);
    const yes = (met: boolean) => (met ? 'met' : 'NOT met');
    console.log(
      `Targets (issue 20, stated at 20,000 jobs x 8 workers against graphile-worker's defaults and pg-boss batchSize 1; this run ${JOBS} x ${WORKERS}): ` +
        `store >= ${TARGETS.storeToGraphile}x graphile-worker ${yes(storeMet)} (${(rate(store) / rate(graphile)).toFixed(2)}x; ${(rate(store) / rate(gBest)).toFixed(2)}x its best); ` +
        `MCP >= ${TARGETS.mcpToPgboss}x pg-boss ${yes(mcpMet)} at ${JOBS} (${(rate(bare) / rate(boss)).toFixed(2)}x; ${(rate(bare) / rate(bBest)).toFixed(2)}x its best), ${yes(sideMet)} at ${SDK_JOBS} (${(rate(bareSide) / rate(bossSide)).toFixed(2)}x); ` +
        `MCP >= ${TARGETS.mcpToGraphile}x graphile-worker ${yes(mcpGraphileMet)} (${(rate(bare) / rate(graphile)).toFixed(2)}x) with claim_next + complete, ` +
        `${yes(mcpNextGraphileMet)} (${(rate(bareNext) / rate(graphile)).toFixed(2)}x) with complete {next: true}.`,
    );
    const drained = (prefix: string, r: DrainResult) => ({
      [`${prefix}_jobs_per_second`]: figure(rate(r), 1),
      [`${prefix}_jobs`]: r.done,
      [`${prefix}_p50_ms`]: figure(r.p50),
      [`${prefix}_p99_ms`]: figure(r.p99),
      ...(r.cpu
        ? {
            [`${prefix}_cpu_ms_per_job`]: figure(cpuTotal(r)),
            [`${prefix}_node_cpu_ms_per_job`]: figure(r.cpu.node),
            [`${prefix}_postgres_cpu_ms_per_job`]: figure(r.cpu.pg),
            ...(r.cpu.agents !== undefined ? { [`${prefix}_agents_cpu_ms_per_job`]: figure(r.cpu.agents) } : {}),
          }
        : {}),
    });
    /** A drain's figures without a prefix, for the lists of configurations. */
    const plain = (r: DrainResult) => ({
      jobs: r.done,
      seconds: figure(r.seconds, 3),
      jobs_per_second: figure(rate(r), 1),
      p50_ms: figure(r.p50),
      p99_ms: figure(r.p99),
      cpu_ms_per_job: figure(cpuTotal(r)),
      node_cpu_ms_per_job: r.cpu ? figure(r.cpu.node) : null,
      postgres_cpu_ms_per_job: r.cpu ? figure(r.cpu.pg) : null,
    });
    const ratio = (a: DrainResult, b: DrainResult) => figure(rate(a) / rate(b), 4);
    const cpuRatio = (a: DrainResult, b: DrainResult) => figure(cpuTotal(a) / cpuTotal(b), 4);
    const figures = {
      jobs: JOBS,
      workers: WORKERS,
      sdk_jobs: SDK_JOBS,
      pings: PINGS,
      warmup_jobs: WARMUP_JOBS,
      graphile_worker_version: GRAPHILE_VERSION,
      pgboss_version: PGBOSS_VERSION,
      ...drained('store', store),
      ...drained('mcp', bare),
      ...drained('mcp_next', bareNext),
      ...drained('pgboss', boss),
      ...drained('graphile', graphile),
      pgboss_batch_size: bossRuns[0]!.batch,
      graphile_rounds: GRAPHILE_ROUNDS,
      graphile_configs: graphileRuns.map(({ key, name, tuning, r, all }) => ({
        key,
        name,
        concurrency: tuning.concurrency ?? WORKERS,
        max_pool_size: tuning.maxPoolSize ?? 10,
        local_queue_size: tuning.localQueueSize ?? -1,
        complete_job_batch_delay: tuning.completeJobBatchDelay ?? -1,
        fail_job_batch_delay: tuning.failJobBatchDelay ?? -1,
        ...plain(r),
        rounds_jobs_per_second: all.map((x) => figure(rate(x), 1)),
        rounds_cpu_ms_per_job: all.map((x) => figure(cpuTotal(x))),
      })),
      pgboss_configs: bossRuns.map(({ batch, r }) => ({ batch_size: batch, ...plain(r), p50_ms_per_round: figure(r.p50), p99_ms_per_round: figure(r.p99) })),
      graphile_default_jobs_per_second: figure(rate(graphile), 1),
      graphile_best_jobs_per_second: figure(rate(gBest), 1),
      graphile_best_config: graphileBest.key,
      graphile_best_cpu_ms_per_job: figure(cpuTotal(gBest)),
      graphile_best_ratio_to_default: ratio(gBest, graphile),
      pgboss_best_jobs_per_second: figure(rate(bBest), 1),
      pgboss_best_batch_size: bossBest.batch,
      pgboss_best_cpu_ms_per_job: figure(cpuTotal(bBest)),
      pgboss_best_ratio_to_batch1: ratio(bBest, boss),
      store_ratio_to_graphile: ratio(store, graphile),
      store_ratio_to_graphile_default: ratio(store, graphile),
      store_ratio_to_graphile_best: ratio(store, gBest),
      store_cpu_ratio_to_graphile: cpuRatio(store, graphile),
      store_cpu_ratio_to_graphile_best: cpuRatio(store, gBest),
      mcp_cpu_ratio_to_graphile: cpuRatio(bare, graphile),
      mcp_cpu_ratio_to_graphile_best: cpuRatio(bare, gBest),
      store_ratio_to_pgboss: ratio(store, boss),
      store_ratio_to_pgboss_best: ratio(store, bBest),
      mcp_ratio_to_graphile: ratio(bare, graphile),
      mcp_ratio_to_graphile_default: ratio(bare, graphile),
      mcp_ratio_to_graphile_best: ratio(bare, gBest),
      mcp_ratio_to_pgboss: ratio(bare, boss),
      mcp_ratio_to_pgboss_best: ratio(bare, bBest),
      mcp_ratio_to_store: ratio(bare, store),
      mcp_next_ratio_to_graphile: ratio(bareNext, graphile),
      mcp_next_ratio_to_graphile_default: ratio(bareNext, graphile),
      mcp_next_ratio_to_graphile_best: ratio(bareNext, gBest),
      mcp_next_ratio_to_pgboss: ratio(bareNext, boss),
      mcp_next_ratio_to_pgboss_best: ratio(bareNext, bBest),
      mcp_next_ratio_to_mcp: ratio(bareNext, bare),
      mcp_next_cpu_ratio_to_graphile: cpuRatio(bareNext, graphile),
      mcp_next_cpu_ratio_to_graphile_best: cpuRatio(bareNext, gBest),
      pgboss_ratio_to_graphile: ratio(boss, graphile),
      pgboss_best_ratio_to_graphile_best: ratio(bBest, gBest),
      ...drained('side_mcp', bareSide),
      ...drained('side_sdk', sdkSide),
      ...drained('side_http', httpSide),
      ...drained('side_mcp_next', bareNextSide),
      ...drained('side_pgboss', bossSide),
      side_mcp_ratio_to_pgboss: ratio(bareSide, bossSide),
      side_sdk_ratio_to_pgboss: ratio(sdkSide, bossSide),
      side_http_ratio_to_pgboss: ratio(httpSide, bossSide),
      side_mcp_next_ratio_to_pgboss: ratio(bareNextSide, bossSide),
      wake_p50_ms: figure(percentile(wake, 50)),
      wake_p99_ms: figure(percentile(wake, 99)),
      graphile_add_to_start_p50_ms: figure(percentile(graphileWake, 50)),
      graphile_add_to_start_p99_ms: figure(percentile(graphileWake, 99)),
      pgbench_per_second: figure(pg.tps, 1),
      pgbench_clients: WORKERS,
      pgbench_commit_ms: figure(pg1.latencyMs, 3),
      store_ratio_to_pgbench: figure(rate(store) / pg.tps, 4),
      mcp_ratio_to_pgbench: figure(rate(bare) / pg.tps, 4),
      target_store_to_graphile_met: storeMet,
      target_mcp_to_pgboss_met: mcpMet,
      target_side_mcp_to_pgboss_met: sideMet,
      target_mcp_to_graphile_met: mcpGraphileMet,
      target_mcp_next_to_graphile_met: mcpNextGraphileMet,
    };
    json = () => printJsonLast('peers', pgVersion, figures);
    if (values.record) {
      // After the run's last measurement; the cluster stops after this.
      const stamp = new Date().toISOString().slice(0, 16).replace('T', '-').replace(':', '');
      const file = path.join(BENCH_DIR, 'results', `peers-${stamp}.json`);
      const record = {
        bench: 'peers',
        commit: benchCommit(),
        at: new Date().toISOString(),
        seconds: Math.round((performance.now() - startedAt) / 1000),
        machine: { cores: os.availableParallelism(), memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version, load_before: loadBefore, load_after: os.loadavg().map((x) => Number(x.toFixed(2))) },
        postgres: pgVersion,
        options: { jobs: JOBS, workers: WORKERS, pings: PINGS, sdk_jobs: SDK_JOBS, pgbench_seconds: PGBENCH_SECONDS, pgboss_batches: PGBOSS_BATCHES, graphile_rounds: GRAPHILE_ROUNDS },
        ...figures,
      };
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
      console.log(`written ${path.relative(process.cwd(), file)}`);
    }

    const jobsFigure = (r: DrainResult) => `${Math.round(rate(r))} jobs/s, p99 ${r.p99.toFixed(1)} ms${r.cpu ? `, CPU ${cpuTotal(r).toFixed(2)} ms/job` : ''}`;
    const vs = (r: DrainResult) =>
      `${pctOf(rate(r), pg.tps, 1)} (${pctOf(rate(r), rate(boss))} of pg-boss, ${pctOf(rate(r), rate(graphile))} of graphile-worker, ${pctOf(rate(r), rate(gBest))} of its best)`;
    summarize('peers', pgVersion, [
      { figure: `claim, store in process (${JOBS} jobs, ${WORKERS} workers)`, value: jobsFigure(store), vsPgbench: vs(store) },
      { figure: `claim, MCP over HTTP (${JOBS} jobs, ${WORKERS} workers)`, value: jobsFigure(bare), vsPgbench: vs(bare), target: '>= pg-boss', met: mcpMet },
      {
        figure: `claim, MCP over HTTP, complete with next (${JOBS} jobs, ${WORKERS} workers)`,
        value: jobsFigure(bareNext),
        vsPgbench: vs(bareNext),
        target: `>= ${TARGETS.mcpToGraphile}x graphile-worker`,
        met: mcpNextGraphileMet,
      },
      { figure: `claim, pg-boss ${PGBOSS_VERSION} batchSize ${bossRuns[0]!.batch} (${JOBS} jobs)`, value: jobsFigure(boss), vsPgbench: vs(boss) },
      { figure: `claim, pg-boss ${PGBOSS_VERSION} best, batchSize ${bossBest.batch} (${JOBS} jobs)`, value: jobsFigure(bBest), vsPgbench: vs(bBest) },
      { figure: `claim, graphile-worker ${GRAPHILE_VERSION} defaults (${JOBS} jobs)`, value: jobsFigure(graphile), vsPgbench: vs(graphile) },
      { figure: `claim, graphile-worker ${GRAPHILE_VERSION} best, ${graphileBest.name} (${JOBS} jobs)`, value: jobsFigure(gBest), vsPgbench: vs(gBest) },
      {
        figure: `claim, MCP over HTTP (side run, ${SDK_JOBS} jobs)`,
        value: jobsFigure(bareSide),
        vsPgbench: `${pctOf(rate(bareSide), pg.tps, 1)} (${pctOf(rate(bareSide), rate(bossSide))} of pg-boss at ${SDK_JOBS})`,
        target: '>= pg-boss',
        met: rate(bareSide) >= rate(bossSide),
      },
      {
        figure: `claim, MCP over HTTP, complete with next (side run, ${SDK_JOBS} jobs)`,
        value: jobsFigure(bareNextSide),
        vsPgbench: `${pctOf(rate(bareNextSide), pg.tps, 1)} (${pctOf(rate(bareNextSide), rate(bossSide))} of pg-boss at ${SDK_JOBS})`,
      },
      {
        figure: `claim, MCP node:http client (side run, ${SDK_JOBS} jobs)`,
        value: jobsFigure(httpSide),
        vsPgbench: `${pctOf(rate(httpSide), pg.tps, 1)} (${pctOf(rate(httpSide), rate(bossSide))} of pg-boss at ${SDK_JOBS})`,
      },
      {
        figure: `claim, MCP SDK Client (side run, ${SDK_JOBS} jobs)`,
        value: jobsFigure(sdkSide),
        vsPgbench: `${pctOf(rate(sdkSide), pg.tps, 1)} (${pctOf(rate(sdkSide), rate(bossSide))} of pg-boss at ${SDK_JOBS})`,
        target: '>= pg-boss',
        met: rate(sdkSide) >= rate(bossSide),
      },
      { figure: `claim, pg-boss ${PGBOSS_VERSION} (side run, ${SDK_JOBS} jobs)`, value: jobsFigure(bossSide), vsPgbench: pctOf(rate(bossSide), pg.tps, 1) },
      { figure: 'add-to-wake, Switchboard (insert -> doorbell)', value: `p50 ${percentile(wake, 50).toFixed(1)} ms, p99 ${percentile(wake, 99).toFixed(1)} ms`, vsPgbench: `p50 ${timesOf(percentile(wake, 50), pg1.latencyMs)} one commit` },
      { figure: 'add-to-start, graphile-worker', value: `p50 ${percentile(graphileWake, 50).toFixed(1)} ms, p99 ${percentile(graphileWake, 99).toFixed(1)} ms`, vsPgbench: `p50 ${timesOf(percentile(graphileWake, 50), pg1.latencyMs)} one commit` },
      { figure: 'pgbench single-row insert commits', value: `${Math.round(pg.tps)}/s at ${WORKERS} clients; ${pg1.latencyMs.toFixed(3)} ms each at 1` },
    ]);
  });
  // After the cluster has stopped, so nothing else can follow it on stdout.
  if (values.json) json?.();
}

await main();

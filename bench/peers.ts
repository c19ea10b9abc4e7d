/**
 * Switchboard beside its peers, on one throwaway PostgreSQL in one run (issue 10):
 *  1. claim throughput: the same number of jobs drained by `workers` concurrent workers from
 *     (a) Switchboard's store in process, (b) Switchboard over MCP HTTP (bare HTTP from a
 *     separate process, SDK-free: requests written on keep-alive sockets, bench/mcp-driver.ts),
 *     claim_next then complete, and again with each job's complete {next: true} claiming the
 *     next (one call per job), (c) pg-boss (fetch + complete),
 *     (d) graphile-worker; each first drains WARMUP_JOBS untimed from the same queue;
 *     beside it, a side run on a shallow queue (`--sdk-jobs` each) of the MCP SDK `Client`, a
 *     node:http client, bare HTTP (both loops) and pg-boss: a client's own per-call cost is not the server's,
 *     and pg-boss's fetch slows with the queue's depth;
 *  2. add-to-wake latency: a todo pushed to a connected agent until its doorbell arrives, beside
 *     graphile-worker's add-to-start latency;
 *  3. PostgreSQL's own single-row insert commits (pgbench): the rate at `workers` clients, the
 *     write paths' ceiling, and one client's commit latency, the floor for add-to-wake.
 * The peers live in bench/package.json (`npm --prefix bench ci`), so the main install stays lean.
 *
 *   npm run bench:peers -- [--jobs 20000] [--workers 8] [--pings 200] [--sdk-jobs 1000] [--pgbench-seconds 5] [--json]
 *
 * --json: every figure and ratio as one JSON object on the last line of stdout.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { makeWorkerUtils, run } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { systemClock } from '../src/lib/clock.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { insertEventAndTodo } from '../src/store/todos/index.ts';
import { connectAgent } from '../test/support/agents.ts';
import type { Sql } from '../src/db/connect.ts';
import { graphileDrain, quiet } from './graphile.ts';
import { WARMUP_JOBS, cpuTotal, freshStatistics, runMcpDriver, startBenchApp, storeDrain, type McpDriverMode, type McpDriverLoop, warmedDrain, withLanes, type DrainResult, percentile, figure, pctOf, pgbenchInsertRate, printJsonLast, seedPendingTodos, summarize, timesOf, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '20000' },
    workers: { type: 'string', default: '8' },
    pings: { type: 'string', default: '200' },
    'sdk-jobs': { type: 'string', default: '1000' },
    'pgbench-seconds': { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
  },
});
const JOBS = Number(values.jobs);
const WORKERS = Number(values.workers);
const PINGS = Number(values.pings);
const SDK_JOBS = Number(values['sdk-jobs']);
const PGBENCH_SECONDS = Number(values['pgbench-seconds']);

/**
 * pg-boss's fetch sorts every queued job of the queue (its index is on name and start_after, the
 * order is priority, created_on, id), so its rate depends on the queue's depth: `queue` names a
 * fresh queue per run.
 */
async function pgBossDrain(sql: Sql, url: string, queue: string, jobs: number): Promise<DrainResult> {
  const boss = new PgBoss({ connectionString: url, max: WORKERS + 2, supervise: false, schedule: false, migrate: true });
  boss.on('error', (e) => console.error('pg-boss:', e.message));
  await boss.start();
  await boss.createQueue(queue);
  const seeded = jobs + WARMUP_JOBS;
  for (let i = 0; i < seeded; i += 1000) {
    await boss.insert(Array.from({ length: Math.min(1000, seeded - i) }, (_, k) => ({ name: queue, data: { n: i + k } })));
  }
  await freshStatistics(sql);
  const result = await warmedDrain(WORKERS, async () => {
    const [job] = await boss.fetch(queue, { batchSize: 1 });
    if (!job) return false;
    await boss.complete(queue, job.id);
    return true;
  });
  await boss.stop({ graceful: false, wait: true });
  return result;
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
      if (pushEligible) app.readyRings.ringReady(todo);
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
    const boss = await pgBossDrain(sql, cluster.url, 'bench', JOBS);
    const graphile = await graphileDrain(cluster.url, JOBS, WORKERS);
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
    const ms = (x: number) => Number(x.toFixed(2));
    const cpuFigure = (r: DrainResult) =>
      r.cpu ? `${cpuTotal(r).toFixed(2)} (${r.cpu.node.toFixed(2)} + ${r.cpu.pg.toFixed(2)} PG${r.cpu.agents !== undefined ? ` + ${r.cpu.agents.toFixed(2)} agents` : ''})` : '';
    const row = (path: string, r: DrainResult) => ({
      path,
      jobs: r.done,
      'jobs/s': Math.round(rate(r)),
      'p50 ms/job': ms(r.p50),
      'p99 ms/job': ms(r.p99),
      'vs pg-boss': pctOf(rate(r), rate(boss)),
      'vs graphile-worker': pctOf(rate(r), rate(graphile)),
      'vs pgbench': pctOf(rate(r), pg.tps, 1),
      'CPU ms/job': cpuFigure(r),
    });
    const mcpMet = rate(bare) >= rate(boss);
    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${WORKERS} workers, ${JOBS} jobs per path; every path first drains ${WARMUP_JOBS} jobs untimed from the same queue (the MCP agents run in a process of their own). CPU ms/job: this process (the store, the server or the peer) + PostgreSQL (+ the agents' process), counted during the drain alone`);
    console.table([
      row('Switchboard store, in process', store),
      row('Switchboard MCP over HTTP (bare, SDK-free)', bare),
      row('Switchboard MCP, complete with next (one call per job)', bareNext),
      row('pg-boss 10 fetch + complete', boss),
      row('graphile-worker 0.16', graphile),
    ]);
    console.log(
      `Side run, ${SDK_JOBS} jobs each (a shallow queue): the MCP SDK Client and node:http beside bare HTTP (requests written on keep-alive sockets, bench/mcp-driver.ts) and pg-boss; "vs pg-boss" is to this run's pg-boss`,
    );
    const sideRow = (path: string, r: DrainResult) => ({ ...row(path, r), 'vs pg-boss': pctOf(rate(r), rate(bossSide)), 'vs graphile-worker': '' });
    console.table([
      sideRow('Switchboard MCP, SDK Client', sdkSide),
      sideRow('Switchboard MCP, node:http client', httpSide),
      sideRow('Switchboard MCP, bare HTTP', bareSide),
      sideRow('Switchboard MCP, bare HTTP, complete with next', bareNextSide),
      sideRow('pg-boss 10 fetch + complete', bossSide),
    ]);
    console.table([
      {
        path: 'Switchboard: todo insert + commit -> doorbell at a connected SDK client',
        'p50 ms': ms(percentile(wake, 50)),
        'p99 ms': ms(percentile(wake, 99)),
        'p50 vs one pgbench commit': timesOf(percentile(wake, 50), pg1.latencyMs),
      },
      {
        path: 'graphile-worker: addJob -> task starts',
        'p50 ms': ms(percentile(graphileWake, 50)),
        'p99 ms': ms(percentile(graphileWake, 99)),
        'p50 vs one pgbench commit': timesOf(percentile(graphileWake, 50), pg1.latencyMs),
      },
    ]);
    console.log(
      `pgbench single-row insert commits: ${Math.round(pg.tps)}/s (${pg.command}); one commit ${pg1.latencyMs.toFixed(3)} ms (${pg1.command}). ` +
        'A Switchboard or pg-boss job is two commits (claim, complete); graphile-worker batches its completions.',
    );
    console.log(
      `Target: claim throughput over MCP at least that of pg-boss on the same cluster: ${mcpMet ? 'met' : 'NOT met'} at ${JOBS} jobs ` +
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
      `Targets (issue 20, stated at 20,000 jobs x 8 workers; this run ${JOBS} x ${WORKERS}): ` +
        `store >= ${TARGETS.storeToGraphile}x graphile-worker ${yes(storeMet)} (${(rate(store) / rate(graphile)).toFixed(2)}x); ` +
        `MCP >= ${TARGETS.mcpToPgboss}x pg-boss ${yes(mcpMet)} at ${JOBS} (${(rate(bare) / rate(boss)).toFixed(2)}x), ${yes(sideMet)} at ${SDK_JOBS} (${(rate(bareSide) / rate(bossSide)).toFixed(2)}x); ` +
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
    const ratio = (a: DrainResult, b: DrainResult) => figure(rate(a) / rate(b), 4);
    json = () =>
      printJsonLast('peers', pgVersion, {
        jobs: JOBS,
        workers: WORKERS,
        sdk_jobs: SDK_JOBS,
        pings: PINGS,
        warmup_jobs: WARMUP_JOBS,
        ...drained('store', store),
        ...drained('mcp', bare),
        ...drained('mcp_next', bareNext),
        ...drained('pgboss', boss),
        ...drained('graphile', graphile),
        store_ratio_to_graphile: ratio(store, graphile),
        store_cpu_ratio_to_graphile: figure(cpuTotal(store) / cpuTotal(graphile), 4),
        mcp_cpu_ratio_to_graphile: figure(cpuTotal(bare) / cpuTotal(graphile), 4),
        store_ratio_to_pgboss: ratio(store, boss),
        mcp_ratio_to_graphile: ratio(bare, graphile),
        mcp_ratio_to_pgboss: ratio(bare, boss),
        mcp_ratio_to_store: ratio(bare, store),
        mcp_next_ratio_to_graphile: ratio(bareNext, graphile),
        mcp_next_ratio_to_pgboss: ratio(bareNext, boss),
        mcp_next_ratio_to_mcp: ratio(bareNext, bare),
        mcp_next_cpu_ratio_to_graphile: figure(cpuTotal(bareNext) / cpuTotal(graphile), 4),
        pgboss_ratio_to_graphile: ratio(boss, graphile),
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
      });

    const jobsFigure = (r: DrainResult) => `${Math.round(rate(r))} jobs/s, p99 ${r.p99.toFixed(1)} ms${r.cpu ? `, CPU ${cpuTotal(r).toFixed(2)} ms/job` : ''}`;
    const vs = (r: DrainResult) => `${pctOf(rate(r), pg.tps, 1)} (${pctOf(rate(r), rate(boss))} of pg-boss, ${pctOf(rate(r), rate(graphile))} of graphile-worker)`;
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
      { figure: `claim, pg-boss 10 (${JOBS} jobs)`, value: jobsFigure(boss), vsPgbench: vs(boss) },
      { figure: `claim, graphile-worker 0.16 (${JOBS} jobs)`, value: jobsFigure(graphile), vsPgbench: vs(graphile) },
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
      { figure: `claim, pg-boss 10 (side run, ${SDK_JOBS} jobs)`, value: jobsFigure(bossSide), vsPgbench: pctOf(rate(bossSide), pg.tps, 1) },
      { figure: 'add-to-wake, Switchboard (insert -> doorbell)', value: `p50 ${percentile(wake, 50).toFixed(1)} ms, p99 ${percentile(wake, 99).toFixed(1)} ms`, vsPgbench: `p50 ${timesOf(percentile(wake, 50), pg1.latencyMs)} one commit` },
      { figure: 'add-to-start, graphile-worker', value: `p50 ${percentile(graphileWake, 50).toFixed(1)} ms, p99 ${percentile(graphileWake, 99).toFixed(1)} ms`, vsPgbench: `p50 ${timesOf(percentile(graphileWake, 50), pg1.latencyMs)} one commit` },
      { figure: 'pgbench single-row insert commits', value: `${Math.round(pg.tps)}/s at ${WORKERS} clients; ${pg1.latencyMs.toFixed(3)} ms each at 1` },
    ]);
  });
  // After the cluster has stopped, so nothing else can follow it on stdout.
  if (values.json) json?.();
}

await main();

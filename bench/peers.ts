/**
 * Switchboard beside its peers, on one throwaway PostgreSQL in one run (issue 10):
 *  1. claim throughput: the same number of jobs drained by `workers` concurrent workers from
 *     (a) Switchboard's store in process, (b) Switchboard over MCP HTTP (SDK Clients, and bare
 *     HTTP, in a separate process), (c) pg-boss (fetch + complete), (d) graphile-worker;
 *  2. add-to-wake latency: a todo pushed to a connected agent until its doorbell arrives, beside
 *     graphile-worker's add-to-start latency;
 *  3. PostgreSQL's own single-row insert commit rate (pgbench), the write path's ceiling.
 * The peers live in bench/package.json (`npm --prefix bench ci`), so the main install stays lean.
 *
 *   npm run bench:peers -- [--jobs 20000] [--workers 8] [--pings 200]
 */
import { execFile } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { startApp } from '../src/app.ts';
import { systemClock } from '../src/clock.ts';
import { loadConfig } from '../src/config.ts';
import { startThrowawayCluster } from '../src/db/cluster.ts';
import { connect } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrate.ts';
import { createLogger } from '../src/log.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { claimNextTodo, completeTodo, insertEventAndTodo, type Caller } from '../src/store/todos.ts';
import { connectAgent } from '../test/support/agents.ts';
import { drain, pgbenchInsertRate, type DrainResult, seedPendingTodos } from './lib.ts';

const { values } = parseArgs({
  options: { jobs: { type: 'string', default: '20000' }, workers: { type: 'string', default: '8' }, pings: { type: 'string', default: '200' } },
});
const JOBS = Number(values.jobs);
const WORKERS = Number(values.workers);
const PINGS = Number(values.pings);
const UNLIMITED = { rate: 1e9, burst: 1e9 };
/** graphile-worker logs every job at info; the bench prints its own table. */
const quiet = new Logger(() => () => {});
const DRIVER = fileURLToPath(new URL('./mcp-driver.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}


async function mcpDrive(mode: 'sdk' | 'raw', url: string, credential: string): Promise<DrainResult> {
  const { stdout } = await promisify(execFile)(process.execPath, [TSX, DRIVER, mode, url, credential, String(WORKERS)], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as DrainResult;
}

async function pgBossDrain(url: string): Promise<DrainResult> {
  const boss = new PgBoss({ connectionString: url, max: WORKERS + 2, supervise: false, schedule: false, migrate: true });
  boss.on('error', (e) => console.error('pg-boss:', e.message));
  await boss.start();
  await boss.createQueue('bench');
  for (let i = 0; i < JOBS; i += 1000) {
    await boss.insert(Array.from({ length: Math.min(1000, JOBS - i) }, (_, k) => ({ name: 'bench', data: { n: i + k } })));
  }
  const result = await drain(WORKERS, async () => {
    const [job] = await boss.fetch('bench', { batchSize: 1 });
    if (!job) return false;
    await boss.complete('bench', job.id);
    return true;
  });
  await boss.stop({ graceful: false, wait: true });
  return result;
}

async function graphileDrain(url: string): Promise<DrainResult> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  await utils.migrate();
  const pg = connect(url, { max: 1 });
  await pg.unsafe(`
    select graphile_worker.add_jobs(array(
      select row('bench', json_build_object('n', g), null, null, null, null, null, null)::graphile_worker.job_spec
      from generate_series(1, ${JOBS}) g))`);
  await pg.end();
  // graphile-worker runs its own workers; time each job's task and the whole drain.
  const latencies: number[] = [];
  let done = 0;
  const started = performance.now();
  let finished!: () => void;
  const all = new Promise<void>((r) => (finished = r));
  let last = performance.now();
  const runner = await run({
    connectionString: url,
    concurrency: WORKERS,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: quiet,
    taskList: {
      bench: async () => {
        const now = performance.now();
        latencies.push(now - last);
        last = now;
        if (++done === JOBS) finished();
      },
    },
  });
  await all;
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  await utils.release();
  latencies.sort((a, b) => a - b);
  // Per-job figure: the gap between completions times the concurrency approximates one job's turn.
  const perJob = latencies.map((l) => l * WORKERS).sort((a, b) => a - b);
  return { done, seconds, p50: pct(perJob, 50), p99: pct(perJob, 99) };
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

async function main(): Promise<void> {
  const cluster = await startThrowawayCluster({ prefer: 'system' });
  const sql = connect(cluster.url, { max: 20 });
  try {
    await migrate(sql);
    const pgVersion = (await sql`show server_version`)[0]!.server_version as string;
    const app = await startApp({
      config: loadConfig({ SWITCHBOARD_DATABASE_URL: cluster.url, SWITCHBOARD_LISTEN: '127.0.0.1:0' }),
      clock: systemClock,
      log: createLogger('warn', process.stderr),
      loops: false,
      mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED },
    });
    const human = await addHuman(sql, { handle: 'bench' });
    const endpoint = async (name: string, seed = true) => {
      const v = await vendEndpoint(sql, human.id, { name, queues: ['work'] }, systemClock.now());
      if (seed) await seedPendingTodos(sql, v.endpoint.id, JOBS);
      return v;
    };

    // 2. Add-to-wake: push a todo to a connected agent, time until its doorbell arrives.
    const wakeEp = await endpoint('wake', false);
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
      if (pushEligible) app.doorbell.ringReady(todo);
      while (agent.heard.length === before) await new Promise((r) => setImmediate(r));
      wake.push(performance.now() - t0);
    }
    await agent.client.close();
    wake.sort((a, b) => a - b);
    // 1. Claim throughput.
    const direct = await endpoint('direct');
    const caller: Caller = { endpointId: direct.endpoint.id, owner: `agent:${direct.endpoint.agent_id}`, queues: ['work'] };
    const store = await drain(WORKERS, async () => {
      const t = await claimNextTodo(sql, caller, ['work'], 300, systemClock.now());
      if (!t) return false;
      await completeTodo(sql, caller, t.id, { ok: true }, systemClock.now());
      return true;
    });
    const sdkEp = await endpoint('sdk');
    const sdk = await mcpDrive('sdk', `${app.baseUrl}/mcp/${sdkEp.endpoint.slug}`, sdkEp.credential);
    const rawEp = await endpoint('raw');
    const raw = await mcpDrive('raw', `${app.baseUrl}/mcp/${rawEp.endpoint.slug}`, rawEp.credential);
    const boss = await pgBossDrain(cluster.url);
    const graphile = await graphileDrain(cluster.url);

    const graphileWake = await graphileAddToStart(cluster.url);
    await app.stop();

    // 3. PostgreSQL's own ceiling.
    const pg = await pgbenchInsertRate(cluster, WORKERS, 10);

    const rate = (r: DrainResult) => r.done / r.seconds;
    const row = (path: string, r: DrainResult) => ({
      path,
      jobs: r.done,
      'jobs/s': Math.round(rate(r)),
      'p99 ms/job': Number(r.p99.toFixed(2)),
      'vs pg-boss': `${((rate(r) / rate(boss)) * 100).toFixed(0)}%`,
      'vs graphile-worker': `${((rate(r) / rate(graphile)) * 100).toFixed(0)}%`,
    });
    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${WORKERS} workers, ${JOBS} jobs per path`);
    console.table([
      row('Switchboard store, in process', store),
      row('Switchboard MCP, SDK Clients', sdk),
      row('Switchboard MCP, bare HTTP', raw),
      row('pg-boss 10 fetch + complete', boss),
      row('graphile-worker 0.16', graphile),
    ]);
    console.table([
      { path: 'Switchboard: todo insert + commit -> doorbell at a connected SDK client', 'p50 ms': +pct(wake, 50).toFixed(2), 'p99 ms': +pct(wake, 99).toFixed(2) },
      { path: 'graphile-worker: addJob -> task starts', 'p50 ms': +pct(graphileWake, 50).toFixed(2), 'p99 ms': +pct(graphileWake, 99).toFixed(2) },
    ]);
    console.log(`pgbench single-row insert commits (${pg.command}): ${Math.round(pg.tps)}/s; store claim+complete is ${((rate(store) / pg.tps) * 100).toFixed(1)}% of it`);
    console.log('Target: claim throughput over MCP at least that of pg-boss on the same cluster.');
  } finally {
    await sql.end({ timeout: 5 });
    await cluster.stop();
  }
}

await main();

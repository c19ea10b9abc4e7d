/**
 * Drain throughput: `workers` concurrent agents draining the same number of todos with
 * claim_next + complete, four ways in one run on one PostgreSQL:
 *   - the store called directly inside the server process (the baseline);
 *   - MCP over HTTP from a separate process of SDK Clients (the real agent path);
 *   - MCP over HTTP from a separate process of bare keep-alive node:http clients, and of requests
 *     written on keep-alive sockets by hand (the server's own cost, without the SDK client's;
 *     bench/mcp-driver.ts).
 * Ratios are against the baseline measured in the same run, and against pgbench's single-row
 * insert commits on the same cluster. Not part of `npm run bench` (bench/peers.ts drains the
 * store and MCP beside the peers there); run it alone:
 *
 *   npm run bench:claim -- [--todos 5000] [--workers 8]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { startApp } from '../src/app.ts';
import { SESSION_CACHE_MS } from '../src/services/session-directory.ts';
import { systemClock } from '../src/lib/clock.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/lib/log.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { WARMUP_JOBS, runMcpDriver, storeDrain, withLanes, type DrainResult, pctOf, pgbenchInsertRate, seedPendingTodos, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({ options: { todos: { type: 'string', default: '5000' }, workers: { type: 'string', default: '8' } } });
const TODOS = Number(values.todos);
const WORKERS = Number(values.workers);
const UNLIMITED = { rate: 1e9, burst: 1e9 };

async function main(): Promise<void> {
  await withBenchDatabase(20, async ({ cluster, sql, pgVersion }) => {
    const config = loadConfig({ SWITCHBOARD_DATABASE_URL: cluster.url, SWITCHBOARD_LISTEN: '127.0.0.1:0' });
    const app = await startApp({ config, clock: systemClock, log: createLogger('warn', process.stderr), loops: false, mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED } });
    const human = await addHuman(sql, { handle: 'bench' });
    const endpoint = async (name: string) => {
      const v = await vendEndpoint(sql, human.id, { name, queues: ['work'] }, systemClock.now());
      // Each drain takes WARMUP_JOBS untimed first (bench/lib.ts).
      await seedPendingTodos(sql, v.endpoint.id, TODOS + WARMUP_JOBS);
      return v;
    };

    const direct = await endpoint('direct');
    const storeRun = await withLanes(cluster.url, (lanes) => storeDrain(sql, lanes, direct.endpoint, WORKERS));
    const readsBefore = app.services.directory.reads;
    const sdk = await endpoint('sdk');
    const sdkRun = await runMcpDriver('sdk', `${app.baseUrl}/mcp/${sdk.endpoint.slug}`, sdk.credential, WORKERS);
    const http = await endpoint('http');
    const httpRun = await runMcpDriver('http', `${app.baseUrl}/mcp/${http.endpoint.slug}`, http.credential, WORKERS);
    const wire = await endpoint('wire');
    const wireRun = await runMcpDriver('wire', `${app.baseUrl}/mcp/${wire.endpoint.slug}`, wire.credential, WORKERS);
    const directoryReads = app.services.directory.reads - readsBefore;
    await app.stop();
    const pg = await pgbenchInsertRate(cluster, WORKERS, 5);

    const rate = (r: DrainResult) => r.done / r.seconds;
    const row = (path: string, r: DrainResult) => ({
      path,
      todos: r.done,
      'todos/s': Math.round(rate(r)),
      'p50 ms': Number(r.p50.toFixed(2)),
      'p99 ms': Number(r.p99.toFixed(2)),
      'vs store': `${((rate(r) / rate(storeRun)) * 100).toFixed(1)}%`,
      'vs pgbench': pctOf(rate(r), pg.tps, 1),
      'CPU ms/todo': r.cpu ? `${r.cpu.node.toFixed(2)} + ${r.cpu.pg.toFixed(2)} PG${r.cpu.agents !== undefined ? ` + ${r.cpu.agents.toFixed(2)} agents` : ''}` : '',
    });
    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${WORKERS} workers, ${TODOS} todos per path`);
    console.table([row('store, in process (baseline)', storeRun), row('MCP, SDK Client', sdkRun), row('MCP, bare node:http', httpRun), row('MCP, requests written on sockets', wireRun)]);
    console.log(`pgbench single-row insert commits (${pg.command}): ${Math.round(pg.tps)}/s; a todo here is two commits (claim, complete).`);
    console.log('p50/p99 are per todo (claim_next + complete). Target: MCP at least 50% of the baseline.');
    const toolCalls = 2 * (sdkRun.done + httpRun.done + wireRun.done);
    console.log(
      `Session directory reads during the three MCP drains: ${directoryReads} for about ${toolCalls} tool calls ` +
        `(a session seen in the last ${SESSION_CACHE_MS / 1000} s is served from this instance's copy).`,
    );
  });
}

await main();

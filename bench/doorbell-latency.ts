/**
 * Doorbell latency: `endpoints` SDK Clients (in a separate process, bench/doorbell-driver.ts), one
 * per endpoint, each with its stream open; `todos` todos pushed through the operator HTTP API
 * (POST /api/v1/endpoints/{slug}/todos), round-robin over the endpoints, at a steady target rate
 * (open loop: a slow response does not delay the next push). Per todo, the time from the API's
 * 201 response reaching the pusher to the doorbell reaching its client, matched by meta.todo_id;
 * both sides stamp `performance.timeOrigin + performance.now()` on one machine.
 *
 * The per-token API write limit is left as it is: the pushes are spread over enough personal
 * tokens of one human that each token runs at half its bucket's refill rate.
 *
 * Beside it, pgbench's single-client commit latency on the same cluster: the floor for the API's
 * write (POST → 201 inserts an event and a todo in one transaction).
 *
 *   npm run bench:doorbell -- [--endpoints 100] [--todos 2000] [--rate 100] [--pgbench-seconds 3]
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startApp } from '../src/app.ts';
import { systemClock } from '../src/lib/clock.ts';
import { loadConfig } from '../src/config.ts';
import { API_WRITE_LIMIT } from '../src/api/plugin.ts';
import { createLogger } from '../src/lib/log.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman, createToken } from '../src/store/humans.ts';
import { pgbenchInsertRate, summarize, timesOf, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({
  options: {
    endpoints: { type: 'string', default: '100' },
    todos: { type: 'string', default: '2000' },
    rate: { type: 'string', default: '100' },
    'pgbench-seconds': { type: 'string', default: '3' },
  },
});
const ENDPOINTS = Number(values.endpoints);
const TODOS = Number(values.todos);
const RATE = Number(values.rate);
const PGBENCH_SECONDS = Number(values['pgbench-seconds']);
const UNLIMITED = { rate: 1e9, burst: 1e9 };
/** Each token's share of the push rate stays at half its write bucket's refill rate. */
const TOKENS = Math.max(1, Math.ceil(RATE / (API_WRITE_LIMIT.rate / 2)));
/** After the last push, how long to wait for stragglers before counting a doorbell as lost. */
const GRACE_MS = 5_000;
const DRIVER = fileURLToPath(new URL('./doorbell-driver.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function until(cond: () => boolean, what: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

interface Push {
  sent: number;
  responded: number;
  status: number;
  id?: string;
}

async function main(): Promise<void> {
  await withBenchDatabase(5, async ({ cluster, sql, pgVersion }) => {
    let app: Awaited<ReturnType<typeof startApp>> | undefined;
    let driver: ReturnType<typeof spawn> | undefined;
    try {
      const config = loadConfig({ SWITCHBOARD_DATABASE_URL: cluster.url, SWITCHBOARD_LISTEN: '127.0.0.1:0' });
      app = await startApp({ config, clock: systemClock, log: createLogger('warn', process.stderr), loops: false, mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED } });
      const human = await addHuman(sql, { handle: 'bench' });
      const tokens: string[] = [];
      for (let i = 0; i < TOKENS; i++) tokens.push((await createToken(sql, { handle: 'bench', name: `bench ${i}` })).token);
      const endpoints: Awaited<ReturnType<typeof vendEndpoint>>[] = [];
      for (let i = 0; i < ENDPOINTS; i++) endpoints.push(await vendEndpoint(sql, human.id, { name: `agent-${i}`, queues: ['work'] }, systemClock.now()));

      // The agents: one process, one SDK Client per endpoint.
      driver = spawn(process.execPath, [TSX, DRIVER], { stdio: ['pipe', 'pipe', 'inherit'] });
      const arrivals = new Map<string, number>();
      let duplicates = 0;
      let ready = false;
      const exited = new Promise<number | null>((resolve) => driver!.on('exit', (code) => resolve(code)));
      createInterface({ input: driver.stdout! }).on('line', (line) => {
        const msg = JSON.parse(line) as { ready?: number; todo_id?: string; at?: number };
        if (msg.ready !== undefined) ready = true;
        else if (msg.todo_id) {
          if (arrivals.has(msg.todo_id)) duplicates++;
          else arrivals.set(msg.todo_id, msg.at!);
        }
      });
      driver.stdin!.write(`${JSON.stringify(endpoints.map((e) => ({ url: `${app!.baseUrl}/mcp/${e.endpoint.slug}`, credential: e.credential })))}\n`);
      let driverGone = false;
      void exited.then(() => (driverGone = true));
      await until(() => ready || driverGone, 'the driver to connect its clients', 30_000);
      if (!ready) throw new Error('the driver exited before connecting');
      const streaming = () => app!.services.sessions.all().filter((s) => s.stream !== null).length;
      await until(() => streaming() >= ENDPOINTS, `${ENDPOINTS} open streams`, 15_000);

      // The pushes: todo i goes to endpoint i mod E with token i mod T, at start + i/RATE.
      const pushes: Push[] = new Array(TODOS);
      const inflight: Promise<void>[] = [];
      const push = async (i: number): Promise<void> => {
        const e = endpoints[i % ENDPOINTS]!.endpoint;
        const sent = now();
        const res = await fetch(`${app!.baseUrl}/api/v1/endpoints/${e.slug}/todos`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tokens[i % TOKENS]}`, 'content-type': 'application/json' },
          body: JSON.stringify({ title: `bench todo ${i}` }),
        });
        const responded = now();
        const body = (await res.json()) as { id?: string };
        pushes[i] = { sent, responded, status: res.status, id: res.status === 201 ? body.id : undefined };
      };
      const start = performance.now();
      for (let i = 0; i < TODOS; i++) {
        const due = start + (i * 1000) / RATE;
        const wait = due - performance.now();
        if (wait > 1) await sleep(wait);
        inflight.push(push(i));
      }
      await Promise.all(inflight);
      const pushSeconds = (performance.now() - start) / 1000;
      const created = pushes.filter((p) => p.status === 201 && p.id);
      const failed = TODOS - created.length;
      const statuses = [...new Set(pushes.filter((p) => p.status !== 201).map((p) => p.status))];
      await until(() => created.every((p) => arrivals.has(p.id!)), 'doorbells', GRACE_MS).catch(() => undefined);

      driver.stdin!.end('stop\n');
      await Promise.race([exited, sleep(5_000)]);
      await app.stop();
      app = undefined;
      const pg1 = await pgbenchInsertRate(cluster, 1, PGBENCH_SECONDS);

      const fromResponse: number[] = [];
      const fromSend: number[] = [];
      for (const p of created) {
        const at = arrivals.get(p.id!);
        if (at === undefined) continue;
        fromResponse.push(at - p.responded);
        fromSend.push(at - p.sent);
      }
      fromResponse.sort((a, b) => a - b);
      fromSend.sort((a, b) => a - b);
      const apiRtt = created.map((p) => p.responded - p.sent).sort((a, b) => a - b);
      const ms = (x: number) => Number(x.toFixed(2));
      const row = (what: string, xs: number[]) => ({
        measure: what,
        n: xs.length,
        'p50 ms': ms(percentile(xs, 50)),
        'p95 ms': ms(percentile(xs, 95)),
        'p99 ms': ms(percentile(xs, 99)),
        'max ms': ms(xs.at(-1) ?? NaN),
        'min ms': ms(xs[0] ?? NaN),
      });

      console.log(
        `cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${ENDPOINTS} endpoints with open streams, ` +
          `${TODOS} todos at a target ${RATE} todos/s over ${TOKENS} personal tokens`,
      );
      console.table([
        row('201 response → doorbell at client', fromResponse),
        row('POST sent → doorbell at client', fromSend),
        row('POST sent → 201 response', apiRtt),
      ]);
      console.log(`todos/s achieved: ${(created.length / pushSeconds).toFixed(1)} (${created.length} created in ${pushSeconds.toFixed(2)} s, target ${RATE})`);
      console.log(
        `doorbells: ${fromResponse.length} of ${created.length} todos arrived` +
          (duplicates ? `, ${duplicates} duplicate` : '') +
          (failed ? `; ${failed} pushes failed (HTTP ${statuses.join(', ')})` : ''),
      );
      console.log(`pgbench single-row insert, one client (${pg1.command}): ${pg1.latencyMs.toFixed(3)} ms per commit; POST → 201 p50 is ${timesOf(percentile(apiRtt, 50), pg1.latencyMs)} that.`);
      const met = fromResponse.length === created.length && percentile(fromResponse, 99) < 50;
      console.log(`Target: p99 under 50 ms at ${RATE} todos/s (201 response → doorbell): ${met ? 'met' : 'NOT met'}`);
      summarize('doorbell-latency', pgVersion, [
        {
          figure: `doorbell, 201 → client (${ENDPOINTS} streams, ${TODOS} todos at ${RATE}/s)`,
          value: `p50 ${percentile(fromResponse, 50).toFixed(1)} ms, p99 ${percentile(fromResponse, 99).toFixed(1)} ms, ${fromResponse.length}/${created.length} arrived`,
          target: 'p99 < 50 ms',
          met,
        },
        {
          figure: 'API push, POST → 201 (event + todo insert)',
          value: `p50 ${percentile(apiRtt, 50).toFixed(1)} ms, p99 ${percentile(apiRtt, 99).toFixed(1)} ms`,
          vsPgbench: `p50 ${timesOf(percentile(apiRtt, 50), pg1.latencyMs)} one commit (${pg1.latencyMs.toFixed(3)} ms)`,
        },
      ]);
    } finally {
      if (driver && driver.exitCode === null) driver.kill();
      await app?.stop();
    }
  });
}

await main();

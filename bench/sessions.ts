/**
 * Idle sessions, on one instance and spread over two: 10,000 bare MCP sessions with open streams
 * (opened by a separate process), the server's memory per session, and the doorbell p99 at that
 * load: todos committed through instance A and rung at a steady rate, timed until the frame
 * reaches the client. The sessions belong to 10 endpoints of 1,000 each; the rung endpoint is
 * one of them. Baseline: the same doorbell timing with 10 streams on one instance, in the same run.
 *
 *   node --expose-gc node_modules/tsx/dist/cli.mjs bench/sessions.ts   (npm run bench:sessions)
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startApp, type App } from '../src/app.ts';
import { systemClock } from '../src/lib/clock.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/lib/log.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { insertEventAndTodo } from '../src/store/todos/index.ts';
import { summarize, withBenchDatabase } from './lib.ts';

const DRIVER = fileURLToPath(new URL('./sessions-driver.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));
const UNLIMITED = { rate: 1e9, burst: 1e9 };
const RINGS = 300;
const RATE = 100;
const ENDPOINTS = 10;
const PER_ENDPOINT = 1000;

const pct = (s: number[], p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
const gc = () => (globalThis as { gc?: () => void }).gc?.();
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;

async function main(): Promise<void> {
  await withBenchDatabase(30, async ({ cluster, sql, pgVersion }) => {
    const start = () =>
      startApp({
        config: loadConfig({
          SWITCHBOARD_DATABASE_URL: cluster.url,
          SWITCHBOARD_LISTEN: '127.0.0.1:0',
          SWITCHBOARD_LOG_LEVEL: 'warn',
          SWITCHBOARD_SESSIONS_PER_ENDPOINT: String(PER_ENDPOINT),
        }),
        clock: systemClock,
        log: createLogger('warn', process.stderr),
        loops: false,
        mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED },
      });
    const a = await start();
    const b = await start();
    let agents: ReturnType<typeof spawn> | undefined;
    try {
      const human = await addHuman(sql, { handle: 'bench' });
      const endpoints: Awaited<ReturnType<typeof vendEndpoint>>[] = [];
      for (let i = 0; i < ENDPOINTS; i++) endpoints.push(await vendEndpoint(sql, human.id, { name: `idle-${i}`, queues: ['work'] }, systemClock.now()));
      const rung = endpoints[0]!;
      const url = (app: App, i: number) => `${app.baseUrl}/mcp/${endpoints[i]!.endpoint.slug}`;
      agents = spawn(process.execPath, [TSX, DRIVER], { stdio: ['pipe', 'pipe', 'inherit'] });
      const lines = createInterface({ input: agents.stdout! })[Symbol.asyncIterator]();
      const ask = async (cmd: unknown) => {
        agents!.stdin!.write(`${JSON.stringify(cmd)}\n`);
        return JSON.parse((await lines.next()).value as string);
      };
      const open = (app: App, i: number, n: number) => ask({ open: n, url: url(app, i), credential: endpoints[i]!.credential });
      const close = (app: App, i: number) => ask({ close: url(app, i) });

      const measure = async (label: string) => {
        const sent = new Map<string, number>();
        for (let i = 0; i < RINGS; i++) {
          const t0 = Date.now();
          const { todo, pushEligible } = await insertEventAndTodo(
            sql,
            { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
            { endpointId: rung.endpoint.id, queue: 'work', title: `ring ${i}` },
            systemClock.now(),
          );
          sent.set(todo.id, performance.timeOrigin + performance.now());
          // As TodoService.push on the instance that took the push; the other hears todo_ready.
          if (pushEligible) a.services.readyRings.ringReady(todo);
          const wait = 1000 / RATE - (Date.now() - t0);
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        await new Promise((r) => setTimeout(r, 500));
        const { arrivals } = (await ask({ report: true })) as { arrivals: { todo_id: string; at: number }[] };
        const mine = arrivals.filter((x) => sent.has(x.todo_id));
        const lat = mine.map((x) => x.at - sent.get(x.todo_id)!).sort((x, y) => x - y);
        const twice = mine.length - new Set(mine.map((x) => x.todo_id)).size;
        return { label, received: `${new Set(mine.map((x) => x.todo_id)).size}/${RINGS}`, 'rung twice': twice, 'p50 ms': +pct(lat, 50).toFixed(2), 'p99 ms': +pct(lat, 99).toFixed(2), all: lat.length === RINGS && twice === 0 };
      };
      const settle = async () => {
        await new Promise((r) => setTimeout(r, 1000));
        gc();
      };

      gc();
      const base = rssMiB();
      const rows: Awaited<ReturnType<typeof measure>>[] = [];
      await open(a, 0, 10);
      await settle();
      rows.push(await measure('1 instance, 10 streams (baseline)'));

      const t0 = Date.now();
      await open(a, 0, PER_ENDPOINT - 10);
      for (let i = 1; i < ENDPOINTS; i++) await open(a, i, PER_ENDPOINT);
      const openSeconds = (Date.now() - t0) / 1000;
      await settle();
      const total = ENDPOINTS * PER_ENDPOINT;
      const rss = rssMiB();
      const kib = ((rss - base) * 1024) / total;
      rows.push(await measure(`1 instance, ${total.toLocaleString('en')} streams`));

      // Half the streams move to B: the rung endpoint's and four others'.
      for (let i = 0; i < ENDPOINTS / 2; i++) await close(a, i);
      await open(a, 0, PER_ENDPOINT / 2);
      await open(b, 0, PER_ENDPOINT / 2);
      for (let i = 1; i < ENDPOINTS / 2; i++) await open(b, i, PER_ENDPOINT);
      await settle();
      const split = `A ${countStreams(a)}, B ${countStreams(b)}`;
      rows.push(await measure(`2 instances, ${total.toLocaleString('en')} streams (${split})`));
      agents.stdin!.end();

      console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}; server RSS before any session ${base.toFixed(1)} MiB`);
      console.log(`${total.toLocaleString('en')} sessions opened on one instance in ${openSeconds.toFixed(1)} s (initialize + initialized + GET each, 50 at a time); ${kib.toFixed(1)} KiB RSS per session over the empty server.`);
      console.table(rows.map(({ all: _all, ...r }) => r));
      console.log(`Doorbells rung at ${RATE}/s, timed from the commit until the frame reached the client (another process).`);
      const [one, big, two] = rows as [(typeof rows)[0], (typeof rows)[0], (typeof rows)[0]];
      const met = two['p99 ms'] < 50 && two.all;
      console.log(
        `Target: doorbell p99 under 50 ms at ${total.toLocaleString('en')} streams over two instances: ${met ? 'met' : 'NOT met'} ` +
          `(${two['p99 ms']} ms; one instance ${big['p99 ms']} ms; baseline ${one['p99 ms']} ms, ratio ${(two['p99 ms'] / one['p99 ms']).toFixed(1)}x).`,
      );
      summarize('sessions', pgVersion, [
        { figure: `idle sessions: RSS per session at ${total.toLocaleString('en')} open streams`, value: `${kib.toFixed(1)} KiB`, target: '< 60 KiB', met: kib < 60 },
        ...rows.map((r) => ({ figure: `doorbell, ${r.label} (${RINGS} at ${RATE}/s)`, value: `p50 ${r['p50 ms']} ms, p99 ${r['p99 ms']} ms, ${r.received} arrived, ${r['rung twice']} twice` })),
        { figure: 'doorbell p99 at 10,000 streams over two instances', value: `${two['p99 ms']} ms`, target: 'p99 < 50 ms', met },
      ]);
    } finally {
      agents?.kill();
      await Promise.all([a.stop(), b.stop()]);
    }
  });
}

/** Open streams an instance holds. */
function countStreams(app: App): number {
  return app.services.sessions.all().filter((s) => s.stream !== null).length;
}

await main();

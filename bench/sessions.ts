/**
 * Idle sessions: 1,000 and then 5,000 bare MCP sessions with open streams (opened by a separate
 * process), the server's memory per session, and the doorbell p99 at that load: todos committed
 * and rung at a steady rate, timed until the frame reaches the client. Baseline: the same doorbell
 * timing with 10 sessions, in the same run.
 *
 *   node --expose-gc node_modules/tsx/dist/cli.mjs bench/sessions.ts   (npm run bench:sessions)
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startApp } from '../src/app.ts';
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

const pct = (s: number[], p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
const gc = () => (globalThis as { gc?: () => void }).gc?.();
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;

async function main(): Promise<void> {
  await withBenchDatabase(10, async ({ cluster, sql, pgVersion }) => {
    const app = await startApp({
      config: loadConfig({ SWITCHBOARD_DATABASE_URL: cluster.url, SWITCHBOARD_LISTEN: '127.0.0.1:0', SWITCHBOARD_LOG_LEVEL: 'warn' }),
      clock: systemClock,
      log: createLogger('warn', process.stderr),
      loops: false,
      mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED },
    });
    let agents: ReturnType<typeof spawn> | undefined;
    try {
      const human = await addHuman(sql, { handle: 'bench' });
      const { endpoint, credential } = await vendEndpoint(sql, human.id, { name: 'idle', queues: ['work'] }, systemClock.now());
      agents = spawn(process.execPath, [TSX, DRIVER, `${app.baseUrl}/mcp/${endpoint.slug}`, credential], { stdio: ['pipe', 'pipe', 'inherit'] });
      const lines = createInterface({ input: agents.stdout! })[Symbol.asyncIterator]();
      const ask = async (cmd: unknown) => {
        agents!.stdin!.write(`${JSON.stringify(cmd)}\n`);
        return JSON.parse((await lines.next()).value as string);
      };

      const measure = async (label: string) => {
        const sent = new Map<string, number>();
        for (let i = 0; i < RINGS; i++) {
          const t0 = Date.now();
          const { todo, pushEligible } = await insertEventAndTodo(
            sql,
            { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
            { endpointId: endpoint.id, queue: 'work', title: `ring ${i}` },
            systemClock.now(),
          );
          sent.set(todo.id, performance.timeOrigin + performance.now());
          if (pushEligible) app.readyRings.ringReady(todo);
          const wait = 1000 / RATE - (Date.now() - t0);
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        await new Promise((r) => setTimeout(r, 500));
        const { arrivals } = (await ask({ report: true })) as { arrivals: { todo_id: string; at: number }[] };
        const lat = arrivals.filter((a) => sent.has(a.todo_id)).map((a) => a.at - sent.get(a.todo_id)!).sort((a, b) => a - b);
        return { label, received: `${lat.length}/${RINGS}`, 'p50 ms': +pct(lat, 50).toFixed(2), 'p99 ms': +pct(lat, 99).toFixed(2), all: lat.length === RINGS };
      };

      gc();
      const base = rssMiB();
      const rows: Awaited<ReturnType<typeof measure>>[] = [];
      const memory: { sessions: number; 'server RSS MiB': number; 'KiB per session over baseline': number }[] = [];
      let open = 0;
      for (const target of [10, 1000, 5000]) {
        await ask({ open: target - open });
        open = target;
        await new Promise((r) => setTimeout(r, 500));
        gc();
        const rss = rssMiB();
        memory.push({ sessions: app.sessions.size, 'server RSS MiB': +rss.toFixed(1), 'KiB per session over baseline': +(((rss - base) * 1024) / target).toFixed(1) });
        rows.push(await measure(`${target} open streams`));
      }
      agents.stdin!.end();
      console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}; server RSS before any session ${base.toFixed(1)} MiB`);
      console.table(memory);
      console.table(rows.map(({ all: _all, ...r }) => r));
      console.log(`Doorbells rung at ${RATE}/s, timed from the commit until the frame reached the client (another process).`);
      const at = (n: number) => ({ mem: memory.find((m) => m.sessions === n)!, ring: rows.find((r) => r.label === `${n} open streams`)! });
      const kib = (n: number) => at(n).mem['KiB per session over baseline'];
      const p99 = (n: number) => at(n).ring['p99 ms'];
      const memMet = kib(1000) < 60 && kib(5000) < 60;
      const ringMet = p99(1000) < 50 && at(1000).ring.all;
      console.log(
        `Targets: doorbell p99 under 50 ms at 1,000 open streams: ${ringMet ? 'met' : 'NOT met'} (${p99(1000)} ms); ` +
          `under 60 KiB RSS per idle session: ${memMet ? 'met' : 'NOT met'} (${kib(1000)} KiB at 1,000, ${kib(5000)} KiB at 5,000).`,
      );
      summarize('sessions', pgVersion, [
        ...[1000, 5000].map((n) => ({
          figure: `idle sessions: RSS per session at ${n.toLocaleString('en')} open streams`,
          value: `${kib(n)} KiB (server ${at(n).mem['server RSS MiB']} MiB, ${base.toFixed(1)} MiB empty)`,
          target: '< 60 KiB',
          met: kib(n) < 60,
        })),
        ...[1000, 5000].map((n) => ({
          figure: `doorbell at ${n.toLocaleString('en')} open streams (${RINGS} at ${RATE}/s)`,
          value: `p50 ${at(n).ring['p50 ms']} ms, p99 ${p99(n)} ms, ${at(n).ring.received} arrived`,
          ...(n === 1000 ? { target: 'p99 < 50 ms', met: ringMet } : {}),
        })),
      ]);
    } finally {
      agents?.kill();
      await app.stop();
    }
  });
}

await main();

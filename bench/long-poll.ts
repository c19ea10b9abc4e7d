/**
 * claim_next's long poll against polling: 8 agents (one SDK Client per endpoint, in a process of
 * their own) take todos that arrive one every 500 ms, round robin, for 60 s. Once with
 * claim_next {wait: "30s"}, once calling plain claim_next every 1 s while idle. For each: the
 * wake-up latency (the todo's push began -> claim_next returned it) p50/p99, the tool calls made, and
 * the server process's CPU time over the run (process.cpuUsage: the server runs alone in this
 * process). Then both again with no todos at all for the same time: what waiting costs. Ratios
 * are poll / long poll.
 *
 *   npm run bench:long-poll -- [--seconds 60] [--agents 8] [--interval 500]
 */
import { execFile } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { startApp } from '../src/app.ts';
import { systemClock } from '../src/lib/clock.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/lib/log.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { summarize, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '60' }, agents: { type: 'string', default: '8' }, interval: { type: 'string', default: '500' } } });
const SECONDS = Number(values.seconds);
const AGENTS = Number(values.agents);
const INTERVAL = Number(values.interval);
const UNLIMITED = { rate: 1e9, burst: 1e9 };
const DRIVER = fileURLToPath(new URL('./long-poll-driver.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));

const pct = (s: number[], p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;

interface Run {
  mode: string;
  pushed: number;
  claimed: number;
  calls: number;
  p50: number;
  p99: number;
  max: number;
  cpuMs: number;
}

async function main(): Promise<void> {
  await withBenchDatabase(20, async ({ cluster, sql, pgVersion }) => {
    const app = await startApp({
      config: loadConfig({ SWITCHBOARD_DATABASE_URL: cluster.url, SWITCHBOARD_LISTEN: '127.0.0.1:0', SWITCHBOARD_LOG_LEVEL: 'warn' }),
      clock: systemClock,
      log: createLogger('warn', process.stderr),
      loops: false,
      mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED },
    });
    const human = await addHuman(sql, { handle: 'bench' });
    const run = async (mode: 'long' | 'poll', seconds = SECONDS, interval = INTERVAL): Promise<Run> => {
      const endpoints = [];
      for (let i = 0; i < AGENTS; i++) {
        const v = await vendEndpoint(sql, human.id, { name: `${mode}-${i}`, queues: ['work'] }, systemClock.now());
        endpoints.push({ id: v.endpoint.id, slug: v.endpoint.slug, credential: v.credential });
      }
      const cpu0 = process.cpuUsage();
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [TSX, DRIVER, mode, app.baseUrl, cluster.url, String(seconds), String(interval), JSON.stringify(endpoints)],
        { maxBuffer: 16 << 20 },
      );
      const cpu = process.cpuUsage(cpu0);
      const r = JSON.parse(stdout.trim().split('\n').pop()!) as { pushed: number; claimed: number; calls: number; latencies: number[] };
      const sorted = r.latencies.sort((a, b) => a - b);
      return { mode, pushed: r.pushed, claimed: r.claimed, calls: r.calls, p50: pct(sorted, 50), p99: pct(sorted, 99), max: sorted.at(-1) ?? NaN, cpuMs: (cpu.user + cpu.system) / 1000 };
    };
    // Warm-up, not counted: the server's first sessions, statements and JIT.
    await run('poll', 5);
    await run('long', 5);
    const long = await run('long');
    const poll = await run('poll');
    const idleLong = await run('long', SECONDS, 0);
    const idlePoll = await run('poll', SECONDS, 0);
    await app.stop();

    const row = (label: string, r: Run) => ({
      mode: label,
      'todos pushed': r.pushed,
      claimed: r.claimed,
      'tool calls': r.calls,
      'wake p50 ms': Number(r.p50.toFixed(1)),
      'wake p99 ms': Number(r.p99.toFixed(1)),
      'wake max ms': Number(r.max.toFixed(1)),
      'server CPU ms': Math.round(r.cpuMs),
      'CPU ms per todo': Number((r.cpuMs / Math.max(1, r.claimed)).toFixed(2)),
    });
    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${AGENTS} agents, a todo every ${INTERVAL} ms for ${SECONDS} s`);
    console.table([row('claim_next {wait: "30s"}', long), row('claim_next every 1 s', poll)]);
    const ratio = (a: number, b: number) => `${(a / b).toFixed(1)}x`;
    console.log(`No todos for ${SECONDS} s, ${AGENTS} agents waiting:`);
    console.table([
      { mode: 'claim_next {wait: "30s"}', 'tool calls': idleLong.calls, 'server CPU ms': Math.round(idleLong.cpuMs) },
      { mode: 'claim_next every 1 s', 'tool calls': idlePoll.calls, 'server CPU ms': Math.round(idlePoll.cpuMs) },
    ]);
    console.log(`idle, poll / long poll: server CPU ${ratio(idlePoll.cpuMs, idleLong.cpuMs)}, tool calls ${ratio(idlePoll.calls, idleLong.calls)}.`);
    console.log(
      `poll / long poll: wake p50 ${ratio(poll.p50, long.p50)}, wake p99 ${ratio(poll.p99, long.p99)}, ` +
        `server CPU ${ratio(poll.cpuMs, long.cpuMs)}, tool calls ${ratio(poll.calls, long.calls)}. Target: long-poll wake p99 under 100 ms.`,
    );
    summarize('long-poll', pgVersion, [
      { figure: 'long-poll wake p99', value: `${long.p99.toFixed(1)} ms`, target: '< 100 ms', met: long.p99 < 100 },
      { figure: '1 s polling wake p99', value: `${poll.p99.toFixed(1)} ms` },
      { figure: 'server CPU, poll / long poll', value: ratio(poll.cpuMs, long.cpuMs) },
      { figure: 'server CPU idle, poll / long poll', value: ratio(idlePoll.cpuMs, idleLong.cpuMs) },
    ]);
  });
}

await main();

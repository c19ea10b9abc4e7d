/**
 * What the queue history costs at the surfaces work arrives and leaves by (issue 39: "at most 5 %
 * of push and claim throughput"), beside bench/history.ts, which measures the store's own paths
 * with no HTTP or MCP in front of them. One throwaway PostgreSQL and one server in this process
 * (its loops off); the history's four triggers on and off in alternating pairs, each pair's order
 * turning each round; per slice:
 *  - push: `--pushers` loops POSTing deliveries to 20 generic webhooks (one an endpoint) for
 *    `--push-seconds` (after 500 ms untimed): the ingest route, its event and its todo, as work
 *    arrives (the API's push is limited to 5 a second a token; the webhooks' rate is raised);
 *  - claim + complete over MCP: bench/mcp-driver.ts in its own process, `--workers` sessions
 *    calling claim_next then complete on keep-alive sockets (`wire`), draining `--jobs` todos
 *    (seeded with the triggers off, so the seed counts nothing);
 *  - the same with one session (`--serial-jobs` todos): each call pays the triggers alone.
 * Each figure is the median over rounds of the pair's with/without rate, and the CPU per operation
 * (this process, which hosts the server, PostgreSQL and the agents' process). Each "with" slice is
 * checked to have counted what it ran, each "without" nothing.
 *
 *   npm run bench:history-surface -- [--rounds 5] [--pushers 16] [--push-seconds 3] [--workers 8]
 *     [--jobs 3000] [--serial-jobs 1000] [--json]
 */
import { parseArgs } from 'node:util';
import { systemClock } from '../src/lib/clock.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { foldHistoryDeltasUnscoped } from '../src/store/history/index.ts';
import { addHuman } from '../src/store/humans.ts';
import { createWebhook } from '../src/store/webhooks.ts';
import { counted, setHistory } from './history-triggers.ts';
import { WARMUP_JOBS, benchCommit, figure, printJsonLast, runMcpDriver, seedPendingTodos, startBenchApp, timedLoops, withBenchDatabase, type CpuPerJob } from './lib.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    pushers: { type: 'string', default: '16' },
    'push-seconds': { type: 'string', default: '3' },
    workers: { type: 'string', default: '8' },
    jobs: { type: 'string', default: '3000' },
    'serial-jobs': { type: 'string', default: '1000' },
    json: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(args.rounds);
const PUSHERS = Number(args.pushers);
const PUSH_SECONDS = Number(args['push-seconds']);
const WORKERS = Number(args.workers);
const JOBS = Number(args.jobs);
const SERIAL_JOBS = Number(args['serial-jobs']);
const PUSH_ENDPOINTS = 20;

interface Measured {
  ops: number;
  seconds: number;
  cpu: CpuPerJob;
}
const PATHS = ['push', 'claim', 'serial'] as const;
type Path = (typeof PATHS)[number];
const rateOf = (m: Measured) => m.ops / m.seconds;
const cpuOf = (m: Measured) => m.cpu.node + m.cpu.pg + (m.cpu.agents ?? 0);
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

await withBenchDatabase(3, async ({ cluster, sql, pgVersion }) => {
  const human = await addHuman(sql, { handle: 'bench-surface' });
  const app = await startBenchApp(cluster.url, { SWITCHBOARD_INGEST_RATE: '100000' });
  const pushTargets = await Promise.all(
    Array.from({ length: PUSH_ENDPOINTS }, async (_, i) => {
      const { endpoint } = await vendEndpoint(sql, human.id, { name: `push-${i}`, queues: ['work'] }, systemClock.now());
      const minted = await createWebhook(sql, { endpointId: endpoint.id, source: 'generic', queue: 'work', createdBy: `operator:${human.id}`, ceiling: 10, seal: () => '' }, systemClock.now());
      return `${app.baseUrl}/webhooks/w/${minted.ingestToken}`;
    }),
  );
  const samples: Record<Path, { history: boolean; m: Measured }[]> = { push: [], claim: [], serial: [] };

  // Every delivery's body is new (a body seen before within its window is a repeat, not a todo),
  // across slices too.
  let sent = 0;
  /** `PUSHERS` loops of webhook deliveries for `seconds`, after timedLoops' untimed warm-up. */
  const pushes = (seconds: number): Promise<Measured> =>
    timedLoops(PUSHERS, seconds, async () => {
      const n = sent++;
      const res = await fetch(pushTargets[n % PUSH_ENDPOINTS]!, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title: `push ${n}`, n }) });
      await res.arrayBuffer();
      if (res.status >= 300) throw new Error(`a delivery answered ${res.status}`);
    });

  /** An endpoint seeded with `jobs` todos (and the driver's warm-up), the triggers off for the seed, drained over MCP. */
  const mcpDrain = async (history: boolean, name: string, workers: number, jobs: number): Promise<Measured> => {
    const v = await vendEndpoint(sql, human.id, { name, queues: ['work'] }, systemClock.now());
    await setHistory(sql, false);
    await seedPendingTodos(sql, v.endpoint.id, jobs + WARMUP_JOBS + workers);
    await setHistory(sql, history);
    const r = await runMcpDriver('wire', `${app.baseUrl}/mcp/${v.endpoint.slug}`, v.credential, workers, 'two-calls');
    return { ops: r.done, seconds: r.seconds, cpu: r.cpu! };
  };

  const slice = async (history: boolean, tag: string, pushSeconds: number, jobs: number, serialJobs: number): Promise<Record<Path, Measured>> => {
    await setHistory(sql, history);
    const before = await counted(sql);
    const push = await pushes(pushSeconds);
    const claim = await mcpDrain(history, `claim-${tag}-${history ? 'on' : 'off'}`, WORKERS, jobs);
    const serial = await mcpDrain(history, `serial-${tag}-${history ? 'on' : 'off'}`, 1, serialJobs);
    const after = await counted(sql);
    const wrote = { created: after.created - before.created, claimed: after.claimed - before.claimed, completed: after.completed - before.completed };
    const drained = claim.ops + serial.ops;
    const right = history ? wrote.created >= push.ops && wrote.claimed >= drained && wrote.completed >= drained : wrote.created === 0 && wrote.claimed === 0 && wrote.completed === 0;
    if (!right) throw new Error(`history ${history ? 'on' : 'off'}: counted ${JSON.stringify(wrote)} for ${push.ops} timed pushes and ${drained} timed claims`);
    // Folded between slices, untimed, as the history loop folds each minute: the triggers' table holds a minute's rows.
    await foldHistoryDeltasUnscoped(sql, new Date(Date.now() + 60_000));
    return { push, claim, serial };
  };

  const int = (x: number) => Math.round(x).toLocaleString('en');
  try {
    // An untimed pair first: plans, caches and the JIT.
    for (const history of [true, false]) await slice(history, 'warm', 1, 1000, 200);
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? [true, false] : [false, true];
      for (const history of order) {
        const s = await slice(history, String(round), PUSH_SECONDS, JOBS, SERIAL_JOBS);
        for (const p of PATHS) samples[p].push({ history, m: s[p] });
        console.log(
          `round ${round} ${history ? 'with   ' : 'without'}: ` +
            PATHS.map((p) => `${p} ${int(rateOf(s[p]))}/s (CPU ${cpuOf(s[p]).toFixed(3)} ms)`).join(', '),
        );
      }
    }
  } finally {
    await setHistory(sql, true);
    await app.stop();
  }

  const figures: Record<string, unknown> = { commit: benchCommit(), rounds: ROUNDS, pushers: PUSHERS, push_seconds: PUSH_SECONDS, workers: WORKERS, jobs: JOBS, serial_jobs: SERIAL_JOBS };
  const names: Record<Path, string> = { push: `webhook deliveries, ${PUSHERS} pushers over ${PUSH_ENDPOINTS} endpoints`, claim: `MCP claim_next + complete, ${WORKERS} sessions`, serial: 'MCP claim_next + complete, one session' };
  console.log('\nwith the history / without it, median over the pairs (CPU per operation: server and bench, PostgreSQL, agents):');
  for (const p of PATHS) {
    const on = samples[p].filter((x) => x.history).map((x) => x.m);
    const off = samples[p].filter((x) => !x.history).map((x) => x.m);
    const ratios = on.map((m, i) => rateOf(m) / rateOf(off[i]!));
    const cpuRatios = on.map((m, i) => cpuOf(m) / cpuOf(off[i]!));
    console.log(
      `  ${names[p]}: ${int(median(on.map(rateOf)))}/s against ${int(median(off.map(rateOf)))}/s, ratio ${median(ratios).toFixed(3)} ` +
        `(pairs ${ratios.map((r) => r.toFixed(3)).join(', ')}); CPU ${median(cpuRatios).toFixed(3)}`,
    );
    figures[`${p}_ratio`] = figure(median(ratios), 4);
    figures[`${p}_ratios`] = ratios.map((r) => figure(r, 4));
    figures[`${p}_cpu_ratio`] = figure(median(cpuRatios), 4);
    figures[`${p}_with_per_second`] = figure(median(on.map(rateOf)), 1);
    figures[`${p}_without_per_second`] = figure(median(off.map(rateOf)), 1);
  }
  if (args.json) printJsonLast('history-surface', pgVersion, figures);
});

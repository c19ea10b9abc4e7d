/**
 * Webhook ingestion throughput: `senders` concurrent producers posting signed GitHub `issues`
 * deliveries (each with its own X-GitHub-Delivery, so each makes an event and a todo) to one
 * github webhook for `seconds`, from a separate process over keep-alive node:http. Prints the
 * deliveries/s accepted (202) and p50/p99 latency to the 202. Beside it, in the same process, on
 * the same throwaway PostgreSQL, with the same senders and seconds: the floor, a route that only
 * verifies the HMAC and inserts the raw body (bench/ingest-floor.ts), so the figure is a ratio to
 * what this stack can do at all. The two take turns in `slices` slices each (which goes first
 * alternates), so a neighbour that slows this shared machine for a while slows both alike. Last,
 * the database's own single-row insert commit rate measured with pgbench (the ceiling for one
 * write transaction per delivery).
 *
 * Before the turns, each path is driven for `warmup` seconds that are not timed (a server runs
 * warm; a turn of a second or two would otherwise time the JIT more than the path).
 *
 *   npm run bench:ingest -- [--seconds 20] [--senders 16] [--slices 4] [--warmup 2] [--pgbench-seconds 10] [--json]
 *
 * --json: every figure and ratio as one JSON object on the last line of stdout.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { startApp } from '../src/app.ts';
import { systemClock } from '../src/lib/clock.ts';
import { loadConfig } from '../src/config.ts';
import { githubHeaders, githubIssueOpened } from '../src/domain/ingest/fixtures.testkit.ts';
import { createLogger } from '../src/lib/log.ts';
import { addHuman, createToken } from '../src/store/humans.ts';
import { startIngestFloor } from './ingest-floor.ts';
import { figure, ownCpuMs, pctOf, percentile, pgbenchInsertRate, postgresCpuMs, printJsonLast, summarize, withBenchDatabase } from './lib.ts';

const execFileAsync = promisify(execFile);
const SELF = fileURLToPath(import.meta.url);
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));
const UNLIMITED = { rate: 1e9, burst: 1e9 };

interface SendResult {
  accepted: number;
  refused: number;
  statuses: Record<string, number>;
  seconds: number;
  /** Each accepted delivery's time to its 202, ms, sorted. */
  latencies: number[];
}

// ---------------------------------------------------------------------------------------------
// The senders (a child process, so producing load does not share the server's event loop)

async function drive(url: string, secret: string, senders: number, seconds: number, firstIssue: number): Promise<SendResult> {
  const target = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: senders });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  // Each body its own issue number, across every turn: a body sent twice would be a replay, not a new todo.
  let seq = firstIssue;
  const post = (body: string, headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      const req = request(
        { agent, host: target.hostname, port: target.port, path: target.pathname, method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: senders }, async () => {
      while (performance.now() < deadline) {
        const n = ++seq;
        const body = JSON.stringify({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: n, title: `Bench issue ${n}` } });
        const headers = githubHeaders('issues', body, secret, randomUUID());
        const t0 = performance.now();
        const status = await post(body, headers);
        const ms = performance.now() - t0;
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status === 202) latencies.push(ms);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const accepted = latencies.length;
  const total = Object.values(statuses).reduce((a, b) => a + b, 0);
  return { accepted, refused: total - accepted, statuses, seconds: elapsed, latencies: latencies.map((ms) => Math.round(ms * 100) / 100) };
}

// ---------------------------------------------------------------------------------------------

/** Bodies sent so far by every driver: the next driver numbers its issues after them. */
let issuesSent = 0;

/** Runs the driver process against `url` for `seconds` with `senders`, the secret by environment. */
async function driveFrom(url: string, secret: string, senders: number, seconds: number): Promise<SendResult> {
  const { stdout } = await execFileAsync(
    process.execPath,
    [TSX, SELF, '--driver', url, String(senders), String(seconds), String(issuesSent)],
    // The secret by environment, not argv (which any local user can read in ps).
    { maxBuffer: 64 << 20, env: { ...process.env, SWITCHBOARD_BENCH_SECRET: secret } },
  );
  const sent = JSON.parse(stdout.trim().split('\n').pop()!) as SendResult;
  issuesSent += sent.accepted + sent.refused;
  return sent;
}

/**
 * driveFrom, with the CPU each side spent on it per accepted delivery: this process (the server
 * under test; the other one idles) and every PostgreSQL process. Steadier than the rates on a
 * shared machine, since time spent waiting for the CPU does not count.
 */
async function driveMeasured(url: string, secret: string, senders: number, seconds: number): Promise<Measured> {
  const [own, pg] = [ownCpuMs(), postgresCpuMs()];
  const sent = await driveFrom(url, secret, senders, seconds);
  return { ...sent, serverCpuMs: ownCpuMs() - own, postgresCpuMs: postgresCpuMs() - pg };
}

interface Measured extends SendResult {
  /** CPU ms spent meanwhile by this process and by PostgreSQL, in all. */
  serverCpuMs: number;
  postgresCpuMs: number;
}

/** One path's slices as one result: counts, seconds and CPU summed, latencies merged. */
function merged(slices: Measured[]) {
  const sum = (f: (m: Measured) => number) => slices.reduce((a, m) => a + f(m), 0);
  const accepted = sum((m) => m.accepted);
  const latencies = slices.flatMap((m) => m.latencies).sort((a, b) => a - b);
  const statuses: Record<string, number> = {};
  for (const m of slices) for (const [k, n] of Object.entries(m.statuses)) statuses[k] = (statuses[k] ?? 0) + n;
  const per = (ms: number) => ms / Math.max(1, accepted);
  return {
    accepted,
    refused: sum((m) => m.refused),
    statuses,
    seconds: sum((m) => m.seconds),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    serverCpu: per(sum((m) => m.serverCpuMs)),
    postgresCpu: per(sum((m) => m.postgresCpuMs)),
  };
}

const ORDER = (slices: number) => (slices === 1 ? 'floor first, then Switchboard' : `in ${slices} turns each, alternating which goes first`);

/** The issue 20 target: ingest at least this share of the floor, with p99 under P99_TARGET_MS, at 16 senders. */
const FLOOR_TARGET = 0.5;
const P99_TARGET_MS = 100;
/** The earlier target, kept beside it: at least this share of pgbench's commit rate. */
const PGBENCH_TARGET = 0.4;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '20' },
      senders: { type: 'string', default: '16' },
      slices: { type: 'string', default: '4' },
      warmup: { type: 'string', default: '2' },
      'pgbench-seconds': { type: 'string', default: '10' },
      json: { type: 'boolean', default: false },
    },
  });
  const SECONDS = Number(values.seconds);
  const SENDERS = Number(values.senders);
  const SLICES = Math.max(1, Math.round(Number(values.slices)));
  const WARMUP_SECONDS = Math.max(0, Number(values.warmup));
  const PGBENCH_SECONDS = Number(values['pgbench-seconds']);
  let json: (() => void) | undefined;

  await withBenchDatabase(2, async ({ cluster, sql, pgVersion }) => {
    const config = loadConfig({
      SWITCHBOARD_DATABASE_URL: cluster.url,
      SWITCHBOARD_LISTEN: '127.0.0.1:0',
      SWITCHBOARD_SECRET_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      // One webhook takes every delivery here: lift its ceiling, as UNLIMITED lifts the refusal limit.
      SWITCHBOARD_INGEST_RATE: '100000',
    });
    const app = await startApp({ config, clock: systemClock, log: createLogger('warn', process.stderr), loops: false, ingestLimit: UNLIMITED });
    const floorSecret = randomBytes(32).toString('hex');
    const floor = await startIngestFloor(cluster.url, floorSecret);
    let sent: ReturnType<typeof merged>;
    let floorSent: ReturnType<typeof merged>;
    try {
      // The operator path: a human's token, an endpoint, a github webhook through the API.
      await addHuman(sql, { handle: 'bench' });
      const { token } = await createToken(sql, { handle: 'bench' });
      const call = async (p: string, body: unknown) => {
        const res = await fetch(`${app.url}/api/v1${p}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        if (res.status !== 201) throw new Error(`POST ${p}: ${res.status} ${await res.text()}`);
        return (await res.json()) as Record<string, string>;
      };
      const endpoint = await call('/endpoints', { name: 'triage', queues: ['issues'] });
      const webhook = await call(`/endpoints/${endpoint.slug}/webhooks`, { source_type: 'github', target_queue: 'issues' });

      // Each path's warm-up, not timed: a server runs warm, and a turn of a second or two would
      // otherwise time the JIT compiling Switchboard's longer path more than it times the path.
      let floorWarm = 0;
      let warm = 0;
      if (WARMUP_SECONDS > 0) {
        const w = await driveFrom(floor.url, floorSecret, SENDERS, WARMUP_SECONDS);
        floorWarm = w.accepted;
        warm = (await driveFrom(webhook.ingest_url!, webhook.signing_secret!, SENDERS, WARMUP_SECONDS)).accepted;
      }
      // The same driver, senders and seconds for both, in turns: floor then Switchboard, then the other way round.
      const floorSlices: Measured[] = [];
      const slices: Measured[] = [];
      const turns = [
        async () => floorSlices.push(await driveMeasured(floor.url, floorSecret, SENDERS, SECONDS / SLICES)),
        async () => slices.push(await driveMeasured(webhook.ingest_url!, webhook.signing_secret!, SENDERS, SECONDS / SLICES)),
      ];
      for (let i = 0; i < SLICES; i++) {
        for (const turn of i % 2 === 0 ? turns : [...turns].reverse()) await turn();
      }
      floorSent = merged(floorSlices);
      sent = merged(slices);
      const floorRows = await floor.rows();
      if (floorRows !== floorWarm + floorSent.accepted) {
        throw new Error(`the floor stored ${floorRows} rows for ${floorWarm + floorSent.accepted} accepted deliveries`);
      }
      const [{ todos, events }] = (await sql`
        select (select count(*) from todos)::int as todos, (select count(*) from events where webhook_id is not null)::int as events`) as unknown as [
        { todos: number; events: number },
      ];
      if (todos !== warm + sent.accepted || events !== warm + sent.accepted) {
        throw new Error(`stored ${todos} todos and ${events} events for ${warm + sent.accepted} accepted deliveries`);
      }
    } finally {
      await floor.stop();
      await app.stop();
    }

    const pg = await pgbenchInsertRate(cluster, SENDERS, PGBENCH_SECONDS);
    const rate = sent.accepted / sent.seconds;
    const floorRate = floorSent.accepted / floorSent.seconds;
    const toFloor = rate / floorRate;
    const toPgbench = rate / pg.tps;
    const floorMet = toFloor >= FLOOR_TARGET && sent.p99 < P99_TARGET_MS && SENDERS === 16;
    const pgbenchMet = toPgbench >= PGBENCH_TARGET;
    const row = (path: string, r: typeof sent, perSecond: number) => ({
      path,
      'per second': Math.round(perSecond),
      total: r.accepted,
      'p50 ms': Number(r.p50.toFixed(2)),
      'p99 ms': Number(r.p99.toFixed(2)),
      'not 202': r.refused,
      'vs floor': pctOf(perSecond, floorRate, 1),
      'vs pgbench': pctOf(perSecond, pg.tps, 1),
      'CPU ms/delivery, server / PostgreSQL': `${r.serverCpu.toFixed(3)} / ${r.postgresCpu.toFixed(3)}`,
    });
    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion} (throwaway cluster: fsync off, synchronous_commit off)`);
    console.log(
      `${SENDERS} senders, ${SECONDS} s of signed GitHub issues deliveries to each path, ${ORDER(SLICES)}, after ${WARMUP_SECONDS} s of warm-up each (not timed)`,
    );
    console.table([
      row('floor: fastify, HMAC verify, raw body + delivery id in one insert (1 index)', floorSent, floorRate),
      row('Switchboard POST /webhooks/w/{token} (a new event + todo each)', sent, rate),
      { path: `pgbench: single-row insert commits (${pg.command})`, 'per second': Math.round(pg.tps), 'vs pgbench': '100.0%' },
    ]);
    if (floorSent.refused > 0) console.log(`floor statuses: ${JSON.stringify(floorSent.statuses)}`);
    if (sent.refused > 0) console.log(`Switchboard statuses: ${JSON.stringify(sent.statuses)}`);
    console.log(`Switchboard ingest = ${(toFloor * 100).toFixed(1)} % of the floor; ${(toPgbench * 100).toFixed(1)} % of pgbench's commit rate (the floor: ${pctOf(floorRate, pg.tps, 1)}).`);
    console.log(
      `Target (issue 20): at least ${FLOOR_TARGET * 100} % of the floor with p99 under ${P99_TARGET_MS} ms at 16 senders: ${floorMet ? 'met' : 'NOT met'}` +
        (SENDERS === 16 ? '' : ` (this run used ${SENDERS} senders)`),
    );
    console.log(`Target (earlier): at least ${PGBENCH_TARGET * 100} % of pgbench's commit rate: ${pgbenchMet ? 'met' : 'NOT met'}`);
    summarize('ingest', pgVersion, [
      {
        figure: `webhook ingest, ${SENDERS} senders, signed GitHub deliveries`,
        value: `${Math.round(rate)}/s, p50 ${sent.p50.toFixed(1)} ms, p99 ${sent.p99.toFixed(1)} ms, ${sent.refused} refused; ${pctOf(rate, floorRate, 1)} of the floor`,
        vsPgbench: `${pctOf(rate, pg.tps, 1)} of ${Math.round(pg.tps)}/s`,
        target: `>= ${FLOOR_TARGET * 100}% of the floor, p99 < ${P99_TARGET_MS} ms`,
        met: floorMet,
      },
      {
        figure: `ingest floor (HMAC + one insert), ${SENDERS} senders`,
        value: `${Math.round(floorRate)}/s, p50 ${floorSent.p50.toFixed(1)} ms, p99 ${floorSent.p99.toFixed(1)} ms, ${floorSent.refused} refused`,
        vsPgbench: `${pctOf(floorRate, pg.tps, 1)} of ${Math.round(pg.tps)}/s`,
      },
    ]);
    json = () =>
      printJsonLast('ingest', pgVersion, {
        senders: SENDERS,
        seconds: SECONDS,
        slices: SLICES,
        order: ORDER(SLICES),
        warmup_seconds: WARMUP_SECONDS,
        per_second: figure(rate, 1),
        total: sent.accepted,
        refused: sent.refused,
        p50_ms: figure(sent.p50),
        p99_ms: figure(sent.p99),
        floor_per_second: figure(floorRate, 1),
        floor_total: floorSent.accepted,
        floor_refused: floorSent.refused,
        floor_p50_ms: figure(floorSent.p50),
        floor_p99_ms: figure(floorSent.p99),
        ratio_to_floor: figure(toFloor, 4),
        server_cpu_ms_per_delivery: figure(sent.serverCpu, 3),
        postgres_cpu_ms_per_delivery: figure(sent.postgresCpu, 3),
        floor_server_cpu_ms_per_delivery: figure(floorSent.serverCpu, 3),
        floor_postgres_cpu_ms_per_delivery: figure(floorSent.postgresCpu, 3),
        pgbench_per_second: figure(pg.tps, 1),
        pgbench_clients: SENDERS,
        pgbench_seconds: PGBENCH_SECONDS,
        ratio_to_pgbench: figure(toPgbench, 4),
        floor_ratio_to_pgbench: figure(floorRate / pg.tps, 4),
        target_ratio_to_floor: FLOOR_TARGET,
        target_p99_ms: P99_TARGET_MS,
        target_met: floorMet,
        target_pgbench_ratio: PGBENCH_TARGET,
        target_pgbench_met: pgbenchMet,
      });
  });
  // After the cluster has stopped, so nothing else can follow it on stdout.
  if (values.json) json?.();
}

if (process.argv[2] === '--driver') {
  const [, , , url, senders, seconds, firstIssue] = process.argv;
  console.log(JSON.stringify(await drive(url!, process.env['SWITCHBOARD_BENCH_SECRET']!, Number(senders), Number(seconds), Number(firstIssue))));
} else {
  await main();
}

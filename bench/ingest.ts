/**
 * Webhook ingestion throughput: `senders` concurrent producers posting signed GitHub `issues`
 * deliveries (each with its own X-GitHub-Delivery, so each makes an event and a todo) to one
 * github webhook for `seconds`, from a separate process over keep-alive node:http. Prints the
 * deliveries/s accepted (202) and p50/p99 latency to the 202, then, on the same throwaway
 * PostgreSQL, the database's own single-row insert commit rate measured with pgbench (the
 * ceiling for one write transaction per delivery), and the ratio.
 *
 *   npm run bench:ingest -- [--seconds 20] [--senders 16] [--pgbench-seconds 10]
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
import { pctOf, pgbenchInsertRate, summarize, withBenchDatabase } from './lib.ts';

const execFileAsync = promisify(execFile);
const SELF = fileURLToPath(import.meta.url);
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));
const UNLIMITED = { rate: 1e9, burst: 1e9 };

interface SendResult {
  accepted: number;
  refused: number;
  statuses: Record<string, number>;
  seconds: number;
  p50: number;
  p99: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

// ---------------------------------------------------------------------------------------------
// The senders (a child process, so producing load does not share the server's event loop)

async function drive(url: string, secret: string, senders: number, seconds: number): Promise<SendResult> {
  const target = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: senders });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let seq = 0;
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
  return { accepted, refused: total - accepted, statuses, seconds: elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '20' },
      senders: { type: 'string', default: '16' },
      'pgbench-seconds': { type: 'string', default: '10' },
    },
  });
  const SECONDS = Number(values.seconds);
  const SENDERS = Number(values.senders);
  const PGBENCH_SECONDS = Number(values['pgbench-seconds']);

  await withBenchDatabase(2, async ({ cluster, sql, pgVersion }) => {
    const config = loadConfig({
      SWITCHBOARD_DATABASE_URL: cluster.url,
      SWITCHBOARD_LISTEN: '127.0.0.1:0',
      SWITCHBOARD_SECRET_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      // One webhook takes every delivery here: lift its ceiling, as UNLIMITED lifts the refusal limit.
      SWITCHBOARD_INGEST_RATE: '100000',
    });
    const app = await startApp({ config, clock: systemClock, log: createLogger('warn', process.stderr), loops: false, ingestLimit: UNLIMITED });
    let sent: SendResult;
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

      const { stdout } = await execFileAsync(
        process.execPath,
        [TSX, SELF, '--driver', webhook.ingest_url!, String(SENDERS), String(SECONDS)],
        // The secret by environment, not argv (which any local user can read in ps).
        { maxBuffer: 1 << 20, env: { ...process.env, SWITCHBOARD_BENCH_SECRET: webhook.signing_secret! } },
      );
      sent = JSON.parse(stdout.trim().split('\n').pop()!) as SendResult;
      const [{ todos, events }] = (await sql`
        select (select count(*) from todos)::int as todos, (select count(*) from events where webhook_id is not null)::int as events`) as unknown as [
        { todos: number; events: number },
      ];
      if (todos !== sent.accepted || events !== sent.accepted) {
        throw new Error(`stored ${todos} todos and ${events} events for ${sent.accepted} accepted deliveries`);
      }
    } finally {
      await app.stop();
    }

    const pg = await pgbenchInsertRate(cluster, SENDERS, PGBENCH_SECONDS);
    const rate = sent.accepted / sent.seconds;
    const ratio = rate / pg.tps;
    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion} (throwaway cluster: fsync off, synchronous_commit off)`);
    console.log(`${SENDERS} senders, ${SECONDS} s of signed GitHub issues deliveries, each a new event + todo`);
    console.table([
      {
        path: 'POST /webhooks/w/{token} (HMAC verify, event + todo in one transaction)',
        'per second': Math.round(rate),
        total: sent.accepted,
        'p50 ms': Number(sent.p50.toFixed(2)),
        'p99 ms': Number(sent.p99.toFixed(2)),
        'not 202': sent.refused,
      },
      { path: `pgbench: single-row insert commits (${pg.command})`, 'per second': Math.round(pg.tps) },
    ]);
    if (sent.refused > 0) console.log(`statuses: ${JSON.stringify(sent.statuses)}`);
    console.log(`Ingest: ${(ratio * 100).toFixed(1)}% of pgbench's commit rate.`);
    console.log(`Target: at least 40% of pgbench's commit rate: ${ratio >= 0.4 ? 'met' : 'NOT met'}`);
    summarize('ingest', pgVersion, [
      {
        figure: `webhook ingest, ${SENDERS} senders, signed GitHub deliveries`,
        value: `${Math.round(rate)}/s, p50 ${sent.p50.toFixed(1)} ms, p99 ${sent.p99.toFixed(1)} ms, ${sent.refused} refused`,
        vsPgbench: `${pctOf(rate, pg.tps, 1)} of ${Math.round(pg.tps)}/s`,
        target: '>= 40% of pgbench',
        met: ratio >= 0.4,
      },
    ]);
  });
}

if (process.argv[2] === '--driver') {
  const [, , , url, senders, seconds] = process.argv;
  console.log(JSON.stringify(await drive(url!, process.env['SWITCHBOARD_BENCH_SECRET']!, Number(senders), Number(seconds))));
} else {
  await main();
}

/**
 * The load generator of bench/instances.ts and bench/storm.ts, in a process of its own: `senders`
 * concurrent producers posting signed GitHub `issues` deliveries (each its own issue number and
 * X-GitHub-Delivery, so each is a new event and todo) over keep-alive node:http, each delivery to
 * the next of `targets` in turn (one webhook, or a thousand spread evenly).
 *
 * Its job comes as one JSON line on stdin (the signing secrets stay out of argv, which any local
 * user can read): SenderJob. It sends for `warmupSeconds` untimed, prints SENDER_WARM, waits for a
 * line on stdin, then sends for `seconds` and prints one JSON SenderResult: counts by status, every
 * accepted delivery's time to its 202 (sorted), accepted deliveries per `bucketSeconds` of the
 * run, and its own CPU. It then waits for stdin to close, so the bench can read its /proc entry.
 *
 *   node --import tsx bench/webhook-sender.ts    (driven by sendFrom in bench/cluster-bench.ts)
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { githubHeaders, githubIssueOpened } from '../src/domain/ingest/fixtures.testkit.ts';

export interface SenderJob {
  targets: { url: string; secret: string }[];
  senders: number;
  seconds: number;
  warmupSeconds: number;
  /** Issue numbers start after this (a body sent twice would be a replay, not a new todo). */
  firstIssue: number;
  bucketSeconds: number;
}

export interface SenderResult {
  accepted: number;
  refused: number;
  /** Answers by HTTP status; 'error' for a request that failed without one. */
  statuses: Record<string, number>;
  seconds: number;
  /** Each accepted delivery's time to its 202, ms, sorted. */
  latencies: number[];
  /** Accepted deliveries that finished in each bucketSeconds of the run, in order. */
  buckets: number[];
  /** Deliveries the warm-up had accepted (not timed), for the bench's count of stored todos. */
  warmAccepted: number;
  /** Deliveries sent (timed and warm-up): the next job numbers its issues after them. */
  sent: number;
  /** This process's CPU (user + system) during the timed run, ms. */
  cpuMs: number;
}

export const SENDER_WARM = 'warm';

async function run(job: SenderJob, lines: AsyncIterator<string>): Promise<SenderResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.senders });
  const targets = job.targets.map((t) => ({ ...t, parsed: new URL(t.url) }));
  let seq = job.firstIssue;
  let turn = 0;
  const post = (target: (typeof targets)[number], body: string, headers: Record<string, string>) =>
    new Promise<number>((resolve) => {
      const req = request(
        { agent, host: target.parsed.hostname, port: target.parsed.port, path: target.parsed.pathname, method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', () => resolve(-1));
        },
      );
      req.on('error', () => resolve(-1));
      req.end(body);
    });

  const send = async (seconds: number, record: (status: number, ms: number, at: number) => void) => {
    const started = performance.now();
    const deadline = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: job.senders }, async () => {
        while (performance.now() < deadline) {
          const target = targets[turn++ % targets.length]!;
          const n = ++seq;
          const body = JSON.stringify({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: n, title: `Bench issue ${n}` } });
          const headers = githubHeaders('issues', body, target.secret, randomUUID());
          const t0 = performance.now();
          const status = await post(target, body, headers);
          const t1 = performance.now();
          record(status, t1 - t0, t1 - started);
        }
      }),
    );
    return (performance.now() - started) / 1000;
  };

  let warmAccepted = 0;
  if (job.warmupSeconds > 0) await send(job.warmupSeconds, (status) => void (status === 202 && warmAccepted++));
  process.stdout.write(`${SENDER_WARM}\n`);
  await lines.next();

  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const buckets: number[] = [];
  const cpu0 = process.cpuUsage();
  const seconds = await send(job.seconds, (status, ms, at) => {
    const key = status < 0 ? 'error' : String(status);
    statuses[key] = (statuses[key] ?? 0) + 1;
    if (status !== 202) return;
    latencies.push(Math.round(ms * 100) / 100);
    // An answer that lands after the deadline (a request sent just before it) counts in the last bucket.
    const b = Math.min(Math.floor(at / 1000 / job.bucketSeconds), Math.ceil(job.seconds / job.bucketSeconds) - 1);
    while (buckets.length <= b) buckets.push(0);
    buckets[b]!++;
  });
  const used = process.cpuUsage(cpu0);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const total = Object.values(statuses).reduce((a, b) => a + b, 0);
  return {
    accepted: latencies.length,
    refused: total - latencies.length,
    statuses,
    seconds,
    latencies,
    buckets,
    warmAccepted,
    sent: seq - job.firstIssue,
    cpuMs: (used.user + used.system) / 1000,
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const first = await lines.next();
  const result = await run(JSON.parse(first.value as string) as SenderJob, lines);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  // Held until the bench has read this process's CPU and closes stdin.
  while (!(await lines.next()).done);
  process.exit(0);
}

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
 * Routing rules (issue 37): a third path in the same turns, the same deliveries to a second webhook
 * of the same endpoint carrying 8 rules (the four presets of docs/presets/ and four more, none of
 * which matches an issue being opened, so every delivery evaluates all 8 and then takes the default
 * action, a todo like the plain path's): its rate as a share of the plain path's (the issue asks
 * for at least 85 %). Beside it, the routing decision alone in this process (envelope + 8 rules),
 * and the dry run a rules write answers: PUT /rules on a webhook holding 50 stored events, the
 * median of several (the issue asks for under 1 s).
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
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { startApp } from '../src/app.ts';
import { systemClock } from '../src/lib/clock.ts';
import { loadConfig } from '../src/config.ts';
import { githubHeaders, githubIssueOpened } from '../src/domain/ingest/fixtures.testkit.ts';
import { buildEnvelope } from '../src/domain/routing/envelope.ts';
import { compileRouting } from '../src/domain/routing/route.ts';
import type { RoutingRule } from '../src/domain/routing/rules.ts';
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
/** Issue 37: a webhook with 8 rules ingests at least this share of the plain path's rate. */
const RULES_TARGET = 0.85;
/** Issue 37: a rules write's dry run over 50 stored events answers within this. */
const DRY_RUN_TARGET_MS = 1000;
const DRY_RUN_EVENTS = 50;
const DRY_RUN_REPEATS = 7;

/**
 * The 8 rules: the four presets as documented (docs/presets/), then four that read the payload, the
 * sender and the repository; an issue being opened (the deliveries here) matches none, so each
 * delivery evaluates all 8 and takes the default action (null: the webhook's target queue).
 */
function eightRules(): { rules: RoutingRule[]; params: Record<string, unknown>; default_action: null } {
  const presets = ['drop-ci-noise', 'review-requested', 'mentions', 'issues-labelled-or-assigned'].map(
    (name) => JSON.parse(readFileSync(new URL(`../docs/presets/${name}.json`, import.meta.url), 'utf8')) as { rules: RoutingRule[]; params: Record<string, unknown> },
  );
  const more: RoutingRule[] = [
    { name: 'security reports', when: 'event == "issues" && has(payload.issue.title) && payload.issue.title.contains("CVE-")', action: { queue: 'inbox' } },
    { name: 'published releases', when: 'event == "release" && action == "published"', action: { queue: 'inbox' } },
    { name: 'bots', when: 'sender != null && sender.endsWith("[bot]")', action: { drop: true } },
    { name: 'other repositories', when: 'repository != null && repository.startsWith("archive/")', action: { drop: true } },
  ];
  return { rules: [...presets.flatMap((p) => p.rules), ...more], params: Object.assign({}, ...presets.map((p) => p.params)), default_action: null };
}

/** The routing decision alone (envelope + every rule), per delivery, in µs: the median of 5 rounds. */
function decideMicros(config: ReturnType<typeof eightRules>): number {
  const router = compileRouting({ rules: config.rules, params: config.params, defaultAction: config.default_action });
  const payload = JSON.parse(JSON.stringify({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: 1, title: 'Bench issue 1' } })) as unknown;
  const facts = { source: 'github', event: 'issues', deliveryId: randomUUID(), trustMode: 'signed', verified: true, headers: githubHeaders('issues', '', 'x'), payload };
  const N = 20_000;
  const rounds: number[] = [];
  for (let r = 0; r < 6; r++) {
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const d = router.decide(buildEnvelope(facts, config.params));
      if (d.fault || d.trace.stage !== 'default') throw new Error(`the 8 rules must all miss an opened issue: ${JSON.stringify(d.trace)}`);
    }
    if (r > 0) rounds.push(((performance.now() - t0) * 1000) / N); // round 0 warms up
  }
  return percentile(rounds.sort((a, b) => a - b), 50);
}

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
    let rulesSent: ReturnType<typeof merged>;
    let dryRun: { ms: number[]; median: number; events: number };
    let dryRunLarge: { median: number; events: number };
    const rules = eightRules();
    const decideUs = decideMicros(rules);
    try {
      // The operator path: a human's token, an endpoint, a github webhook through the API.
      await addHuman(sql, { handle: 'bench' });
      const { token } = await createToken(sql, { handle: 'bench' });
      const call = async (p: string, body: unknown, method = 'POST', status = 201) => {
        const res = await fetch(`${app.url}/api/v1${p}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        if (res.status !== status) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
        return (await res.json()) as Record<string, string>;
      };
      // The presets' queues too (reviews, inbox), so the rules webhook's write is in scope.
      const endpoint = await call('/endpoints', { name: 'triage', queues: ['issues', 'reviews', 'inbox'] });
      const webhook = await call(`/endpoints/${endpoint.slug}/webhooks`, { source_type: 'github', target_queue: 'issues' });
      // The same endpoint, queue and deliveries, through 8 rules that all miss.
      const ruled = await call(`/endpoints/${endpoint.slug}/webhooks`, { source_type: 'github', target_queue: 'issues' });
      const rulesPath = (w: Record<string, string>) => `/endpoints/${endpoint.slug}/webhooks/${w.webhook_id}/rules`;
      await call(rulesPath(ruled), rules, 'PUT', 200);

      // Each path's warm-up, not timed: a server runs warm, and a turn of a second or two would
      // otherwise time the JIT compiling Switchboard's longer path more than it times the path.
      let floorWarm = 0;
      let warm = 0;
      let rulesWarm = 0;
      if (WARMUP_SECONDS > 0) {
        const w = await driveFrom(floor.url, floorSecret, SENDERS, WARMUP_SECONDS);
        floorWarm = w.accepted;
        warm = (await driveFrom(webhook.ingest_url!, webhook.signing_secret!, SENDERS, WARMUP_SECONDS)).accepted;
        rulesWarm = (await driveFrom(ruled.ingest_url!, ruled.signing_secret!, SENDERS, WARMUP_SECONDS)).accepted;
      }
      // The same driver, senders and seconds for each, in turns: floor, Switchboard, Switchboard with
      // rules, then the other way round (so each pair swaps which goes first from one slice to the next).
      const floorSlices: Measured[] = [];
      const slices: Measured[] = [];
      const rulesSlices: Measured[] = [];
      const turns = [
        async () => floorSlices.push(await driveMeasured(floor.url, floorSecret, SENDERS, SECONDS / SLICES)),
        async () => slices.push(await driveMeasured(webhook.ingest_url!, webhook.signing_secret!, SENDERS, SECONDS / SLICES)),
        async () => rulesSlices.push(await driveMeasured(ruled.ingest_url!, ruled.signing_secret!, SENDERS, SECONDS / SLICES)),
      ];
      for (let i = 0; i < SLICES; i++) {
        for (const turn of i % 2 === 0 ? turns : [...turns].reverse()) await turn();
      }
      floorSent = merged(floorSlices);
      sent = merged(slices);
      rulesSent = merged(rulesSlices);
      const floorRows = await floor.rows();
      if (floorRows !== floorWarm + floorSent.accepted) {
        throw new Error(`the floor stored ${floorRows} rows for ${floorWarm + floorSent.accepted} accepted deliveries`);
      }
      const [{ todos, events }] = (await sql`
        select (select count(*) from todos)::int as todos, (select count(*) from events where webhook_id is not null)::int as events`) as unknown as [
        { todos: number; events: number },
      ];
      const accepted = warm + sent.accepted + rulesWarm + rulesSent.accepted;
      if (todos !== accepted || events !== accepted) {
        throw new Error(`stored ${todos} todos and ${events} events for ${accepted} accepted deliveries`);
      }
      // Every delivery to the rules webhook went through all 8 rules to the default.
      const [{ defaulted }] = (await sql`
        select count(*)::int as defaulted from events
        where webhook_id = ${ruled.webhook_id!} and disposition = 'routed' and routing->>'stage' = 'default'`) as unknown as [{ defaulted: number }];
      if (defaulted !== rulesWarm + rulesSent.accepted) {
        throw new Error(`${defaulted} of ${rulesWarm + rulesSent.accepted} deliveries to the rules webhook were routed by the default`);
      }

      // The dry run a rules write answers: a webhook with exactly 50 stored events, the same rules
      // written again and again (each a save and a replay of the 50), timed at the client.
      const timedPut = async (w: Record<string, string>) => {
        const t0 = performance.now();
        const answer = await call(rulesPath(w), rules, 'PUT', 200);
        const ms = performance.now() - t0;
        return { ms, rows: (answer as unknown as { dry_run: unknown[] }).dry_run.length };
      };
      const fifty = await call(`/endpoints/${endpoint.slug}/webhooks`, { source_type: 'github', target_queue: 'issues' });
      for (let i = 0; i < DRY_RUN_EVENTS; i++) {
        const n = ++issuesSent;
        const body = JSON.stringify({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: n, title: `Bench issue ${n}` } });
        const res = await fetch(fifty.ingest_url!, { method: 'POST', headers: githubHeaders('issues', body, fifty.signing_secret!), body });
        if (res.status !== 202) throw new Error(`dry-run seed delivery: ${res.status} ${await res.text()}`);
      }
      // Taking turns with the same write on the rules webhook, which holds every delivery of the run
      // (its replay still reads only its latest 50): how much the table's size adds.
      const ms: number[] = [];
      const large: number[] = [];
      for (let i = 0; i < DRY_RUN_REPEATS; i++) {
        const r = await timedPut(fifty);
        if (r.rows !== DRY_RUN_EVENTS) throw new Error(`the dry run replayed ${r.rows} events, not ${DRY_RUN_EVENTS}`);
        ms.push(r.ms);
        large.push((await timedPut(ruled)).ms);
      }
      dryRun = { ms: ms.map((x) => Number(x.toFixed(1))), median: percentile([...ms].sort((a, b) => a - b), 50), events: DRY_RUN_EVENTS };
      dryRunLarge = { median: percentile(large.sort((a, b) => a - b), 50), events: rulesWarm + rulesSent.accepted };
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
    const rulesRate = rulesSent.accepted / rulesSent.seconds;
    const rulesToPlain = rulesRate / rate;
    const rulesMet = rulesToPlain >= RULES_TARGET;
    const dryRunMet = dryRun.median < DRY_RUN_TARGET_MS;
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
      row(`the same, through ${rules.rules.length} routing rules that all miss (then the default: a todo)`, rulesSent, rulesRate),
      { path: `pgbench: single-row insert commits (${pg.command})`, 'per second': Math.round(pg.tps), 'vs pgbench': '100.0%' },
    ]);
    if (floorSent.refused > 0) console.log(`floor statuses: ${JSON.stringify(floorSent.statuses)}`);
    if (sent.refused > 0) console.log(`Switchboard statuses: ${JSON.stringify(sent.statuses)}`);
    if (rulesSent.refused > 0) console.log(`Switchboard with rules statuses: ${JSON.stringify(rulesSent.statuses)}`);
    console.log(`Switchboard ingest = ${(toFloor * 100).toFixed(1)} % of the floor; ${(toPgbench * 100).toFixed(1)} % of pgbench's commit rate (the floor: ${pctOf(floorRate, pg.tps, 1)}).`);
    console.log(
      `Target (issue 20): at least ${FLOOR_TARGET * 100} % of the floor with p99 under ${P99_TARGET_MS} ms at 16 senders: ${floorMet ? 'met' : 'NOT met'}` +
        (SENDERS === 16 ? '' : ` (this run used ${SENDERS} senders)`),
    );
    console.log(`Target (earlier): at least ${PGBENCH_TARGET * 100} % of pgbench's commit rate: ${pgbenchMet ? 'met' : 'NOT met'}`);
    console.log(
      `Routing rules: ${rules.rules.length} rules = ${(rulesToPlain * 100).toFixed(1)} % of the plain rate (${Math.round(rulesRate)}/s against ${Math.round(rate)}/s), ` +
        `CPU per delivery ${rulesSent.serverCpu.toFixed(3)} ms against ${sent.serverCpu.toFixed(3)} ms in the server; the decision alone (envelope + ${rules.rules.length} rules) ${decideUs.toFixed(1)} µs.`,
    );
    console.log(`Target (issue 37): with ${rules.rules.length} rules at least ${RULES_TARGET * 100} % of the plain rate: ${rulesMet ? 'met' : 'NOT met'}`);
    console.log(
      `Dry run (PUT /rules, a save and a replay of ${dryRun.events} stored events): median ${dryRun.median.toFixed(1)} ms of ${DRY_RUN_REPEATS} (${dryRun.ms.join(', ')} ms); ` +
        `on the rules webhook with ${dryRunLarge.events} stored events: median ${dryRunLarge.median.toFixed(1)} ms. Target (issue 37): under ${DRY_RUN_TARGET_MS} ms: ${dryRunMet ? 'met' : 'NOT met'}`,
    );
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
      {
        figure: `webhook ingest through ${rules.rules.length} routing rules, ${SENDERS} senders`,
        value: `${Math.round(rulesRate)}/s, p50 ${rulesSent.p50.toFixed(1)} ms, p99 ${rulesSent.p99.toFixed(1)} ms, ${rulesSent.refused} refused; ${pctOf(rulesRate, rate, 1)} of the plain rate; decision ${decideUs.toFixed(1)} µs`,
        vsPgbench: `${pctOf(rulesRate, pg.tps, 1)} of ${Math.round(pg.tps)}/s`,
        target: `>= ${RULES_TARGET * 100}% of the plain rate`,
        met: rulesMet,
      },
      {
        figure: `rules write with its dry run over ${dryRun.events} stored events (median of ${DRY_RUN_REPEATS})`,
        value: `${dryRun.median.toFixed(1)} ms`,
        target: `< ${DRY_RUN_TARGET_MS} ms`,
        met: dryRunMet,
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
        rules_count: rules.rules.length,
        rules_per_second: figure(rulesRate, 1),
        rules_total: rulesSent.accepted,
        rules_refused: rulesSent.refused,
        rules_p50_ms: figure(rulesSent.p50),
        rules_p99_ms: figure(rulesSent.p99),
        rules_ratio_to_plain: figure(rulesToPlain, 4),
        rules_server_cpu_ms_per_delivery: figure(rulesSent.serverCpu, 3),
        rules_postgres_cpu_ms_per_delivery: figure(rulesSent.postgresCpu, 3),
        rules_decision_us: figure(decideUs, 2),
        target_rules_ratio: RULES_TARGET,
        target_rules_met: rulesMet,
        dry_run_events: dryRun.events,
        dry_run_repeats: DRY_RUN_REPEATS,
        dry_run_ms: dryRun.ms,
        dry_run_median_ms: figure(dryRun.median, 1),
        dry_run_large_events: dryRunLarge.events,
        dry_run_large_median_ms: figure(dryRunLarge.median, 1),
        target_dry_run_ms: DRY_RUN_TARGET_MS,
        target_dry_run_met: dryRunMet,
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

/**
 * What a second and a third instance buy (issue 40 item 2). On one throwaway PostgreSQL, Switchboard
 * instances each in a process of its own (bench/instance.ts: loops off, rate limits lifted, as in
 * bench:ingest), behind HAProxy on the shipped deploy/haproxy.cfg (only its bind, server list and
 * resolvers rewritten for loopback, and an admin socket added: rewriteShippedConfig), over 1, 2 and
 * 3 instances; then the same through PgBouncer in transaction mode (the instances' main pools and
 * lanes on PgBouncer with unnamed statements, LISTEN and migrations on SWITCHBOARD_LISTEN_DATABASE_URL,
 * straight to PostgreSQL: docs/deploy.md#pgbouncer).
 *
 * For each configuration, in turns (a round goes 1, 2, 3 instances direct then through PgBouncer,
 * the next round the other way back, so a neighbour that slows the machine for a while slows them
 * alike):
 *  (a) webhook ingest: bench/webhook-sender.ts's `senders` posting signed GitHub deliveries to one
 *      webhook through the balancer, `warmup` seconds untimed then `seconds` timed;
 *  (a2) the same spread over `spread` webhooks of as many endpoints (each delivery to the next):
 *      an instance batches deliveries to one endpoint into one statement (DeliveryBatches), so the
 *      one-webhook case gains from batching what spreading it over instances loses;
 *  (b) the MCP drain: bench/mcp-driver.ts (wire mode, the lightest load generator) with `workers`
 *      sessions through the balancer, claim_next then complete, WARMUP_JOBS untimed then `jobs`,
 *      on a queue seeded with SURPLUS more (no timed claim finds it empty; the rest deleted after).
 * Each timed window is profiled (bench/cluster-bench.ts): CPU of each instance, PostgreSQL's
 * processes, HAProxy, PgBouncer and the load generator from /proc, the rest of the machine's busy
 * time as `other`; PostgreSQL's wait events sampled every 100 ms; pg_stat_statements.
 *
 *   npm run bench:instances -- [--seconds 10] [--warmup 2] [--rounds 2] [--senders 16] [--workers 16]
 *     [--jobs 3000] [--spread 100] [--max 3] [--bouncer-pool 20] [--skip-bouncer] [--out bench/results/x.json] [--json]
 *
 * --spread 0 leaves (a2) out; --rounds 1 --seconds 5 shortens the run to about three minutes.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { LANES, POOL_MAX } from '../src/db/connect.ts';
import { systemClock } from '../src/lib/clock.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { SecretBox } from '../src/lib/crypto-box.ts';
import { addHuman, createToken } from '../src/store/humans.ts';
import { startPgBouncer, type PgBouncer } from '../test/support/pgbouncer.ts';
import {
  describeProfile,
  drainFrom,
  loadAverage,
  mergeSent,
  sendFrom,
  spawnInstance,
  startProfiledCluster,
  startShippedHaproxy,
  sumProfiles,
  type Balancer,
  type Drained,
  type Instance,
  type Roles,
  type Sent,
} from './cluster-bench.ts';
import { WARMUP_JOBS, benchCommit, percentile, seedPendingTodos } from './lib.ts';
import { sealedWebhook } from './sealed-webhook.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '2' },
    senders: { type: 'string', default: '16' },
    workers: { type: 'string', default: '16' },
    jobs: { type: 'string', default: '3000' },
    spread: { type: 'string', default: '100' },
    max: { type: 'string', default: '3' },
    'bouncer-pool': { type: 'string', default: '20' },
    'skip-bouncer': { type: 'boolean', default: false },
    out: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const SECONDS = Number(values.seconds);
const WARMUP = Number(values.warmup);
const ROUNDS = Math.max(1, Math.round(Number(values.rounds)));
const SENDERS = Number(values.senders);
const WORKERS = Number(values.workers);
const JOBS = Number(values.jobs);
const SPREAD = Math.max(0, Math.round(Number(values.spread)));
/** Jobs seeded beyond the drain's, so that no claim_next of the timed drain finds the queue empty. */
const SURPLUS = 200;
const MAX = Math.max(1, Math.round(Number(values.max)));
const BOUNCER_POOL = Number(values['bouncer-pool']);

interface Config {
  variant: 'direct' | 'pgbouncer';
  n: number;
  instances: Instance[];
  balancer: Balancer;
  roles: Roles;
  ingestTarget: { url: string; secret: string };
  ingestEndpointId: string;
  spreadTargets: { url: string; secret: string }[];
  spreadEndpointIds: string[];
  spreadSent: Sent[];
  spreadWarmAccepted: number;
  drain: { id: string; mcpUrl: string; credential: string };
  sent: Sent[];
  drained: Drained[];
  warmAccepted: number;
}

const commit = benchCommit() ?? 'unknown';

const load0 = loadAverage();
const started = Date.now();
const db = await startProfiledCluster();
const { sql, cluster } = db;
let bouncer: PgBouncer | null = null;
const spawned: Instance[] = [];
const balancers: Balancer[] = [];
const configs: Config[] = [];
let report: Record<string, unknown> | undefined;
try {
  const human = await addHuman(sql, { handle: 'bench' });
  const { token } = await createToken(sql, { handle: 'bench' });
  if (!values['skip-bouncer']) bouncer = await startPgBouncer({ upstreamUrl: cluster.url, poolMode: 'transaction', poolSize: BOUNCER_POOL });
  const keyBytes = randomBytes(32);
  const key = keyBytes.toString('hex');
  const box = new SecretBox(keyBytes);
  const variants: { name: Config['variant']; env: Record<string, string> }[] = [{ name: 'direct', env: { SWITCHBOARD_DATABASE_URL: cluster.url } }];
  if (bouncer) variants.push({ name: 'pgbouncer', env: { SWITCHBOARD_DATABASE_URL: bouncer.url(cluster.url), SWITCHBOARD_LISTEN_DATABASE_URL: cluster.url } });

  for (const v of variants) {
    const instances: Instance[] = [];
    for (let i = 0; i < MAX; i++) {
      const inst = await spawnInstance({ ...v.env, SWITCHBOARD_INGEST_RATE: '100000', SWITCHBOARD_SECRET_ENCRYPTION_KEY: key });
      instances.push(inst);
      spawned.push(inst);
    }
    const api = async (p: string, body: unknown) => {
      const res = await fetch(`${instances[0]!.url}/api/v1${p}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (res.status !== 201) throw new Error(`POST ${p}: ${res.status} ${await res.text()}`);
      return (await res.json()) as Record<string, string>;
    };
    for (let n = 1; n <= MAX; n++) {
      const balancer = await startShippedHaproxy(instances.slice(0, n).map((x, i) => ({ name: `switchboard-${i + 1}`, port: x.port })));
      balancers.push(balancer);
      const endpoint = await api('/endpoints', { name: `ingest-${v.name}-${n}`, queues: ['issues'] });
      const webhook = await api(`/endpoints/${endpoint.slug}/webhooks`, { source_type: 'github', target_queue: 'issues' });
      const vended = await vendEndpoint(sql, human.id, { name: `drain-${v.name}-${n}`, queues: ['work'] }, systemClock.now());
      const spread = [];
      for (let i = 0; i < SPREAD; i++) spread.push(await sealedWebhook(sql, human.id, box, `spread-${v.name}-${n}-${i}`, balancer.url));
      configs.push({
        variant: v.name,
        n,
        instances: instances.slice(0, n),
        balancer,
        roles: {
          instances: instances.slice(0, n).map((x) => x.pid),
          idle: spawned.filter((x) => !instances.slice(0, n).includes(x)).map((x) => x.pid),
          postmasterPid: db.postmasterPid,
          haproxyPid: balancer.pid,
          pgbouncer: v.name === 'pgbouncer',
        },
        ingestTarget: { url: `${balancer.url}${new URL(webhook.ingest_url!).pathname}`, secret: webhook.signing_secret! },
        ingestEndpointId: endpoint.id!,
        spreadTargets: spread.map(({ url, secret }) => ({ url, secret })),
        spreadEndpointIds: spread.map((x) => x.endpointId),
        spreadSent: [],
        spreadWarmAccepted: 0,
        drain: { id: vended.endpoint.id, mcpUrl: `${balancer.url}/mcp/${vended.endpoint.slug}`, credential: vended.credential },
        sent: [],
        drained: [],
        warmAccepted: 0,
      });
    }
  }
  // Instances spawned after a configuration's roles were set are idle in it too.
  for (const c of configs) c.roles.idle = spawned.filter((x) => !c.instances.includes(x)).map((x) => x.pid);

  const orderOf = (round: number) => (round % 2 === 0 ? configs : [...configs].reverse());
  const label = (c: Config) => `${c.variant} x${c.n}`;
  const requestsBefore = new Map<Config, Map<string, { total: number }>>();
  const requestsAfterIngest = new Map<Config, Map<string, { total: number }>>();
  const requestsAfterSpread = new Map<Config, Map<string, { total: number }>>();
  const requestsAfterDrain = new Map<Config, Map<string, { total: number }>>();
  for (const c of configs) requestsBefore.set(c, await c.balancer.stats());

  // (a) ingest
  let issues = 0;
  for (let r = 0; r < ROUNDS; r++) {
    for (const c of orderOf(r)) {
      const s = await sendFrom({ targets: [c.ingestTarget], senders: SENDERS, seconds: SECONDS, warmupSeconds: WARMUP, firstIssue: issues, bucketSeconds: 1 }, sql, c.roles);
      issues += s.sent;
      c.sent.push(s);
      c.warmAccepted += s.warmAccepted;
      console.error(`ingest round ${r + 1} ${label(c)}: ${Math.round(s.accepted / s.seconds)}/s, p99 ${percentile(s.latencies, 99).toFixed(1)} ms, load ${loadAverage()[0]}`);
    }
  }
  for (const c of configs) requestsAfterIngest.set(c, await c.balancer.stats());
  for (const c of configs) {
    const [{ n }] = (await sql`select count(*)::int as n from todos where endpoint_id = ${c.ingestEndpointId}`) as unknown as [{ n: number }];
    const accepted = c.warmAccepted + c.sent.reduce((a, s) => a + s.accepted, 0);
    if (n !== accepted) throw new Error(`${label(c)}: ${n} todos stored for ${accepted} accepted deliveries`);
  }

  // (a2) ingest spread over SPREAD webhooks, one endpoint each
  if (SPREAD > 0) {
    for (let r = 0; r < ROUNDS; r++) {
      for (const c of orderOf(r)) {
        const s = await sendFrom({ targets: c.spreadTargets, senders: SENDERS, seconds: SECONDS, warmupSeconds: WARMUP, firstIssue: issues, bucketSeconds: 1 }, sql, c.roles);
        issues += s.sent;
        c.spreadSent.push(s);
        c.spreadWarmAccepted += s.warmAccepted;
        console.error(`spread ingest round ${r + 1} ${label(c)}: ${Math.round(s.accepted / s.seconds)}/s, p99 ${percentile(s.latencies, 99).toFixed(1)} ms, load ${loadAverage()[0]}`);
      }
    }
    for (const c of configs) {
      const [{ n }] = (await sql`select count(*)::int as n from todos where endpoint_id = any(${c.spreadEndpointIds}::uuid[])`) as unknown as [{ n: number }];
      const accepted = c.spreadWarmAccepted + c.spreadSent.reduce((a, s) => a + s.accepted, 0);
      if (n !== accepted) throw new Error(`${label(c)}: ${n} todos stored on the spread endpoints for ${accepted} accepted deliveries`);
    }
  }
  for (const c of configs) requestsAfterSpread.set(c, await c.balancer.stats());

  // (b) the MCP drain
  for (let r = 0; r < ROUNDS; r++) {
    for (const c of orderOf(r)) {
      await seedPendingTodos(sql, c.drain.id, WARMUP_JOBS + JOBS + SURPLUS);
      const d = await drainFrom(c.drain.mcpUrl, c.drain.credential, WORKERS, JOBS, sql, c.roles);
      if (d.done !== JOBS) throw new Error(`${label(c)}: the drain took ${d.done} of ${JOBS} jobs`);
      const left = await sql`delete from todos where endpoint_id = ${c.drain.id} and state = 'pending' returning id`;
      if (left.length !== SURPLUS) throw new Error(`${label(c)}: ${left.length} jobs left after the drain, not ${SURPLUS}`);
      c.drained.push(d);
      console.error(`drain round ${r + 1} ${label(c)}: ${Math.round(d.done / d.seconds)}/s, p99 ${d.p99.toFixed(1)} ms, load ${loadAverage()[0]}`);
    }
  }
  for (const c of configs) requestsAfterDrain.set(c, await c.balancer.stats());

  // Figures
  const share = (a: Map<string, { total: number }>, b: Map<string, { total: number }>) => {
    const d = [...b].map(([name, s]) => [name, s.total - (a.get(name)?.total ?? 0)] as const);
    const sum = d.reduce((x, [, n]) => x + n, 0);
    return Object.fromEntries(d.map(([name, n]) => [name, Number((n / Math.max(1, sum)).toFixed(3))]));
  };
  /** One ingest run's figures over its rounds, with how the balancer split its requests. */
  const ingestFigures = (sent: Sent[], balancerShare: Record<string, number>) => {
    const r = mergeSent(sent);
    return {
      per_second: Number(r.perSecond.toFixed(1)),
      accepted: r.accepted,
      not_202: r.refused,
      statuses: r.statuses,
      seconds: Number(r.seconds.toFixed(2)),
      p50_ms: Number(r.p50.toFixed(2)),
      p99_ms: Number(r.p99.toFixed(2)),
      per_round: sent.map((x) => Number((x.accepted / x.seconds).toFixed(1))),
      balancer_share: balancerShare,
      profile: describeProfile(r.profile, r.accepted),
    };
  };
  const rows = configs.map((c) => {
    const drainSeconds = c.drained.reduce((a, d) => a + d.seconds, 0);
    const drainDone = c.drained.reduce((a, d) => a + d.done, 0);
    const drainProfile = sumProfiles(c.drained.map((d) => d.profile));
    return {
      variant: c.variant,
      instances: c.n,
      ingest: ingestFigures(c.sent, share(requestsBefore.get(c)!, requestsAfterIngest.get(c)!)),
      ingest_spread: c.spreadSent.length ? { webhooks: SPREAD, ...ingestFigures(c.spreadSent, share(requestsAfterIngest.get(c)!, requestsAfterSpread.get(c)!)) } : null,
      drain: {
        per_second: Number((drainDone / drainSeconds).toFixed(1)),
        jobs: drainDone,
        seconds: Number(drainSeconds.toFixed(2)),
        // Each round's p50 and p99 (the driver reports percentiles, not its samples): the median of them.
        p50_ms: Number(percentile(c.drained.map((d) => d.p50).sort((a, b) => a - b), 50).toFixed(2)),
        p99_ms: Number(percentile(c.drained.map((d) => d.p99).sort((a, b) => a - b), 50).toFixed(2)),
        per_round: c.drained.map((d) => Number((d.done / d.seconds).toFixed(1))),
        balancer_share: share(requestsAfterSpread.get(c)!, requestsAfterDrain.get(c)!),
        profile: describeProfile(drainProfile, drainDone),
      },
    };
  });
  const base = (variant: string) => rows.find((r) => r.variant === variant && r.instances === 1)!;
  for (const r of rows) {
    Object.assign(r.ingest, { ratio_to_one: Number((r.ingest.per_second / base(r.variant).ingest.per_second).toFixed(3)) });
    Object.assign(r.drain, { ratio_to_one: Number((r.drain.per_second / base(r.variant).drain.per_second).toFixed(3)) });
    if (r.ingest_spread) Object.assign(r.ingest_spread, { ratio_to_one: Number((r.ingest_spread.per_second / base(r.variant).ingest_spread!.per_second).toFixed(3)) });
  }
  const directOne = base('direct');
  const twoDirect = rows.find((r) => r.variant === 'direct' && r.instances === 2);
  const target = twoDirect ? { target: 'two instances ingest >= 1.6x one', ratio: Number((twoDirect.ingest.per_second / directOne.ingest.per_second).toFixed(3)) } : null;

  const titles = {
    ingest: `(a) webhook ingest to one webhook, ${SENDERS} senders, ${ROUNDS} x ${SECONDS} s timed each (after ${WARMUP} s untimed)`,
    ingest_spread: `(a2) webhook ingest spread over ${SPREAD} webhooks of ${SPREAD} endpoints, ${SENDERS} senders, ${ROUNDS} x ${SECONDS} s timed each (after ${WARMUP} s untimed)`,
    drain: `(b) MCP drain (claim_next + complete), ${WORKERS} sessions, ${ROUNDS} x ${JOBS} jobs each (after ${WARMUP_JOBS} untimed; ${SURPLUS} more seeded, so no claim finds the queue empty)`,
  };
  const printTable = (phase: 'ingest' | 'ingest_spread' | 'drain') => {
    if (rows.some((r) => !r[phase])) return;
    console.log(`\n${titles[phase]}; CPU in cores (CPU s per wall s), this machine has ${os.availableParallelism()}`);
    console.table(
      rows.map((r) => {
        const f = r[phase]!;
        const c = f.profile.cores;
        return {
          config: `${r.variant} x${r.instances}`,
          'per s': Math.round(f.per_second),
          'vs x1': `${(f as unknown as { ratio_to_one: number }).ratio_to_one.toFixed(2)}x`,
          rounds: f.per_round.map(Math.round).join(' / '),
          'p50 ms': f.p50_ms,
          'p99 ms': f.p99_ms,
          'each instance': c.instances.map((x) => x.toFixed(2)).join(' + '),
          postgres: c.postgres.toFixed(2),
          haproxy: c.haproxy.toFixed(2),
          pgbouncer: c.pgbouncer.toFixed(2),
          'load gen': c.load_generator.toFixed(2),
          other: c.other.toFixed(2),
          'machine busy': c.machine_busy.toFixed(2),
          'ms/op inst / pg': `${f.profile.cpu_ms_per_op.instances.toFixed(3)} / ${f.profile.cpu_ms_per_op.postgres.toFixed(3)}`,
        };
      }),
    );
    for (const r of rows) {
      const f = r[phase]!;
      const waits = Object.entries(f.profile.backends_by_wait)
        .slice(0, 5)
        .map(([w, n]) => `${w} ${n}`)
        .join(', ');
      console.log(`  ${r.variant} x${r.instances}: balancer ${JSON.stringify(f.balancer_share)}; backends busy ${f.profile.backends_active_mean} (${waits}); statements ${f.profile.statements_exec_ms_per_op} ms/op`);
    }
  };
  printTable('ingest');
  printTable('ingest_spread');
  printTable('drain');
  if (target) console.log(`\nTwo instances ingest ${target.ratio}x one (issue 40: at least 1.6x, or the profile shows what limits it).`);

  report = {
    bench: 'instances',
    commit,
    at: new Date().toISOString(),
    machine: { cores: os.availableParallelism(), load_before: load0, load_after: loadAverage() },
    postgres: db.pgVersion,
    postgres_settings: 'throwaway cluster: fsync off, synchronous_commit off, full_page_writes off; pg_stat_statements preloaded',
    options: { seconds: SECONDS, warmup_seconds: WARMUP, rounds: ROUNDS, senders: SENDERS, workers: WORKERS, jobs: JOBS, warmup_jobs: WARMUP_JOBS, surplus_jobs: SURPLUS, spread_webhooks: SPREAD, max_instances: MAX, bouncer_pool: bouncer ? BOUNCER_POOL : null },
    instance_pools: { pool_max: POOL_MAX, lanes: LANES },
    haproxy_changes: balancers[0]?.changes,
    order: 'round 1: direct x1..x3 then pgbouncer x1..x3; round 2 the reverse, round 3 as round 1; the one-webhook ingest rounds, then the spread ones, then the drain rounds',
    pgbouncer: bouncer ? `PgBouncer transaction mode, default_pool_size ${BOUNCER_POOL}; instances: SWITCHBOARD_DATABASE_URL on PgBouncer (unnamed statements), SWITCHBOARD_LISTEN_DATABASE_URL direct (LISTEN, migrations)` : 'skipped',
    rows,
    two_instances_ingest: target,
    run_seconds: Math.round((Date.now() - started) / 1000),
  };
} finally {
  for (const b of balancers) await b.stop().catch(() => {});
  await Promise.all(spawned.map((i) => i.stop().catch(() => {})));
  await bouncer?.stop().catch(() => {});
  await db.stop();
}
if (report) {
  if (values.out) writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
  if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
}

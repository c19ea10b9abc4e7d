/**
 * Ingest under a storm (issue 40 item 4): `senders` (50) posting signed GitHub deliveries for
 * `seconds` (60) without pause, first all to one endpoint's webhook (the hot case: every delivery
 * writes the same endpoint's queue and its history rows), then spread over `endpoints` (1,000)
 * endpoints of one human, one github webhook each, each delivery to the next webhook in turn. Beside
 * them, with the same senders and seconds, the floor (bench/ingest-floor.ts: HMAC verify and one
 * insert), once before and once after, so the drift of this shared machine across the run shows.
 *
 * One Switchboard instance in a process of its own (bench/instance.ts: loops off, rate limits
 * lifted as in bench:ingest; with the shipped per-webhook limit of 100/s, burst 200, the hot case
 * would be answered 429 beyond that), no balancer; the floor in this process; the senders in
 * bench/webhook-sender.ts. Each storm is preceded by `warmup` seconds of the same load, untimed.
 * Each is profiled as bench:instances profiles (bench/cluster-bench.ts), with accepted deliveries
 * per `bucket` seconds, to show whether the rate holds across the minute.
 *
 *   npm run bench:storm -- [--seconds 60] [--senders 50] [--endpoints 1000] [--warmup 5] [--bucket 5]
 *     [--out bench/results/x.json] [--json]
 *
 * --seconds 15 shortens the run to about two minutes.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { SecretBox } from '../src/lib/crypto-box.ts';
import { addHuman } from '../src/store/humans.ts';
import { describeProfile, loadAverage, mergeSent, sendFrom, spawnInstance, startProfiledCluster, type Instance, type Roles, type Sent } from './cluster-bench.ts';
import { startIngestFloor, type IngestFloor } from './ingest-floor.ts';
import { benchCommit } from './lib.ts';
import { sealedWebhook } from './sealed-webhook.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    senders: { type: 'string', default: '50' },
    endpoints: { type: 'string', default: '1000' },
    warmup: { type: 'string', default: '5' },
    bucket: { type: 'string', default: '5' },
    out: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const SECONDS = Number(values.seconds);
const SENDERS = Number(values.senders);
const ENDPOINTS = Math.max(1, Math.round(Number(values.endpoints)));
const WARMUP = Number(values.warmup);
const BUCKET = Number(values.bucket);

const commit = benchCommit() ?? 'unknown';

const load0 = loadAverage();
const started = Date.now();
const db = await startProfiledCluster();
const { sql, cluster } = db;
let instance: Instance | undefined;
let floor: IngestFloor | undefined;
let report: Record<string, unknown> | undefined;
try {
  const human = await addHuman(sql, { handle: 'bench' });
  const key = randomBytes(32);
  instance = await spawnInstance({
    SWITCHBOARD_DATABASE_URL: cluster.url,
    SWITCHBOARD_INGEST_RATE: '100000',
    SWITCHBOARD_SECRET_ENCRYPTION_KEY: key.toString('hex'),
  });
  const floorSecret = randomBytes(32).toString('hex');
  floor = await startIngestFloor(cluster.url, floorSecret);
  const box = new SecretBox(key);
  const hook = (name: string) => sealedWebhook(sql, human.id, box, name, instance!.url);
  const hot = await hook('hot');
  const t0 = performance.now();
  const spread: Awaited<ReturnType<typeof hook>>[] = [];
  for (let i = 0; i < ENDPOINTS; i += 8) {
    spread.push(...(await Promise.all(Array.from({ length: Math.min(8, ENDPOINTS - i) }, (_, k) => hook(`storm-${i + k}`)))));
  }
  const setupSeconds = (performance.now() - t0) / 1000;
  console.error(`${ENDPOINTS} endpoints with a webhook each made in ${setupSeconds.toFixed(1)} s`);

  const roles: Roles = { instances: [instance.pid], postmasterPid: db.postmasterPid };
  let issues = 0;
  const storm = async (what: string, targets: { url: string; secret: string }[]): Promise<Sent> => {
    const s = await sendFrom({ targets, senders: SENDERS, seconds: SECONDS, warmupSeconds: WARMUP, firstIssue: issues, bucketSeconds: BUCKET }, sql, roles);
    issues += s.sent;
    console.error(`${what}: ${Math.round(s.accepted / s.seconds)}/s over ${s.seconds.toFixed(1)} s, not 202 ${s.refused}, load ${loadAverage()[0]}`);
    return s;
  };
  const floorBefore = await storm('floor (before)', [{ url: floor.url, secret: floorSecret }]);
  const hotRun = await storm('one endpoint', [{ url: hot.url, secret: hot.secret }]);
  const spreadRun = await storm(`${ENDPOINTS} endpoints`, spread.map((h) => ({ url: h.url, secret: h.secret })));
  const floorAfter = await storm('floor (after)', [{ url: floor.url, secret: floorSecret }]);

  // Every 202 stored: the floor's rows, the hot endpoint's todos, the spread endpoints' todos.
  const floorRows = await floor.rows();
  if (floorRows !== floorBefore.warmAccepted + floorBefore.accepted + floorAfter.warmAccepted + floorAfter.accepted) throw new Error(`the floor stored ${floorRows} rows for a different count of 202s`);
  const [{ hotTodos, spreadTodos, spreadEndpoints }] = (await sql`
    select count(*) filter (where endpoint_id = ${hot.endpointId})::int as "hotTodos",
           count(*) filter (where endpoint_id <> ${hot.endpointId})::int as "spreadTodos",
           count(distinct endpoint_id) filter (where endpoint_id <> ${hot.endpointId})::int as "spreadEndpoints"
    from todos`) as unknown as [{ hotTodos: number; spreadTodos: number; spreadEndpoints: number }];
  if (hotTodos !== hotRun.warmAccepted + hotRun.accepted) throw new Error(`${hotTodos} todos on the hot endpoint for ${hotRun.warmAccepted + hotRun.accepted} 202s`);
  if (spreadTodos !== spreadRun.warmAccepted + spreadRun.accepted) throw new Error(`${spreadTodos} todos on the spread endpoints for ${spreadRun.warmAccepted + spreadRun.accepted} 202s`);

  const floorAll = mergeSent([floorBefore, floorAfter]);
  const describe = (s: Sent) => {
    const m = mergeSent([s]);
    const rates = s.buckets.map((n, i) => {
      const width = i === s.buckets.length - 1 ? s.seconds - i * BUCKET : BUCKET;
      return Number((n / Math.max(0.001, width)).toFixed(1));
    });
    return {
      per_second: Number(m.perSecond.toFixed(1)),
      accepted: m.accepted,
      not_202: m.refused,
      statuses: m.statuses,
      seconds: Number(m.seconds.toFixed(2)),
      p50_ms: Number(m.p50.toFixed(2)),
      p99_ms: Number(m.p99.toFixed(2)),
      max_ms: Number(m.max.toFixed(2)),
      share_of_floor: Number((m.perSecond / floorAll.perSecond).toFixed(3)),
      per_bucket: rates,
      profile: describeProfile(m.profile, m.accepted),
    };
  };
  const phases = {
    floor_before: describe(floorBefore),
    one_endpoint: describe(hotRun),
    spread: { ...describe(spreadRun), endpoints: ENDPOINTS, endpoints_written: spreadEndpoints },
    floor_after: describe(floorAfter),
  };
  const floorFig = { per_second: Number(floorAll.perSecond.toFixed(1)), p50_ms: Number(floorAll.p50.toFixed(2)), p99_ms: Number(floorAll.p99.toFixed(2)) };

  console.log(`\n${SENDERS} senders, ${SECONDS} s each without pause (after ${WARMUP} s untimed), signed GitHub deliveries; one instance, PostgreSQL ${db.pgVersion}; CPU in cores of ${os.availableParallelism()}`);
  console.table(
    Object.entries(phases).map(([name, p]) => ({
      phase: name,
      'per s': Math.round(p.per_second),
      'share of floor': `${(p.share_of_floor * 100).toFixed(1)}%`,
      'p50 ms': p.p50_ms,
      'p99 ms': p.p99_ms,
      'max ms': p.max_ms,
      'not 202': p.not_202,
      [`per ${BUCKET} s`]: p.per_bucket.map(Math.round).join(' '),
      'instance / floor+bench': `${p.profile.cores.instances[0]!.toFixed(2)} / ${p.profile.cores.bench.toFixed(2)}`,
      postgres: p.profile.cores.postgres.toFixed(2),
      'load gen': p.profile.cores.load_generator.toFixed(2),
      other: p.profile.cores.other.toFixed(2),
    })),
  );
  for (const [name, p] of Object.entries(phases)) {
    const waits = Object.entries(p.profile.backends_by_wait)
      .slice(0, 6)
      .map(([w, n]) => `${w} ${n}`)
      .join(', ');
    console.log(`  ${name}: backends busy ${p.profile.backends_active_mean} (${waits}); statements ${p.profile.statements_exec_ms_per_op} ms per delivery`);
  }
  console.log(`floor (both runs): ${Math.round(floorFig.per_second)}/s, p99 ${floorFig.p99_ms} ms`);

  report = {
    bench: 'storm',
    commit,
    at: new Date().toISOString(),
    machine: { cores: os.availableParallelism(), load_before: load0, load_after: loadAverage() },
    postgres: db.pgVersion,
    postgres_settings: 'throwaway cluster: fsync off, synchronous_commit off, full_page_writes off; pg_stat_statements preloaded',
    options: { seconds: SECONDS, senders: SENDERS, endpoints: ENDPOINTS, warmup_seconds: WARMUP, bucket_seconds: BUCKET },
    order: 'floor, one endpoint, spread, floor; each phase after its own untimed warm-up',
    setup_seconds: Number(setupSeconds.toFixed(1)),
    floor: floorFig,
    phases,
    run_seconds: Math.round((Date.now() - started) / 1000),
  };
} finally {
  await floor?.stop().catch(() => {});
  await instance?.stop().catch(() => {});
  await db.stop();
}
if (report) {
  if (values.out) writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
  if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
}

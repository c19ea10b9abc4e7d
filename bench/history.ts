/**
 * What the queue history costs (issue 39: "the history costs at most 5 % of push and claim
 * throughput, same run, with and without, and a board page with charts renders in under 200 ms
 * server time at 10,000 endpoints' history"), on one throwaway PostgreSQL in one run:
 *
 *  1. Throughput with the history's four triggers (migration 0025: todo_history_insert and
 *     todo_history_update on todos, ring_history_insert and ring_history_update on doorbell_rings)
 *     enabled and disabled (ALTER TABLE ... ENABLE/DISABLE TRIGGER), in pairs whose order
 *     alternates (with/without, then without/with, ...), so drift and a noisy neighbour hit both:
 *     - push: `--pushers` concurrent pushes over `--push-endpoints` endpoints through the
 *       instance's own DeliveryBatches on its lanes (what TodoService.push sends), timed slices;
 *     - hot push: `--pushers` connections pushing to ONE endpoint and queue at once, each push its
 *       own statement (insertEventAndTodo, no batching: as many instances pushing at once), every
 *       push's trigger appending a delta row of the same minute, endpoint and queue;
 *     - claim + complete: the store's drain (bench/lib.ts storeDrain: claim_next then complete,
 *       `--workers` at a time), `--jobs` todos after WARMUP_JOBS untimed;
 *     - the same by one worker (SERIAL_JOBS todos): a statement per claim and per completion,
 *       nothing batched, so every statement pays the triggers alone.
 *     Each with CPU per operation (this process and PostgreSQL, from /proc) beside the rate; the
 *     per-pair ratio with/without and its median are the figure. An untimed pair goes first. Each
 *     "with" slice is checked to have written its buckets and each "without" slice none.
 *  2. The history at `--endpoints` endpoints: a day of minute buckets and a week of hour buckets,
 *     written straight in SQL (generate_series; see loadHistory for the shape), and live todos
 *     for the depth snapshot; then, in this process against that database, median ms of
 *     `--reads` calls: HistoryService.maintain() and its four statements, history() for one busy
 *     endpoint over 1 h / 24 h / 7 d, pendingSparklines() for 12 / 100 / 1,000 / all endpoints
 *     (the endpoints page draws 50 a page), byQueue() over all the human's endpoints (the todos
 *     page's chart, from the sums per human) and over one busy endpoint; then the board's pages
 *     and chart JSON over HTTP for a human with 12 of those endpoints and one with 100. Target:
 *     200 ms for what a page reads (`page`); sparklines of one human's 1,000 and 10,000
 *     (`extreme`) are printed beside it, cut off at READ_TIMEOUT_MS. EXPLAIN
 *     (ANALYZE, BUFFERS) of the statement of any page read over the target is printed.
 *
 *   npm run bench:history -- [--rounds 5] [--jobs 3000] [--workers 8] [--pushers 16]
 *     [--push-endpoints 100] [--push-seconds 2] [--endpoints 10000] [--busy 0.1] [--reads 5]
 *     [--only throughput|reads] [--json]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { Sql } from '../src/db/connect.ts';
import { connect } from '../src/db/connect.ts';
import { ManualClock, systemClock } from '../src/lib/clock.ts';
import { createLogger } from '../src/lib/log.ts';
import { HistoryService } from '../src/services/history.ts';
import { foldHistoryDeltasUnscoped, pruneHistoryUnscoped } from '../src/store/history/index.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { createLoginLink } from '../src/store/web-sessions.ts';
import { DeliveryBatches } from '../src/store/todos/delivery-batches.ts';
import { insertEventAndTodo, type EventInput } from '../src/store/todos/index.ts';
import { counted, setHistory } from './history-triggers.ts';
import {
  WARMUP_JOBS,
  timedLoops,
  capturingPool,
  figure,
  openLanes,
  printJsonLast,
  seedPendingTodos,
  startBenchApp,
  storeDrain,
  summarize,
  withBenchDatabase,
  type CpuPerJob,
  type DrainResult,
} from './lib.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    jobs: { type: 'string', default: '3000' },
    workers: { type: 'string', default: '8' },
    pushers: { type: 'string', default: '16' },
    'push-endpoints': { type: 'string', default: '100' },
    'push-seconds': { type: 'string', default: '2' },
    endpoints: { type: 'string', default: '10000' },
    busy: { type: 'string', default: '0.1' },
    reads: { type: 'string', default: '5' },
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(values.rounds);
const JOBS = Number(values.jobs);
const WORKERS = Number(values.workers);
const PUSHERS = Number(values.pushers);
const PUSH_ENDPOINTS = Number(values['push-endpoints']);
const PUSH_SECONDS = Number(values['push-seconds']);
const ENDPOINTS = Number(values.endpoints);
const BUSY = Number(values.busy);
const READS = Number(values.reads);
const ONLY = values.only;
if (ONLY !== undefined && ONLY !== 'throughput' && ONLY !== 'reads') throw new Error('--only is throughput or reads');

/** Issue 39's two targets. */
const TARGET_COST = 0.05;
const TARGET_MS = 200;
/** The reads' statement_timeout: a one-human read of 10,000 endpoints is cut off there, so a run stays within its minutes. */
const READ_TIMEOUT_MS = 30_000;
/** Todos the one-worker claim + complete drains, timed, in each slice. */
const SERIAL_JOBS = 1000;

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => (x < 10 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : Math.round(x).toLocaleString('en'));
const int = (x: number) => Math.round(x).toLocaleString('en');
const pct = (ratio: number) => `${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(1)} %`;

// ---------------------------------------------------------------------------------------------
// 1. Throughput with and without the triggers

interface Slice {
  history: boolean;
  ops: number;
  seconds: number;
  cpu: CpuPerJob;
}
type Measured = Omit<Slice, 'history'> | DrainResult;
const rateOf = (s: Measured) => ('ops' in s ? s.ops : s.done) / s.seconds;
const cpuOf = (s: Measured) => s.cpu!.node + s.cpu!.pg;

const OPERATOR_EVENT: EventInput = {
  source: 'operator',
  family: 'operator',
  trustMode: 'operator',
  verified: true,
  verifyDetail: 'bench:history',
};

interface Throughput {
  push: Slice[];
  hot: Slice[];
  claim: (DrainResult & { history: boolean })[];
  serial: (DrainResult & { history: boolean })[];
}

async function throughput(url: string, sql: Sql): Promise<Throughput> {
  const human = await addHuman(sql, { handle: 'bench-throughput' });
  const pushTargets = await Promise.all(
    Array.from({ length: PUSH_ENDPOINTS }, async (_, i) => (await vendEndpoint(sql, human.id, { name: `push-${i}`, queues: ['work', 'reviews'] }, systemClock.now())).endpoint),
  );
  const hotTarget = (await vendEndpoint(sql, human.id, { name: 'hot', queues: ['work'] }, systemClock.now())).endpoint;
  const out: Throughput = { push: [], hot: [], claim: [], serial: [] };

  // The pushing instance's own pool and lanes, connected before any clock starts; an instance id
  // with no other instance registered: a single server's push, which sends no NOTIFY.
  const pool = connect(url, { max: Math.max(PUSHERS, WORKERS) });
  await Promise.all(Array.from({ length: Math.max(PUSHERS, WORKERS) }, () => pool`select 1`));
  const lanes = await openLanes(url);
  /** One setting's three measurements, each "with" checked to have counted what ran and each "without" to have counted nothing. */
  const measure = async (history: boolean, jobs: number, pushSeconds: number, tag: string) => {
    await setHistory(sql, history);
    const before = await counted(sql);

    // Push, spread: TodoService.push's DeliveryBatches on the lanes, two queues per endpoint.
    const batches = new DeliveryBatches(pool, () => 'bench-history', lanes.lanes);
    const push = await timedLoops(PUSHERS, pushSeconds, (w, n) => {
      const endpoint = pushTargets[(w + n * PUSHERS) % PUSH_ENDPOINTS]!;
      return batches.insert({
        event: { ...OPERATOR_EVENT, endpointId: endpoint.id },
        todo: { endpointId: endpoint.id, queue: n % 4 === 0 ? 'reviews' : 'work', title: `push ${n}`, source: 'operator', kind: 'operator', payload: { n } },
        now: new Date(),
      });
    });

    // Push, hot: every pusher on its own connection, one statement per push, one endpoint and queue.
    const hot = await timedLoops(PUSHERS, pushSeconds, (_w, n) =>
      insertEventAndTodo(
        pool,
        { ...OPERATOR_EVENT, endpointId: hotTarget.id },
        { endpointId: hotTarget.id, queue: 'work', title: `hot ${n}`, source: 'operator', kind: 'operator', payload: { n } },
        new Date(),
        'bench-history',
      ),
    );

    // Claim + complete: the store's drain of a fresh endpoint's queue.
    const v = await vendEndpoint(sql, human.id, { name: `claim-${tag}-${history ? 'on' : 'off'}`, queues: ['work'] }, systemClock.now());
    // The seed is a fixture: its own created buckets would be counted in the check below.
    await setHistory(sql, false);
    await seedPendingTodos(sql, v.endpoint.id, jobs + WARMUP_JOBS);
    await setHistory(sql, history);
    const claim = await storeDrain(pool, lanes.lanes, v.endpoint, WORKERS);

    // Claim + complete by one worker: a statement per claim and per completion, nothing batched,
    // so each pays the triggers alone (what an endpoint with one agent does).
    const v1 = await vendEndpoint(sql, human.id, { name: `serial-${tag}-${history ? 'on' : 'off'}`, queues: ['work'] }, systemClock.now());
    await setHistory(sql, false);
    await seedPendingTodos(sql, v1.endpoint.id, SERIAL_JOBS + WARMUP_JOBS);
    await setHistory(sql, history);
    const serial = await storeDrain(pool, lanes.lanes, v1.endpoint, 1);

    const after = await counted(sql);
    const wrote = { created: after.created - before.created, claimed: after.claimed - before.claimed, completed: after.completed - before.completed };
    const pushed = push.ops + hot.ops;
    // The timed slices are a subset of what ran (warm-up pushes, the loops' last calls): at least that many.
    const expectCreated = history ? wrote.created >= pushed : wrote.created === 0;
    const drained = claim.done + serial.done;
    const expectClaimed = history ? wrote.claimed >= drained && wrote.completed >= drained : wrote.claimed === 0 && wrote.completed === 0;
    if (!expectCreated || !expectClaimed) {
      throw new Error(`history ${history ? 'on' : 'off'}: the buckets counted ${JSON.stringify(wrote)} for ${pushed} timed pushes and ${drained} timed claims`);
    }
    // The history loop folds the deltas each minute, so the table the triggers append to holds a
    // minute's; untimed here (its cost is maintain()'s, in part 2).
    await foldHistoryDeltasUnscoped(sql, new Date(Date.now() + 60_000));
    return { push, hot, claim, serial };
  };

  try {
    // A pair untimed first: the first slices of a run (plans, caches, the JIT) are the slowest.
    for (const history of [true, false]) await measure(history, 1000, 1, 'warm');
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? [true, false] : [false, true];
      const line: string[] = [];
      for (const history of order) {
        const { push, hot, claim, serial } = await measure(history, JOBS, PUSH_SECONDS, String(round));
        out.push.push({ history, ...push });
        out.hot.push({ history, ...hot });
        out.claim.push({ history, ...claim });
        out.serial.push({ history, ...serial });
        line.push(
          `${history ? 'with' : 'without'}: push ${int(rateOf(push))}/s (CPU ${cpuOf(push).toFixed(3)} ms), ` +
            `hot ${int(rateOf(hot))}/s (CPU ${cpuOf(hot).toFixed(3)} ms), ` +
            `claim+complete ${int(rateOf(claim))}/s (p99 ${claim.p99.toFixed(1)} ms, CPU ${cpuOf(claim).toFixed(3)} ms), ` +
            `one worker ${int(rateOf(serial))}/s (${((serial.seconds * 1e6) / serial.done).toFixed(0)} µs a todo)`,
        );
      }
      const r = (xs: { history: boolean }[]) => {
        const pair = xs.slice(-2) as (Slice | (DrainResult & { history: boolean }))[];
        const on = pair.find((x) => x.history)!;
        const off = pair.find((x) => !x.history)!;
        return (rateOf(on) / rateOf(off)).toFixed(3);
      };
      console.log(`round ${round} (${order.map((h) => (h ? 'with' : 'without')).join(', then ')}):\n  ${line.join('\n  ')}\n  with/without: push ${r(out.push)}, hot ${r(out.hot)}, claim ${r(out.claim)}, one worker ${r(out.serial)}`);
    }
  } finally {
    await setHistory(sql, true);
    await Promise.all([pool.end({ timeout: 5 }), lanes.end()]);
  }
  return out;
}

interface PathSummary {
  with_per_second: number;
  without_per_second: number;
  /** Median over the pairs of with/without. */
  ratio: number;
  ratios: number[];
  with_cpu_ms: number;
  without_cpu_ms: number;
  cpu_ratio: number;
}

function summarizePath(xs: readonly (Slice | (DrainResult & { history: boolean }))[]): PathSummary {
  const on = xs.filter((x) => x.history);
  const off = xs.filter((x) => !x.history);
  const ratios = on.map((x, i) => rateOf(x) / rateOf(off[i]!));
  return {
    with_per_second: median(on.map(rateOf)),
    without_per_second: median(off.map(rateOf)),
    ratio: median(ratios),
    ratios,
    with_cpu_ms: median(on.map(cpuOf)),
    without_cpu_ms: median(off.map(cpuOf)),
    cpu_ratio: median(on.map((x, i) => cpuOf(x) / cpuOf(off[i]!))),
  };
}

// ---------------------------------------------------------------------------------------------
// 2. The history at 10,000 endpoints

/**
 * Writes the fixture straight in SQL, in one transaction, the table's indexes dropped and built
 * again after (what a bulk load does; the rows are what the triggers and the loop would have
 * written). `endpoints` endpoints, one agent each, all of one human; endpoint i has 1 + (i % 3)
 * queues (work, reviews, ci: 2 on average). The minute `now` falls in is the newest bucket.
 * - Busy endpoints (one in 1/busy, i % round(1/busy) = 0): a backlog all day, so each queue has a
 *   minute row every minute of the last 24 h (the depth snapshot writes one per live queue), with
 *   created/claimed/completed counts, the claim-wait histogram, rings; an hour row for every hour
 *   of 7 days; 90 minutes of minute rows past the 48 h keep, for the prune to find; and the
 *   triggers' deltas not folded yet: DELTAS_PER_MINUTE rows for the minute that just closed (what
 *   the next fold takes; written again before each timed maintain()) and half that for this one.
 * - The others: a minute row in 60 minutes of the day spread out (a todo came and went), an hour
 *   row in 24 of the week's 168 hours.
 * - Live todos for the snapshot: `todos` pending and a tenth as many claimed, over the busy queues.
 */
async function loadHistory(sql: Sql, humanId: string, now: Date, todos: number): Promise<{ seconds: number; rows: number; bytes: number; busyEndpoints: number; queues: number; liveTodos: number }> {
  const started = performance.now();
  const every = Math.max(1, Math.round(1 / BUSY));
  const minute = new Date(Math.floor(now.getTime() / 60_000) * 60_000);
  const hour = new Date(Math.floor(now.getTime() / 3600_000) * 3600_000);
  await sql.begin(async (tx) => {
    await tx`
      with made as (
        insert into agents (owner_human_id, name)
        select ${humanId}, 'history-' || lpad(g::text, 6, '0') from generate_series(1, ${ENDPOINTS}) g
        returning id, name
      )
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues)
      select m.id, m.name, 'bench:' || m.id::text, 'sbk_bench', (array['work', 'reviews', 'ci'])[1:1 + substr(m.name, 9)::int % 3]
      from made m`;
    await tx`
      create temp table fixture_queues on commit drop as
      select e.id as endpoint_id, q.queue, substr(e.slug, 9)::int as i, substr(e.slug, 9)::int % ${every} = 0 as busy
      from endpoints e cross join lateral unnest(e.scope_queues) as q(queue)
      where e.slug like 'history-%'`;
    await tx`alter table todo_history drop constraint todo_history_pkey`;
    await tx`drop index todo_history_bucket_idx`;
    // The sums per human are counted once at the end (a trigger per insert would carry every row through it).
    await tx`alter table todo_history disable trigger todo_history_human_insert`;
    // Claim-wait histograms: claims of a few seconds to a few minutes, 20 shapes, the k-th for k % 20.
    await tx`
      create temp table fixture_hists on commit drop as
      select k as shape, array_agg(case when b between 8 + k % 5 and 14 + k % 5 then 1 + (b + k) % 4 else 0 end order by b) as hist
      from generate_series(0, 19) k, generate_series(0, 47) b group by k`;
    const hist = (k: string) => tx.unsafe(`(select fh.hist from fixture_hists fh where fh.shape = (${k}) % 20)`);
    // Busy queues: every minute of the day, folded (the counts and the depth's changes).
    await tx`
      insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, failed, dead, pending_change, claimed_change, wait_hist, rings_sent, heard_claim, heard_ack, unheard, digests)
      select 'm', ${minute}::timestamptz - m * interval '1 minute', f.endpoint_id, f.queue,
             1 + (m + f.i) % 4, 1 + (m + f.i) % 3, (m + f.i) % 3, ((m + f.i) % 50 = 0)::int, 0,
             (m * 7 + f.i) % 5 - 2, (m + f.i) % 3 - 1, ${hist('m + f.i')},
             (m + f.i) % 4, (m + f.i) % 3, 0, ((m + f.i) % 40 = 0)::int, 0
      from fixture_queues f cross join generate_series(1, 1439) m
      where f.busy`;
    // Busy queues: 90 minutes of minute rows past the 48 h keep (the prune's work, 10,000 a pass).
    await tx`
      insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, pending_change, claimed_change)
      select 'm', ${minute}::timestamptz - interval '48 hours' - m * interval '1 minute', f.endpoint_id, f.queue, 1, 1, 1, 0, 0
      from fixture_queues f cross join generate_series(1, 90) m where f.busy`;
    // Quiet queues: 60 minutes of the day, one row each.
    await tx`
      insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, pending_change, claimed_change, wait_hist, rings_sent, heard_claim, unheard)
      select 'm', ${minute}::timestamptz - (1 + (g * 24 + f.i) % 1439) * interval '1 minute', f.endpoint_id, f.queue,
             1, 1, 1, (g % 2), 0, ${hist('g + f.i')}, 1, (g % 3 > 0)::int, (g % 3 = 0)::int
      from fixture_queues f cross join generate_series(0, 59) g where not f.busy`;
    // Hour rows: every hour of the week for the busy, 24 of its hours for the others.
    await tx`
      insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, failed, dead, pending_change, claimed_change, wait_hist, rings_sent, heard_claim, heard_ack, unheard, digests)
      select 'h', ${hour}::timestamptz - h * interval '1 hour', f.endpoint_id, f.queue,
             90 + (h + f.i) % 40, 80 + (h + f.i) % 30, 80 + (h + f.i) % 30, (h + f.i) % 3, 0,
             case when f.busy then (h * 7 + f.i) % 5 - 2 else 0 end, case when f.busy then (h + f.i) % 3 - 1 else 0 end,
             ${hist('h + f.i')}, 60 + (h + f.i) % 20, 50 + (h + f.i) % 20, 0, (h + f.i) % 5, (h + f.i) % 2
      from fixture_queues f cross join generate_series(0, 167) h
      where f.busy or (h + f.i) % 7 = 0`;
    await tx`alter table todo_history add primary key (width, endpoint_id, bucket, queue)`;
    await tx`create index todo_history_bucket_idx on todo_history (width, bucket)`;
    await tx`alter table todo_history enable trigger todo_history_human_insert`;
    await tx`select todo_history_human_recount()`;
    // Live todos for the depth snapshot, without the triggers (they are a fixture, not pushes).
    await tx`alter table todos disable trigger todo_history_insert`;
    const [ev] = await tx`insert into events (source, family, trust_mode, verified) values ('operator', 'operator', 'operator', true) returning id`;
    await tx`
      with busy as (select endpoint_id, queue, row_number() over (order by endpoint_id, queue) - 1 as k, count(*) over () as n from fixture_queues where busy)
      insert into todos (id, endpoint_id, queue, source, kind, title, event_id, state, owner, claimed_at, lease_expires_at, attempt, created_at, updated_at)
      select 'td_' || gen_random_uuid(), b.endpoint_id, b.queue, 'operator', 'operator', 'live ' || g, ${ev!.id},
             case when g % 11 = 0 then 'claimed' else 'pending' end,
             case when g % 11 = 0 then 'agent:bench' end, case when g % 11 = 0 then ${now}::timestamptz end,
             case when g % 11 = 0 then ${now}::timestamptz + interval '1 hour' end, (g % 11 = 0)::int,
             ${now}::timestamptz - (g % 3600) * interval '1 second', ${now}
      from generate_series(0, ${Math.round(todos * 1.1)} - 1) g
      join busy b on b.k = g % b.n`;
    await tx`alter table todos enable trigger todo_history_insert`;
  });
  await seedDeltas(sql, now, true);
  await sql`vacuum analyze todo_history`;
  await sql`vacuum analyze todo_history_human`;
  await sql`vacuum analyze todos`;
  await sql`analyze endpoints`;
  await sql`analyze agents`;
  const [c] = await sql<{ rows: number; bytes: number; busy: number; queues: number; live: number }[]>`
    select (select count(*)::int from todo_history) as rows, pg_total_relation_size('todo_history')::float8 as bytes,
           (select count(*)::int from endpoints where slug like 'history-%' and substr(slug, 9)::int % ${every} = 0) as busy,
           (select count(*)::int from endpoints e, unnest(e.scope_queues) where slug like 'history-%') as queues,
           (select count(*)::int from todos where state in ('pending', 'claimed')) as live`;
  return { seconds: (performance.now() - started) / 1000, rows: c!.rows, bytes: c!.bytes, busyEndpoints: c!.busy, queues: c!.queues, liveTodos: c!.live };
}

/** Rows a busy queue's triggers append in a minute (a row per push, claim or completion). */
const DELTAS_PER_MINUTE = 10;

/** The triggers' deltas of the busy queues: a closed minute's (what a fold takes) and, with `current`, half as many of this minute. */
async function seedDeltas(sql: Sql, now: Date, current: boolean): Promise<void> {
  const minute = new Date(Math.floor(now.getTime() / 60_000) * 60_000);
  await sql`
    insert into todo_history_delta (bucket, endpoint_id, queue, created, claimed, completed, pending_change, claimed_change, wait_bin, rings_sent, heard_claim)
    select ${minute}::timestamptz - case when d < ${DELTAS_PER_MINUTE} then interval '1 minute' else interval '0' end, e.id, q.queue,
           (d % 3 = 0)::int, (d % 3 = 1)::int, (d % 3 = 2)::int,
           case d % 3 when 0 then 1 when 1 then -1 else 0 end, case d % 3 when 0 then 0 when 1 then 1 else -1 end,
           case when d % 3 = 1 then 10 + d % 5 end,
           (d % 3 = 0)::int, (d % 3 = 1)::int
    from endpoints e cross join lateral unnest(e.scope_queues) as q(queue)
    cross join generate_series(0, ${current ? Math.floor(DELTAS_PER_MINUTE * 1.5) : DELTAS_PER_MINUTE} - 1) d
    where e.slug like 'history-%' and substr(e.slug, 9)::int % ${Math.max(1, Math.round(1 / BUSY))} = 0`;
}

interface Timed {
  name: string;
  /** `loop`: the history loop's; `page`: what one page of a human with up to 100 endpoints reads; `extreme`: one human's 1,000 or 10,000. */
  scope?: 'loop' | 'page' | 'extreme';
  /** Median ms of the calls. */
  ms: number;
  calls: number;
  /** The statements the last call sent that read todo_history, for EXPLAIN when over the target. */
  statements: ReturnType<typeof capturingPool>['statements'];
  detail?: string;
}

/**
 * Median wall time of `calls` calls of `run` on a pool of one connection that records its
 * statements (the first call, untimed, plans and warms the cache; a read whose first call took
 * over a second is that call alone, to keep the run short).
 */
async function timeRead(
  name: string,
  pool: ReturnType<typeof capturingPool>,
  calls: number,
  run: () => Promise<string | void>,
  /** Untimed, before each call. */
  prepare: () => Promise<void> = async () => {},
): Promise<Timed> {
  await prepare();
  pool.statements.length = 0;
  const w0 = performance.now();
  let detail: string | void;
  try {
    detail = await run();
  } catch (e) {
    // Cut off by READ_TIMEOUT_MS (the one-human extremes): it took longer than that.
    if ((e as { code?: string }).code !== '57014') throw e;
    return { name, ms: performance.now() - w0, calls: 1, statements: [], detail: `cancelled at ${READ_TIMEOUT_MS / 1000} s (statement_timeout): longer than that` };
  }
  const first = performance.now() - w0;
  // A read of seconds is timed once, that first call (planning and a cold cache are little of
  // it), not `calls` times more: the run stays within its minutes.
  const times: number[] = first > 1000 ? [first] : [];
  for (let i = 0; i < (first > 1000 ? 0 : calls); i++) {
    await prepare();
    pool.statements.length = 0;
    const t0 = performance.now();
    detail = await run();
    times.push(performance.now() - t0);
  }
  return { name, ms: median(times), calls: times.length, statements: [...pool.statements].filter((s) => /todo_history/.test(s.query)), detail: detail ?? undefined };
}

/** EXPLAIN (ANALYZE, BUFFERS) of a captured statement, rolled back. */
async function explainBuffers(sql: Sql, st: Timed['statements'][number]): Promise<string[]> {
  const params = st.params.map((p) => (Array.isArray(p) ? `{${p.map((x) => `"${String(x)}"`).join(',')}}` : p instanceof Date ? p.toISOString() : p));
  let plan: string[] = [];
  await sql
    .begin(async (tx) => {
      const rows = await tx.unsafe(`explain (analyze, buffers) ${st.query}`, params as never[]);
      plan = (rows as unknown as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']);
      throw new Error('rolled back');
    })
    .catch((e: unknown) => {
      if (!(e instanceof Error) || e.message !== 'rolled back') throw e;
    });
  return plan;
}

interface Reads {
  load: Awaited<ReturnType<typeof loadHistory>>;
  timed: Timed[];
}

async function reads(url: string, sql: Sql): Promise<Reads> {
  const human = await addHuman(sql, { handle: 'bench-history' });
  const now = new Date();
  const load = await loadHistory(sql, human.id, now, 100_000);
  console.log(
    `\nhistory: ${int(ENDPOINTS)} endpoints (${int(load.busyEndpoints)} busy), ${int(load.queues)} queues, ${int(load.rows)} bucket rows ` +
      `(${(load.bytes / 2 ** 20).toFixed(0)} MiB with indexes), ${int(load.liveTodos)} live todos; loaded in ${load.seconds.toFixed(1)} s`,
  );
  const clock = new ManualClock(now);
  const pool = capturingPool(url);
  // As the product's connections plan (src/db/connect.ts): generic plans, no JIT.
  await pool.sql.unsafe(`set plan_cache_mode = force_generic_plan`);
  await pool.sql.unsafe(`set jit = off`);
  await pool.sql.unsafe(`set statement_timeout = ${READ_TIMEOUT_MS}`);
  const history = new HistoryService({ sql: pool.sql, clock, log: createLogger('silent') });
  const ids = (await sql<{ id: string; slug: string }[]>`select id, slug from endpoints where slug like 'history-%' order by slug`).map((r) => r.id);
  const every = Math.max(1, Math.round(1 / BUSY));
  const busyId = ids[every - 1]!; // history-<every>: busy, with 1 + (every % 3) queues
  const timed: Timed[] = [];
  const show = (t: Timed) => {
    t.scope ??= 'loop';
    timed.push(t);
    console.log(`  ${t.name}: ${ms(t.ms)} ms (median of ${t.calls})${t.detail ? `; ${t.detail}` : ''}${t.ms > TARGET_MS ? '  <- over 200 ms' : ''}`);
  };

  console.log('maintain() (the minute loop, every instance), median ms:');
  // Each pass finds a closed minute of deltas to fold, as the loop does once a minute.
  const closedMinute = () => seedDeltas(sql, now, false);
  show(await timeRead('maintain()', pool, READS, async () => {
    const r = await history.maintain();
    return `${int(r.depthRows)} depth rows, ${int(r.hourRows)} hour rows, ${int(r.pruned)} pruned`;
  }, closedMinute));
  show(await timeRead('  foldDeltas', pool, READS, async () => {
    const folded = await foldHistoryDeltasUnscoped(pool.sql, now);
    return `${int(folded.rows)} minute rows, ${int(folded.queues)} depth rows`;
  }, closedMinute));
  show(await timeRead('  prune', pool, READS, async () => `${int(await pruneHistoryUnscoped(pool.sql, now, 10_000))} rows`));

  console.log("reads, median ms (in process: the statement and the shaping, as a page's handler spends them):");
  const page = (t: Timed) => show({ ...t, scope: 'page' });
  const extreme = (t: Timed) => show({ ...t, scope: 'extreme' });
  for (const range of ['1h', '24h', '7d'] as const) {
    page(await timeRead(`history(1 busy endpoint, ${range})`, pool, READS, async () => `${(await history.history(human.id, [busyId], range)).points.length} points`));
  }
  const sizes = [12, 100, 1000, ids.length].filter((n, i, xs) => n <= ids.length && xs.indexOf(n) === i);
  for (const n of sizes) {
    (n <= 100 ? page : extreme)(await timeRead(`pendingSparklines(${int(n)} endpoints)`, pool, READS, async () => `${(await history.pendingSparklines(human.id, ids.slice(0, n))).size} series`));
  }
  // The todos page's chart: all of the human's endpoints (the sums per human), or one of them.
  for (const range of ['1h', '24h', '7d'] as const) {
    page(await timeRead(`byQueue(all ${int(ids.length)} endpoints, ${range})`, pool, READS, async () => `${Object.keys((await history.byQueue(human.id, range)).queues).length} queues`));
    page(await timeRead(`byQueue(1 busy endpoint, ${range})`, pool, READS, async () => `${Object.keys((await history.byQueue(human.id, range, { endpointId: busyId })).queues).length} queues`));
  }
  for (const t of timed.filter((x) => x.ms > TARGET_MS && x.scope === 'page')) {
    for (const st of t.statements) {
      console.log(`\nEXPLAIN (ANALYZE, BUFFERS) of ${t.name}, rolled back:`);
      for (const line of await explainBuffers(sql, st)) console.log(`  ${line.length > 160 ? `${line.slice(0, 160)}…` : line}`);
    }
  }

  // The board's pages over HTTP for two humans of that database: one with a dozen of its
  // endpoints, one with a hundred (each a tenth busy). The other endpoints go to tenants of a
  // dozen each first, and the statistics are taken again: a deployment of 10,000 endpoints has
  // many owners, and a plan for one human's todos should not think each owns them all.
  console.log('board pages over HTTP on loopback (the app in this process, its loops off), median ms of the response read whole:');
  const dozen = await addHuman(sql, { handle: 'bench-dozen' });
  const hundred = await addHuman(sql, { handle: 'bench-hundred' });
  await sql`
    with tenants as (
      insert into humans (handle) select 'bench-tenant-' || g from generate_series(1, ${Math.ceil(Math.max(0, ids.length - 112) / 12)}) g returning id, substr(handle, 14)::int as k
    )
    update agents a set owner_human_id = case when o.i <= 12 then ${dozen.id}::uuid when o.i <= 112 then ${hundred.id}::uuid else t.id end
    from (select agent_id, substr(slug, 9)::int as i from endpoints where slug like 'history-%') o
    left join tenants t on t.k = (o.i - 113) / 12 + 1
    where a.id = o.agent_id`;
  // Owners changed by hand: the sums per human counted again (migration 0035).
  await sql`select todo_history_human_recount()`;
  await sql`analyze agents`;
  await sql`analyze endpoints`;
  await sql`analyze todo_history_human`;
  const app = await startBenchApp(url);
  try {
    for (const [handle, from, n] of [['bench-dozen', 0, 12], ['bench-hundred', 12, 100]] as const) {
      const mine = ids.slice(from, from + n);
      const busy = mine[mine.length - 1 - ((from + mine.length) % every)]!;
      const { token } = await createLoginLink(sql, handle, new Date());
      const signIn = await fetch(`${app.baseUrl}/login/${token}`, { method: 'POST', redirect: 'manual' });
      const cookie = /^sb_session=[^;]*/.exec(signIn.headers.get('set-cookie') ?? '')?.[0];
      if (!cookie) throw new Error(`no session cookie for ${handle} (${signIn.status})`);
      for (const path of ['/', `/endpoints/${busy}`, `/endpoints/${busy}?range=7d`, '/todos', '/endpoints/sparklines.json', `/endpoints/${busy}/history.json`, '/todos/history.json']) {
        let bytes = 0;
        page(
          await timeRead(`GET ${path.replace(busy, '{busy}')} (${n} endpoints)`, pool, READS, async () => {
            const res = await fetch(`${app.baseUrl}${path}`, { headers: { cookie } });
            bytes = (await res.arrayBuffer()).byteLength;
            if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`);
            return `${int(bytes)} B`;
          }),
        );
      }
    }
  } finally {
    await app.stop();
  }
  await pool.sql.end({ timeout: 5 });
  return { load, timed };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  const started = performance.now();
  let json: (() => void) | undefined;
  await withBenchDatabase(Math.max(PUSHERS, WORKERS) + 12, async ({ cluster, sql, pgVersion }) => {
    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, load average ${loadBefore.map((x) => x.toFixed(2)).join(' ')}`);
    let t: Throughput | undefined;
    let tp: Record<'push' | 'hot' | 'claim' | 'serial', PathSummary> | undefined;
    if (ONLY !== 'reads') {
      console.log(
        `\n1. throughput with and without the history triggers, ${ROUNDS} pairs in alternating order: push (${PUSHERS} pushers over ${PUSH_ENDPOINTS} endpoints, DeliveryBatches on the lanes, ${PUSH_SECONDS} s), ` +
          `hot push (${PUSHERS} connections, one endpoint and queue, a statement per push, ${PUSH_SECONDS} s), claim + complete (${int(JOBS)} todos, ${WORKERS} workers, in process), claim + complete by one worker (${int(SERIAL_JOBS)} todos)`,
      );
      t = await throughput(cluster.url, sql);
      tp = { push: summarizePath(t.push), hot: summarizePath(t.hot), claim: summarizePath(t.claim), serial: summarizePath(t.serial) };
      const label = { push: 'push', hot: 'hot push (one endpoint and queue)', claim: 'claim + complete', serial: 'claim + complete, one worker' };
      console.table(
        Object.entries(tp).map(([k, s]) => ({
          path: label[k as keyof typeof label],
          'with /s': int(s.with_per_second),
          'without /s': int(s.without_per_second),
          'median with/without': s.ratio.toFixed(3),
          'cost': pct(s.ratio),
          'pairs': s.ratios.map((r) => r.toFixed(3)).join(' '),
          'CPU ms/op with': s.with_cpu_ms.toFixed(3),
          'CPU ms/op without': s.without_cpu_ms.toFixed(3),
          'CPU with/without': s.cpu_ratio.toFixed(3),
        })),
      );
    }
    let r: Reads | undefined;
    if (ONLY !== 'throughput') {
      console.log(`\n2. the history at ${int(ENDPOINTS)} endpoints`);
      r = await reads(cluster.url, sql);
    }
    const seconds = (performance.now() - started) / 1000;
    const loadAfter = os.loadavg();
    console.log(`\n${seconds.toFixed(0)} s; load average before ${loadBefore.map((x) => x.toFixed(2)).join(' ')}, after ${loadAfter.map((x) => x.toFixed(2)).join(' ')}`);
    const verdicts: string[] = [];
    if (tp) {
      for (const [k, s] of Object.entries(tp)) verdicts.push(`${k}: history costs ${((1 - s.ratio) * 100).toFixed(1)} % (target <= ${TARGET_COST * 100} %): ${1 - s.ratio <= TARGET_COST ? 'met' : 'NOT met'}`);
    }
    if (r) {
      const over = (scope: Timed['scope']) => r.timed.filter((x) => x.scope === scope && x.ms > TARGET_MS).map((x) => `${x.name} ${ms(x.ms)} ms`);
      verdicts.push(`page reads and pages (up to 100 endpoints) over ${TARGET_MS} ms: ${over('page').join('; ') || 'none'}`);
      verdicts.push(`one human's 1,000 or ${int(ENDPOINTS)} endpoints over ${TARGET_MS} ms: ${over('extreme').join('; ') || 'none'}`);
    }
    for (const v of verdicts) console.log(v);

    summarize('history', pgVersion, [
      ...(tp
        ? (['push', 'hot', 'claim', 'serial'] as const).map((k) => ({
            figure: `history triggers, ${{ push: 'push', hot: 'hot push (one endpoint and queue)', claim: 'claim + complete', serial: 'claim + complete, one worker' }[k]}: with/without (median of ${ROUNDS} pairs)`,
            value: `${tp![k].ratio.toFixed(3)} (${int(tp![k].with_per_second)} against ${int(tp![k].without_per_second)}/s)`,
            target: `>= ${(1 - TARGET_COST).toFixed(2)}`,
            met: 1 - tp![k].ratio <= TARGET_COST,
          }))
        : []),
      ...(r
        ? r.timed
            .filter((x) => !x.name.startsWith('  '))
            .map((x) => ({ figure: `history at ${int(ENDPOINTS)} endpoints: ${x.name}`, value: `${ms(x.ms)} ms`, ...(x.scope === 'page' ? { target: `< ${TARGET_MS} ms`, met: x.ms < TARGET_MS } : {}) }))
        : []),
    ]);
    if (values.json) {
      json = () =>
        printJsonLast('history', pgVersion, {
          seconds: Math.round(seconds),
          load_before: loadBefore.map((x) => figure(x)),
          load_after: loadAfter.map((x) => figure(x)),
          options: { rounds: ROUNDS, jobs: JOBS, workers: WORKERS, pushers: PUSHERS, push_endpoints: PUSH_ENDPOINTS, push_seconds: PUSH_SECONDS, endpoints: ENDPOINTS, busy: BUSY, reads: READS },
          ...(tp && t
            ? {
                throughput: Object.fromEntries(
                  Object.entries(tp).map(([k, s]) => [
                    k,
                    {
                      with_per_second: figure(s.with_per_second, 0),
                      without_per_second: figure(s.without_per_second, 0),
                      ratio: figure(s.ratio, 3),
                      ratios: s.ratios.map((x) => figure(x, 3)),
                      with_cpu_ms_per_op: figure(s.with_cpu_ms, 3),
                      without_cpu_ms_per_op: figure(s.without_cpu_ms, 3),
                      cpu_ratio: figure(s.cpu_ratio, 3),
                      target_met: 1 - s.ratio <= TARGET_COST,
                    },
                  ]),
                ),
                rounds_detail: (['push', 'hot', 'claim', 'serial'] as const).flatMap((k) =>
                  (t![k] as (Slice | (DrainResult & { history: boolean }))[]).map((x, i) => ({
                    path: k,
                    pair: Math.floor(i / 2) + 1,
                    history: x.history,
                    per_second: figure(rateOf(x), 0),
                    node_cpu_ms_per_op: figure(x.cpu!.node, 3),
                    postgres_cpu_ms_per_op: figure(x.cpu!.pg, 3),
                  })),
                ),
              }
            : {}),
          ...(r
            ? {
                history_rows: r.load.rows,
                history_mib: figure(r.load.bytes / 2 ** 20, 0),
                busy_endpoints: r.load.busyEndpoints,
                queues: r.load.queues,
                live_todos: r.load.liveTodos,
                load_seconds: figure(r.load.seconds, 1),
                reads_ms: Object.fromEntries(r.timed.map((x) => [x.name.trim(), figure(x.ms, 1)])),
                reads_detail: r.timed.map((x) => ({ name: x.name.trim(), scope: x.scope, ms: figure(x.ms, 1), calls: x.calls, detail: x.detail ?? null })),
                page_reads_over_target: r.timed.filter((x) => x.scope === 'page' && x.ms > TARGET_MS).map((x) => x.name),
                extreme_reads_over_target: r.timed.filter((x) => x.scope === 'extreme' && x.ms > TARGET_MS).map((x) => x.name),
              }
            : {}),
        });
    }
  });
  json?.();
}

await main();

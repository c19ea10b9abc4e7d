/**
 * The background loops at scale (issue 40 item 3): 100,000 endpoints of one human and 1,000,000
 * pending todos, with what a deployment of that size keeps around them (bench/loops-data.ts: 500,000
 * finished todos, 1.5 M events, a million ring records, 20,000 sessions, presence history, queue
 * history, OAuth rows, replay keys). Times one pass of each loop, the median of `--runs`:
 *
 *  - the heartbeat sweep's pick-and-charge over `--receivers` endpoints with a session here
 *    (store chargeDueRingsUnscoped, what services/maintenance/doorbell-sweep.ts calls);
 *  - the presence evaluator (PresenceService.evaluate over its watchlist): a quiet pass, and a
 *    pass at the next shift boundary of the most shifts (its transitions claimed, then put back);
 *  - the unheard sweep's two statements (store markUnheardRingsUnscoped, markUnheardSessionsUnscoped);
 *  - a retention pass (services/maintenance/retention.ts: finished todos and their events, orphan
 *    events, replay keys, OAuth rows, presence history), SWITCHBOARD_RETENTION's default 720h;
 *  - the history loop's pass (HistoryService.maintain: fold a closed minute's deltas into minutes
 *    and hours, fold the depth changes, prune past the keep);
 *  - the board's endpoints page and one endpoint's page over HTTP (median of `--runs` GETs, bytes).
 *
 * The passes that write run in a transaction that is rolled back, so every run sees the same rows
 * (the sweep commits, as the loop does: each run charges the next three; the evaluator's busy pass
 * is undone by hand). The passes run on one connection with the product's settings
 * (src/db/connect.ts: prepared statements planned generic, no JIT), which records every statement
 * of the last run; each is then prepared again with its parameter types, planned generic and run
 * under EXPLAIN (ANALYZE, BUFFERS), rolled back. The board's pages are served by a Switchboard
 * instance with its loops off; their statements come from the server's log of one more GET
 * (log_min_duration_statement = 0 meanwhile). Each statement's summary gives its time, top node,
 * rows, buffers and every scan, flagging a sequential scan of a table over 10,000 rows.
 *
 * Results: bench/results/loops-<YYYY-MM-DD-HHMM>.json (a whole run on data it built; not with
 * --only or --url); with --json the same object is the last line of stdout. A run takes about 5
 * minutes on 2 cores, 3.5 of them loading.
 *
 *   npm run bench:loops -- [--endpoints 100000] [--pending 1000000] [--receivers 20000] [--shifted 0.2]
 *     [--runs 5] [--json] [--only sweep,presence,unheard,retention,history,board] [--keep] [--url URL]
 *
 * --keep keeps the database after the run, this process waiting (kill it to stop the database; a
 * test run's clean-up stops a cluster whose owner is gone); --url runs passes again on a database
 * a --keep run loaded (its sizes are its own); --only runs some of the loops.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { connect, type Sql } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrate.ts';
import { nextShiftBoundary, parseShift } from '../src/domain/presence/index.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { createLogger } from '../src/lib/log.ts';
import { HistoryService } from '../src/services/history.ts';
import { retentionPass } from '../src/services/maintenance/retention.ts';
import { newStandalonePresence } from '../src/services/presence.ts';
import { markUnheardRingsUnscoped } from '../src/store/rings.ts';
import { markUnheardSessionsUnscoped } from '../src/store/sessions.ts';
import { chargeDueRingsUnscoped } from '../src/store/todos/index.ts';
import { startThrowawayCluster, type RunningCluster } from '../test/support/throwaway-cluster.ts';
import { benchCommit, printJsonLast, startBenchApp, type CapturedStatement } from './lib.ts';
import { DEEP_ENDPOINT, DEFAULT_SIZES, RETENTION_MS, SHIFTS, loadLoopData, type LoopSizes } from './loops-data.ts';
import { createLoginLink } from '../src/store/web-sessions.ts';

const { values } = parseArgs({
  options: {
    endpoints: { type: 'string', default: String(DEFAULT_SIZES.endpoints) },
    pending: { type: 'string', default: String(DEFAULT_SIZES.pending) },
    receivers: { type: 'string', default: String(DEFAULT_SIZES.receivers) },
    shifted: { type: 'string', default: String(DEFAULT_SIZES.shifted) },
    runs: { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    url: { type: 'string' },
    only: { type: 'string' },
  },
});
/** --only sweep,presence,unheard,retention,history,board: a subset, for work on one loop. */
const ONLY = values.only ? new Set(values.only.split(',')) : null;
const runs = (part: string) => ONLY === null || ONLY.has(part);
const RUNS = Number(values.runs);
const TARGET_MS = 1000;
/** A sequential scan of a table with more rows than this is flagged. */
const BIG_TABLE_ROWS = 10_000;
const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => (x < 10 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : Math.round(x).toLocaleString('en'));
const int = (x: number) => Math.round(x).toLocaleString('en');

class RolledBack extends Error {}

/** Runs `pass` in a transaction that is rolled back; answers its time, ms (the BEGIN and ROLLBACK not counted). */
async function rolledBack(sql: Sql, pass: (tx: Sql) => Promise<unknown>): Promise<number> {
  let took = 0;
  await sql
    .begin(async (tx) => {
      const t0 = performance.now();
      await pass(tx as unknown as Sql);
      took = performance.now() - t0;
      throw new RolledBack();
    })
    .catch((e: unknown) => {
      if (!(e instanceof RolledBack)) throw e;
    });
  return took;
}

interface ScanSummary {
  node: string;
  relation: string | null;
  index: string | null;
  rows: number;
  loops: number;
}
interface StatementPlan {
  statement: string;
  ms: number;
  top: string;
  rows: number;
  sharedHit: number;
  sharedRead: number;
  scans: ScanSummary[];
  /** Sequential scans of tables over BIG_TABLE_ROWS rows. */
  bigSeqScans: string[];
  text: string[];
}

const JSON_TYPES = new Set([114, 3802]);
const quote = (x: string) => `'${x.replace(/'/g, "''")}'`;
/** A recorded parameter as a SQL literal for EXECUTE (untyped: the prepared statement's parameter types apply). */
const literalOf = (p: unknown, type: number): string =>
  p === null || p === undefined ? 'null'
  : JSON_TYPES.has(type) ? quote(typeof p === 'string' ? p : JSON.stringify(p))
  : Array.isArray(p) ? quote(`{${p.map((x) => (x === null ? 'NULL' : `"${String(x).replace(/["\\]/g, (c) => `\\${c}`)}"`)).join(',')}}`)
  : p instanceof Date ? quote(p.toISOString())
  : typeof p === 'object' ? quote(JSON.stringify(p))
  : quote(String(p));

let probes = 0;
/** EXPLAIN ANALYZE of `st` as the product runs it: prepared with its parameter types, planned generic (src/db/connect.ts), in `tx`. */
async function explainAsSent(tx: Sql, st: CapturedStatement, options: string): Promise<unknown[]> {
  await tx`set local plan_cache_mode = force_generic_plan`;
  await tx`set local jit = off`;
  // The driver's parameter types; where it left any to the server (a statement from the log), all are.
  const names = st.types.length === 0 || st.types.includes(0) ? [] : (await tx<{ n: string }[]>`select format_type(t, null) as n from unnest(${tx.array(st.types)}::oid[]) with ordinality u(t, i) order by i`).map((r) => r.n);
  const name = `loops_probe_${++probes}`;
  await tx.unsafe(`prepare ${name}${names.length ? `(${names.join(', ')})` : ''} as ${st.query}`);
  const rows = await tx.unsafe(`explain (${options}) execute ${name}${st.params.length ? `(${st.params.map((p, i) => literalOf(p, st.types[i] ?? 0)).join(', ')})` : ''}`);
  await tx.unsafe(`deallocate ${name}`);
  return rows as unknown[];
}

/** EXPLAIN (ANALYZE, BUFFERS) of one recorded statement, generic as the product plans it, rolled back, summarized. */
async function planOf(sql: Sql, st: CapturedStatement, bigTables: Set<string>): Promise<StatementPlan> {
  let plan: StatementPlan | null = null;
  await sql
    .begin(async (tx) => {
      const [row] = (await explainAsSent(tx as unknown as Sql, st, 'analyze, buffers, format json')) as Record<string, unknown>[];
      const root = (row!['QUERY PLAN'] as { Plan: Record<string, unknown>; 'Execution Time': number }[])[0]!;
      const scans: ScanSummary[] = [];
      const walk = (n: Record<string, unknown>) => {
        const type = n['Node Type'] as string;
        if (/Scan$/.test(type) && (n['Relation Name'] || n['Index Name']))
          scans.push({ node: type, relation: (n['Relation Name'] as string) ?? null, index: (n['Index Name'] as string) ?? null, rows: n['Actual Rows'] as number, loops: n['Actual Loops'] as number });
        for (const c of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(c);
      };
      walk(root.Plan);
      plan = {
        statement: st.query.replace(/\s+/g, ' ').trim().slice(0, 160),
        ms: root['Execution Time'],
        top: `${root.Plan['Node Type'] as string}${root.Plan['Operation'] ? ` (${root.Plan['Operation'] as string})` : ''}`,
        rows: root.Plan['Actual Rows'] as number,
        sharedHit: (root.Plan['Shared Hit Blocks'] as number) ?? 0,
        sharedRead: (root.Plan['Shared Read Blocks'] as number) ?? 0,
        scans,
        bigSeqScans: scans.filter((s) => s.node === 'Seq Scan' && s.relation !== null && bigTables.has(s.relation)).map((s) => s.relation!),
        text: [],
      };
      throw new RolledBack();
    })
    .catch((e: unknown) => {
      if (!(e instanceof RolledBack)) throw e;
    });
  // The text form (for the report) in a transaction of its own: the first one's writes are undone.
  await sql
    .begin(async (tx) => {
      const text = (await explainAsSent(tx as unknown as Sql, st, 'analyze, buffers, costs off, timing off')) as { 'QUERY PLAN': string }[];
      plan!.text = text.map((r) => r['QUERY PLAN']);
      throw new RolledBack();
    })
    .catch((e: unknown) => {
      if (!(e instanceof RolledBack)) throw e;
    });
  return plan!;
}

/**
 * One connection that records every statement it sends (bench/lib.ts capturingPool), with the
 * product's own connection settings (src/db/connect.ts): prepared statements planned generic, no JIT.
 */
function productPool(url: string): { sql: Sql; statements: CapturedStatement[] } {
  const statements: CapturedStatement[] = [];
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: 'switchboard-bench-loops', plan_cache_mode: 'force_generic_plan', jit: 'off' },
    debug: (_conn: number, query: string, params: unknown[], types: number[]) => statements.push({ query, params: [...params], types: [...types] }),
  }) as unknown as Sql;
  return { sql, statements };
}

interface LoopResult {
  loop: string;
  what: string;
  runs_ms: number[];
  median_ms: number;
  /** What the pass did (rows charged, claimed, deleted, written). */
  work: Record<string, number>;
  statements: StatementPlan[];
}

async function main(): Promise<void> {
  let cluster: RunningCluster | null = null;
  let url = values.url;
  if (!url) {
    cluster = await startThrowawayCluster({ prefer: 'system' });
    url = cluster.url;
  }
  const sql = connect(url, { max: 4 });
  const pool = productPool(url);
  const log = createLogger('silent');
  try {
    const pgVersion = (await sql`show server_version`)[0]!.server_version as string;
    let sizes: LoopSizes;
    let loadSeconds: number | null = null;
    let now: Date;
    let humanId: string;
    if (cluster) {
      await migrate(sql);
      sizes = {
        ...DEFAULT_SIZES,
        endpoints: Number(values.endpoints),
        pending: Number(values.pending),
        receivers: Number(values.receivers),
        shifted: Number(values.shifted),
      };
      now = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 20_000);
      const loaded = await loadLoopData(sql, sizes, now);
      loadSeconds = loaded.seconds;
      humanId = loaded.humanId;
      await sql`create table bench_loops (now timestamptz, human_id uuid, sizes jsonb)`;
      await sql`insert into bench_loops values (${now}, ${humanId}, ${sql.json(sizes as never)})`;
    } else {
      const [meta] = await sql<{ now: Date; human_id: string; sizes: LoopSizes }[]>`select * from bench_loops`;
      ({ now, human_id: humanId, sizes } = meta!);
    }
    const counts = await sql<{ relname: string; n: number; bytes: number }[]>`
      select c.relname, c.reltuples::float8 as n, pg_total_relation_size(c.oid)::float8 as bytes
      from pg_class c join pg_namespace s on s.oid = c.relnamespace
      where s.nspname = 'public' and c.relkind = 'r' order by c.reltuples desc`;
    const bigTables = new Set(counts.filter((c) => c.n > BIG_TABLE_ROWS).map((c) => c.relname));
    const tableRows = Object.fromEntries(counts.filter((c) => c.n > 0).map((c) => [c.relname, Math.round(c.n)]));
    console.log(
      `cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}; ${int(sizes.endpoints)} endpoints of one human, ${int(sizes.pending)} pending todos` +
        (loadSeconds !== null ? ` (loaded in ${loadSeconds.toFixed(0)} s)` : ' (reused database)') +
        `; ${RUNS} runs per loop, median`,
    );
    console.log(Object.entries(tableRows).map(([t, n]) => `${t} ${int(n)}`).join(', '));

    const results: LoopResult[] = [];
    /** Times `runs` passes, recording the last one's statements, and plans them. */
    const measure = async (
      loop: string,
      what: string,
      pass: (sql: Sql, last: boolean) => Promise<{ ms: number; work: Record<string, number> }>,
      keep: (st: CapturedStatement) => boolean = () => true,
    ): Promise<LoopResult> => {
      const runs: number[] = [];
      let work: Record<string, number> = {};
      for (let i = 0; i < RUNS; i++) {
        const last = i === RUNS - 1;
        if (last) pool.statements.length = 0;
        const r = await pass(pool.sql, last);
        runs.push(r.ms);
        work = r.work;
      }
      const recorded = pool.statements.filter((st) => !/^\s*(begin|rollback|commit|select 1)\b/i.test(st.query) && keep(st));
      const statements: StatementPlan[] = [];
      for (const st of recorded) statements.push(await planOf(sql, st, bigTables));
      const result = { loop, what, runs_ms: runs.map((x) => Number(x.toFixed(2))), median_ms: Number(median(runs).toFixed(2)), work, statements };
      results.push(result);
      report(result);
      return result;
    };

    // 1. The heartbeat sweep: pick and charge at most 3 due todos among the receivers' pending ones.
    if (runs('sweep')) {
    const receivers = (await sql.unsafe(`select md5('e' || i::text)::uuid as id from generate_series(1, ${sizes.receivers}) i`)).map((r) => r.id as string);
    await measure('heartbeat sweep', `chargeDueRingsUnscoped over ${int(receivers.length)} receivers (the deep and ${int(receivers.length / 100)} busy endpoints among them)`, async (p) => {
      // Its own transaction (it commits, as the loop does: each run charges the next 3).
      const t0 = performance.now();
      const charged = (await chargeDueRingsUnscoped(p, receivers, now)).length;
      return { ms: performance.now() - t0, work: { charged } };
    });

    }

    // 2. The presence evaluator: quiet, then at the next boundary of the most shifts.
    if (runs('presence')) {
    const clock = new ManualClock(new Date(now.getTime() - 60_000));
    const presence = newStandalonePresence({ sql: pool.sql, clock, log });
    await presence.evaluate(); // settle: presence_seen as the shifts say
    const quietAt = now;
    await measure('presence evaluator, quiet', 'PresenceService.evaluate over the watchlist, nothing due', async () => {
      clock.set(quietAt);
      const t0 = performance.now();
      const claimed = await presence.evaluate();
      return { ms: performance.now() - t0, work: { claimed, watched: (await sql`select count(*)::int as n from endpoints where shift is not null or presence_override is not null or presence_seen <> 'in'`)[0]!.n as number } };
    });
    const boundary = busiestBoundary(now);
    await measure('presence evaluator, shift boundary', `PresenceService.evaluate at ${boundary.at.toISOString()} (${boundary.shifts} of ${SHIFTS.length} shifts change)`, async () => {
      clock.set(new Date(boundary.at.getTime() + 5_000));
      const t0 = performance.now();
      const claimed = await presence.evaluate();
      const took = performance.now() - t0;
      // Undo: the transitions go back to unclaimed, their history rows away.
      await sql`
        with undone as (delete from presence_history where at = ${clock.now()} returning endpoint_id, from_presence)
        update endpoints e set presence_seen = u.from_presence from undone u where e.id = u.endpoint_id`;
      return { ms: took, work: { claimed } };
    });

    }

    // 3. The unheard sweep.
    if (runs('unheard'))
    await measure('unheard sweep', 'markUnheardRingsUnscoped then markUnheardSessionsUnscoped', async (p) => {
      let unheard = 0;
      let sessions = 0;
      const took = await rolledBack(p, async (tx) => {
        unheard = (await markUnheardRingsUnscoped(tx, now)).unheard.length;
        sessions = (await markUnheardSessionsUnscoped(tx)).length;
      });
      return { ms: took, work: { unheard, sessions } };
    });

    // 4. Retention.
    if (runs('retention'))
    await measure('retention', 'retentionPass, SWITCHBOARD_RETENTION 720h', async (p) => {
      let out: Record<string, number> = {};
      const took = await rolledBack(p, async (tx) => {
        const r = await retentionPass({ sql: tx, clock: new ManualClock(now), log, retentionMs: RETENTION_MS });
        out = { todos: r.todos, events: r.events, replayKeys: r.replayKeys, oauth: r.oauth, presenceHistory: r.presenceHistory };
      });
      return { ms: took, work: out };
    });

    // 5. The history loop.
    if (runs('history'))
    await measure('history loop', 'HistoryService.maintain: fold the last minute (into minutes and hours), fold depth changes, prune', async (p) => {
      let out: Record<string, number> = {};
      const took = await rolledBack(p, async (tx) => {
        out = await new HistoryService({ sql: tx, clock: new ManualClock(now), log }).maintain();
      });
      return { ms: took, work: out };
    });

    // 6. The board: the endpoints page and the deep endpoint's page.
    const board = runs('board') ? await boardPages(url, humanId, bigTables) : [];

    const over = results.filter((r) => r.median_ms >= TARGET_MS).map((r) => r.loop);
    const seq = [
      ...results.flatMap((r) => r.statements.flatMap((s) => s.bigSeqScans.map((t) => `${r.loop}: ${t}`))),
      ...board.flatMap((b) => b.statements.flatMap((s) => s.bigSeqScans.map((t) => `board ${b.page}: ${t}`))),
    ];
    console.log(`\nTarget: every pass under ${TARGET_MS} ms, no sequential scan of a big table. ${over.length === 0 ? 'Every loop met the time' : `Over: ${over.join(', ')}`}; ${seq.length === 0 ? 'no big sequential scan.' : `sequential scans: ${seq.join('; ')}.`}`);

    const stamp = new Date().toISOString().slice(0, 16).replace('T', '-').replace(':', '');
    const out = {
      bench: 'loops',
      commit: benchCommit(),
      at: new Date().toISOString(),
      machine: { cores: os.availableParallelism(), loadAverage: os.loadavg().map((x) => Number(x.toFixed(2))), memoryGiB: Math.round(os.totalmem() / 2 ** 30) },
      postgres: pgVersion,
      sizes,
      load_seconds: loadSeconds,
      table_rows: tableRows,
      runs: RUNS,
      target_ms: TARGET_MS,
      loops: results.map((r) => ({ ...r, statements: r.statements.map(({ text: _text, ...s }) => s) })),
      board: board.map((b) => ({ ...b, statements: b.statements.map(({ text: _text, ...st }) => st) })),
      target_met: over.length === 0 && board.every((b) => b.median_ms < TARGET_MS),
      big_seq_scans: seq,
    };
    // Only a whole run on data it built itself is recorded.
    if (ONLY === null && cluster) {
      mkdirSync(path.join(BENCH_DIR, 'results'), { recursive: true });
      const file = path.join(BENCH_DIR, 'results', `loops-${stamp}.json`);
      writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
      console.log(`written ${path.relative(process.cwd(), file)}`);
    }
    if (values.json) printJsonLast('loops', pgVersion, out);
  } finally {
    await pool.sql.end({ timeout: 5 });
    await sql.end({ timeout: 5 });
    if (cluster && values.keep) {
      // This process stays, owning the cluster (a test run's clean-up stops clusters whose owner is gone).
      console.error(`kept: ${cluster.url}; rerun with --url ${cluster.url}; stop with kill ${process.pid} (SIGTERM or SIGINT stops the cluster)`);
      const held = cluster;
      await new Promise<void>((resolve) => {
        const stop = () => void held.stop().then(resolve, resolve);
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        setInterval(() => {}, 1 << 30);
      });
      process.exit(0);
    } else if (cluster) await cluster.stop();
  }
}

function report(r: LoopResult, statementsOnly = false): void {
  if (!statementsOnly) console.log(`\n${r.loop}: median ${ms(r.median_ms)} ms (runs ${r.runs_ms.map(ms).join(', ')}); ${r.what}; did ${JSON.stringify(r.work)}`);
  for (const [i, s] of r.statements.entries()) {
    const scans = s.scans.map((x) => `${x.node === 'Seq Scan' ? 'SEQ ' : ''}${x.index ?? x.relation}${x.index && x.relation ? `(${x.relation})` : ''} ${int(x.rows)}${x.loops > 1 ? `x${int(x.loops)}` : ''}`).join(', ');
    console.log(`  ${i + 1}. ${ms(s.ms)} ms, ${s.top}, ${int(s.rows)} rows, buffers hit ${int(s.sharedHit)} read ${int(s.sharedRead)}; scans: ${scans}${s.bigSeqScans.length ? `  <-- sequential scan of ${s.bigSeqScans.join(', ')}` : ''}`);
    console.log(`     ${s.statement}`);
    if (s.bigSeqScans.length || s.ms > 200) for (const line of s.text) console.log(`       ${line.length > 150 ? `${line.slice(0, 150)}…` : line}`);
  }
}

/** The instant after `from` (within a week) at which the most of SHIFTS start or end. */
function busiestBoundary(from: Date): { at: Date; shifts: number } {
  const at = new Map<number, number>();
  for (const s of SHIFTS) {
    let t = from;
    for (let i = 0; i < 30; i++) {
      const next = nextShiftBoundary(parseShift(s), t);
      if (!next || next.getTime() > from.getTime() + 7 * 86_400_000) break;
      at.set(next.getTime(), (at.get(next.getTime()) ?? 0) + 1);
      t = new Date(next.getTime() + 1000);
    }
  }
  const [best] = [...at.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  return { at: new Date(best![0]), shifts: best![1] };
}

interface PageResult {
  page: string;
  path: string;
  status: number;
  bytes: number;
  runs_ms: number[];
  median_ms: number;
  /** The statements one GET of the page sent, from the server's log, slowest first, each planned generic. */
  statements: StatementPlan[];
}

/** The server's log of a throwaway cluster: beside its data directory (test/support/throwaway-cluster.ts). */
async function serverLogOf(sql: Sql): Promise<string> {
  const [row] = await sql<{ dir: string }[]>`select current_setting('data_directory') as dir`;
  return path.join(path.dirname(row!.dir), 'postgres.log');
}

/**
 * The statements the server ran while `run` ran, with their durations and parameters, from its log
 * (log_min_duration_statement = 0 meanwhile, turned back after): what a page sent, as it sent it.
 */
async function loggedStatements(sql: Sql, run: () => Promise<void>): Promise<{ ms: number; query: string; params: (string | null)[] }[]> {
  const log = await serverLogOf(sql);
  await sql`alter system set log_min_duration_statement = 0`;
  await sql`select pg_reload_conf()`;
  await new Promise((r) => setTimeout(r, 300));
  const from = statSync(log).size;
  try {
    await run();
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    await sql`alter system reset log_min_duration_statement`;
    await sql`select pg_reload_conf()`;
  }
  const text = readFileSync(log, 'utf8').slice(from);
  const records = text.split(/\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)/);
  const out: { ms: number; query: string; params: (string | null)[] }[] = [];
  for (let i = 0; i < records.length; i++) {
    const m = /LOG:\s+duration: ([\d.]+) ms\s+execute [^:]*: ([\s\S]*)$/.exec(records[i]!);
    if (!m) continue;
    const detail = /DETAIL:\s+[Pp]arameters: ([\s\S]*)$/.exec(records[i + 1] ?? '');
    const params: (string | null)[] = [];
    if (detail) for (const p of detail[1]!.matchAll(/\$(\d+) = (NULL|'((?:[^']|'')*)')/g)) params[Number(p[1]) - 1] = p[2] === 'NULL' ? null : p[3]!.replace(/''/g, "'");
    out.push({ ms: Number(m[1]), query: m[2]!.trim(), params });
  }
  return out;
}

/** A logged statement planned generic with its logged parameters (types left to the server), rolled back. */
async function planLogged(sql: Sql, st: { ms: number; query: string; params: (string | null)[] }, bigTables: Set<string>): Promise<StatementPlan> {
  const types = st.params.map(() => 0);
  try {
    const plan = await planOf(sql, { query: st.query, params: st.params, types }, bigTables);
    return { ...plan, ms: st.ms };
  } catch (err) {
    return { statement: st.query.replace(/\s+/g, ' ').slice(0, 160), ms: st.ms, top: `not planned: ${(err as Error).message}`, rows: 0, sharedHit: 0, sharedRead: 0, scans: [], bigSeqScans: [], text: [] };
  }
}

/** The board's endpoints page and the deep endpoint's page, over HTTP on a server with its loops off. */
async function boardPages(url: string, humanId: string, bigTables: Set<string>): Promise<PageResult[]> {
  const app = await startBenchApp(url);
  const s = postgres(url, { max: 1, onnotice: () => {} }) as unknown as Sql;
  try {
    const [h] = await s<{ handle: string }[]>`select handle from humans where id = ${humanId}`;
    const { token } = await createLoginLink(s, h!.handle, new Date());
    const login = await fetch(`${app.url}/login/${token}`, { method: 'POST', redirect: 'manual' });
    const cookie = /^sb_session=([^;]*)/.exec(login.headers.get('set-cookie') ?? '')?.[0];
    if (!cookie) throw new Error(`board sign-in failed: ${login.status}`);
    const [deep] = await s.unsafe(`select md5('e' || ${DEEP_ENDPOINT})::uuid::text as id`);
    const pages = [
      { page: 'endpoints list', path: '/' },
      { page: 'endpoints list, its last page', path: `/?page=${Number.MAX_SAFE_INTEGER % 1e9}` },
      { page: 'one endpoint (the deep one)', path: `/endpoints/${deep!.id as string}` },
    ];
    const get = async (p: string) => {
      const res = await fetch(`${app.url}${p}`, { headers: { cookie } });
      return { status: res.status, bytes: (await res.arrayBuffer()).byteLength };
    };
    const out: PageResult[] = [];
    for (const p of pages) {
      const runs: number[] = [];
      let last = { status: 0, bytes: 0 };
      for (let i = 0; i < RUNS; i++) {
        const t0 = performance.now();
        last = await get(p.path);
        runs.push(performance.now() - t0);
      }
      const logged = (await loggedStatements(s, async () => void (await get(p.path))))
        .filter((st) => !/^(alter system|select pg_reload_conf)/i.test(st.query))
        .sort((a, b) => b.ms - a.ms);
      const statements: StatementPlan[] = [];
      for (const st of logged.slice(0, 12)) statements.push(await planLogged(s, st, bigTables));
      const result = { ...p, ...last, runs_ms: runs.map((x) => Number(x.toFixed(1))), median_ms: Number(median(runs).toFixed(1)), statements };
      out.push(result);
      console.log(`\nboard ${p.page} (${p.path}): median ${ms(result.median_ms)} ms over ${RUNS} GETs, ${int(result.bytes)} bytes, status ${result.status}; ${logged.length} statements, the slowest:`);
      report({ loop: '', what: '', runs_ms: [], median_ms: 0, work: {}, statements }, true);
    }
    return out;
  } finally {
    await s.end({ timeout: 5 });
    await app.stop();
  }
}

await main();

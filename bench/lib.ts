/** Shared by the bench scripts: a concurrent drain loop, its summary, and PostgreSQL's own limit. */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startThrowawayCluster, type RunningCluster } from '../test/support/throwaway-cluster.ts';
import postgres from 'postgres';
import { connect, connectLanes, type Sql } from '../src/db/connect.ts';
import { Lanes } from '../src/lib/lanes.ts';
import { migrate } from '../src/db/migrate.ts';
import { systemClock } from '../src/lib/clock.ts';
import { startApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/lib/log.ts';
import { ClaimNext, HeldTransitions, type Caller } from '../src/store/todos/index.ts';

const execFileAsync = promisify(execFile);

/** What every bench starts from: a throwaway cluster, migrated, a pool on it and its version. */
export interface BenchDatabase {
  cluster: RunningCluster;
  sql: Sql;
  pgVersion: string;
}

/** Runs a bench on its own throwaway PostgreSQL (system binaries when present) and stops it after. */
export async function withBenchDatabase(maxConnections: number, run: (db: BenchDatabase) => Promise<void>, opts: { durable?: boolean } = {}): Promise<void> {
  const cluster = await startThrowawayCluster({ prefer: 'system', durable: opts.durable });
  const sql = connect(cluster.url, { max: maxConnections });
  try {
    await migrate(sql);
    const pgVersion = (await sql`show server_version`)[0]!.server_version as string;
    // PostgreSQL CPU is counted for this cluster's processes only (postgresCpuMs).
    postmasterPid = parentPid(Number((await sql`select pg_backend_pid() as pid`)[0]!.pid));
    await run({ cluster, sql, pgVersion });
  } finally {
    postmasterPid = undefined;
    await sql.end({ timeout: 5 });
    await cluster.stop();
  }
}

/**
 * Jobs every drain (the store's, over MCP, pg-boss's, graphile-worker's) takes untimed from the
 * queue it is then timed on, before its clock starts and its CPU is counted: by then the path's
 * code is compiled, its connections are open and its statements prepared, so each figure is the
 * path's steady rate, not its first second's. Seed this many jobs more than the timed drain takes.
 */
export const WARMUP_JOBS = 1000;

export interface DrainResult {
  done: number;
  seconds: number;
  p50: number;
  p99: number;
  /** CPU per job, where the drain measured it (withCpuPerJob, runMcpDriver). */
  cpu?: CpuPerJob;
}

/**
 * CPU per job, ms: of this process (the bench, and the server it hosts), of every PostgreSQL
 * process, and of the agents' process where there is one. Throughputs on this shared VM move by
 * a third from run to run; the CPU a job costs moves much less, so it says whether one path is
 * cheaper than another or only faster at that moment.
 */
export interface CpuPerJob {
  node: number;
  pg: number;
  agents?: number;
}

/**
 * Starts counting this process's and PostgreSQL's CPU; the function it returns gives what was
 * spent since, per job. Call it while the drain's connections are still open: a PostgreSQL
 * backend's CPU leaves /proc with it.
 */
export function cpuCounter(): (jobs: number) => CpuPerJob {
  const before = { node: ownCpuMs(), pg: postgresCpuByPid() };
  return (jobs) => {
    const n = Math.max(1, jobs);
    let pg = 0;
    // Per process: one that exited in between neither adds nor takes away; one that started counts whole.
    for (const [pid, ms] of postgresCpuByPid()) pg += ms - (before.pg.get(pid) ?? 0);
    return { node: (ownCpuMs() - before.node) / n, pg: pg / n };
  };
}

/** A drain's CPU per job summed over its processes (NaN where it was not measured). */
export const cpuTotal = (r: DrainResult): number => (r.cpu ? r.cpu.node + r.cpu.pg + (r.cpu.agents ?? 0) : NaN);

/** Runs a drain and adds its CPU per job (cpuCounter). */
export async function withCpuPerJob(run: () => Promise<DrainResult>): Promise<DrainResult> {
  const spent = cpuCounter();
  const result = await run();
  return { ...result, cpu: spent(result.done) };
}

const MCP_DRIVER = fileURLToPath(new URL('./mcp-driver.ts', import.meta.url));
const TSX_CLI = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));

/** How bench/mcp-driver.ts's agents call: the SDK Client, node:http, or requests written on sockets. */
export const MCP_DRIVER_MODES = ['sdk', 'http', 'wire'] as const;
export type McpDriverMode = (typeof MCP_DRIVER_MODES)[number];
export const isDriverMode = (x: unknown): x is McpDriverMode => MCP_DRIVER_MODES.includes(x as McpDriverMode);

/**
 * How each agent of bench/mcp-driver.ts takes its jobs: `two-calls`, claim_next then complete;
 * `next`, complete with next, whose finish claims the job after it (one call per job).
 */
export const MCP_DRIVER_LOOPS = ['two-calls', 'next'] as const;
export type McpDriverLoop = (typeof MCP_DRIVER_LOOPS)[number];
export const isDriverLoop = (x: unknown): x is McpDriverLoop => MCP_DRIVER_LOOPS.includes(x as McpDriverLoop);

/**
 * Drains an endpoint over MCP from bench/mcp-driver.ts in a process of its own. The driver
 * connects and warms up, says so, and starts its clock when told: the CPU counted here (this
 * process, which hosts the server, and PostgreSQL) is the drain's alone, not the warm-up's.
 */
export async function runMcpDriver(mode: McpDriverMode, url: string, credential: string, workers: number, loop: McpDriverLoop = 'two-calls'): Promise<DrainResult> {
  const child = spawn(process.execPath, [TSX_CLI, MCP_DRIVER, mode, url, credential, String(workers), loop], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  while (!out.includes(`${MCP_DRIVER_WARM}\n`)) {
    if (child.exitCode !== null) throw new Error(`mcp-driver exited with ${child.exitCode} before its drain`);
    await new Promise((r) => setTimeout(r, 5));
  }
  const spent = cpuCounter();
  child.stdin.end('go\n');
  const code = await exited;
  if (code !== 0) throw new Error(`mcp-driver exited with ${code}`);
  const { agentCpuMs, ...result } = JSON.parse(out.trim().split('\n').pop()!) as DrainResult & { agentCpuMs: number };
  return { ...result, cpu: { ...spent(result.done), agents: agentCpuMs / Math.max(1, result.done) } };
}

/** No MCP rate limit: a bench's eight agents call far above a real endpoint's 20/s. */
const UNLIMITED = { rate: 1e9, burst: 1e9 };

/** A Switchboard server on the bench's cluster, on a loopback port, its loops off, for MCP drains; `env` adds to its configuration. */
export function startBenchApp(clusterUrl: string, env: Record<string, string> = {}): Promise<App> {
  return startApp({
    config: loadConfig({ SWITCHBOARD_DATABASE_URL: clusterUrl, SWITCHBOARD_LISTEN: '127.0.0.1:0', ...env }),
    clock: systemClock,
    log: createLogger('warn', process.stderr),
    loops: false,
    mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED },
  });
}

/** The line bench/mcp-driver.ts prints once its sessions are warm; it then waits for a line on stdin. */
export const MCP_DRIVER_WARM = 'warm';

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/**
 * Runs `workers` loops of `step` until each sees nothing left, or until `limit` steps have begun
 * (a warm-up: WARMUP_JOBS); times every successful step.
 */
export async function drain(workers: number, step: (worker: number) => Promise<boolean>, limit = Infinity): Promise<DrainResult> {
  const latencies: number[] = [];
  const started = performance.now();
  let begun = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (begun < limit) {
        begun++;
        const t0 = performance.now();
        if (!(await step(w))) return;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { done: latencies.length, seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** Lanes opened as an instance opens them (src/db/open.ts), connected before any clock starts. */
export async function openLanes(url: string): Promise<{ lanes: Lanes<Sql>; end(): Promise<void> }> {
  const pools = connectLanes(url);
  await Promise.all(pools.map((l) => l`select 1`));
  return { lanes: new Lanes(pools), end: async () => void (await Promise.all(pools.map((l) => l.end()))) };
}

/** Runs `use` with lanes opened as an instance opens them, and closes them after. */
export async function withLanes<T>(url: string, use: (lanes: Lanes<Sql>) => Promise<T>): Promise<T> {
  const { lanes, end } = await openLanes(url);
  try {
    return await use(lanes);
  } finally {
    await end();
  }
}

/**
 * The store's own drain of an endpoint's `work` queue: `claim_next` then `complete`, `workers` at
 * a time, in process, through the same ClaimNext and HeldTransitions, on the same kind of lanes, a
 * server instance claims and completes with. The first WARMUP_JOBS go untimed (warmedDrain).
 */
export function storeDrain(sql: Sql, lanes: Lanes<Sql>, endpoint: { id: string; agent_id: string }, workers: number): Promise<DrainResult> {
  const caller: Caller = { endpointId: endpoint.id, owner: `agent:${endpoint.agent_id}`, queues: ['work'] };
  const claimNext = new ClaimNext(sql, lanes);
  const held = new HeldTransitions(sql, lanes);
  return warmedDrain(workers, async () => {
    const t = await claimNext.claim(caller, ['work'], 300, systemClock.now());
    if (!t) return false;
    await held.complete(caller, { id: t.id, result: { ok: true }, now: systemClock.now(), leaseTokenHash: null });
    return true;
  });
}

/** How long timedLoops runs its loops untimed first (after a trigger toggle the statements are planned again). */
export const LOOPS_WARMUP_MS = 500;

/**
 * `loops` loops calling `step(loop, n)` (n counts the calls of all loops) until `seconds` have
 * passed, after LOOPS_WARMUP_MS untimed: the calls, the seconds and the CPU per call of the timed part.
 */
export async function timedLoops(loops: number, seconds: number, step: (loop: number, n: number) => Promise<unknown>): Promise<{ ops: number; seconds: number; cpu: CpuPerJob }> {
  let phase: 'warm' | 'timed' | 'stop' = 'warm';
  let timed = 0;
  let n = 0;
  const running = Array.from({ length: loops }, async (_, w) => {
    while (phase !== 'stop') {
      const timing = phase === 'timed';
      await step(w, n++);
      if (timing && phase === 'timed') timed++;
    }
  });
  await new Promise((r) => setTimeout(r, LOOPS_WARMUP_MS));
  const spent = cpuCounter();
  const started = performance.now();
  phase = 'timed';
  await new Promise((r) => setTimeout(r, seconds * 1000));
  phase = 'stop';
  const elapsed = (performance.now() - started) / 1000;
  const cpu = spent(timed);
  await Promise.all(running);
  return { ops: timed, seconds: elapsed, cpu };
}

/** WARMUP_JOBS steps untimed, then the drain of the rest, timed and with its CPU per job. */
export async function warmedDrain(workers: number, step: (worker: number) => Promise<boolean>): Promise<DrainResult> {
  await drain(workers, step, WARMUP_JOBS);
  return withCpuPerJob(() => drain(workers, step));
}

export interface PgbenchResult {
  /** Single-row insert commits per second. */
  tps: number;
  /** pgbench's "latency average": one commit's round trip at this many clients. */
  latencyMs: number;
  command: string;
}

/**
 * PostgreSQL's single-row insert commit rate on the same cluster, measured with its own pgbench:
 * the ceiling for any write path that commits one transaction at a time. With one client its
 * latency average is the floor for one commit's round trip.
 */
export async function pgbenchInsertRate(cluster: RunningCluster, clients: number, seconds: number): Promise<PgbenchResult> {
  const sql = connect(cluster.url, { max: 1 });
  await sql`create table if not exists bench_pgbench_insert (v integer)`;
  await sql.end({ timeout: 5 });
  // A directory the postgres OS user can read (pgbench runs as it when we are root).
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sbbench-'));
  await chmod(dir, 0o755);
  const script = path.join(dir, 'insert.sql');
  await writeFile(script, 'insert into bench_pgbench_insert (v) values (1);\n', { mode: 0o644 });
  const pgbench = path.join(cluster.binDir, 'pgbench');
  const args = ['-h', '127.0.0.1', '-p', String(cluster.port), '-U', 'postgres', '-n', '-c', String(clients), '-j', String(Math.min(2, clients)), '-T', String(seconds), '-f', script, 'postgres'];
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const [file, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', pgbench, ...args]] : [pgbench, args];
  try {
    const { stdout } = await execFileAsync(file, argv, { cwd: '/', maxBuffer: 1 << 20 });
    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1] ?? /tps = ([\d.]+)/.exec(stdout)?.[1];
    const latency = /latency average = ([\d.]+) ms/.exec(stdout)?.[1];
    if (!tps || !latency) throw new Error(`cannot read tps and latency from pgbench output:\n${stdout}`);
    return { tps: Number(tps), latencyMs: Number(latency), command: `pgbench -n -c ${clients} -j ${Math.min(2, clients)} -T ${seconds} -f insert.sql` };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Bulk-loads `n` pending, push-eligible operator todos on queue `work` (a fixture, not the
 * product's write path), then gives the drain fresh statistics (freshStatistics).
 */
export async function seedPendingTodos(sql: Sql, endpointId: string, n: number): Promise<void> {
  const [ev] = await sql`insert into events (source, family, trust_mode, verified) values ('operator', 'operator', 'operator', true) returning id`;
  await sql`
    insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, created_at, updated_at)
    select 'td_' || gen_random_uuid(), ${endpointId}, 'work', 'operator', 'operator', 'job ' || g, jsonb_build_object('n', g), ${ev!.id},
           now() + g * interval '1 microsecond', now()
    from generate_series(1, ${n}) g`;
  await freshStatistics(sql);
}

/**
 * VACUUM ANALYZE of the whole database, after a drain's jobs are loaded and before it starts, for
 * every system alike: a live server's autovacuum keeps the statistics, but a bench's cluster is
 * seconds old and none has run. In bench:peers the 200 doorbells of its add-to-wake run left
 * doorbell_rings with rows and no statistics, and the store's drain after it spent 0.37 ms of
 * PostgreSQL CPU per job instead of 0.26 until that table was analyzed. The vacuum clears what the
 * drains before left dead (pg-boss's 20,000 jobs churn its tables), so autovacuum does not clean
 * up after one system inside the next one's timed drain, whose PostgreSQL CPU it would be counted in.
 */
export async function freshStatistics(sql: Sql): Promise<void> {
  await sql`vacuum analyze`;
}

/** One figure for the suite's closing table (bench/all.ts). */
export interface SummaryRow {
  figure: string;
  value: string;
  /** The figure beside PostgreSQL's own limit on the same cluster (write paths only). */
  vsPgbench?: string;
  target?: string;
  met?: boolean;
}

export const SUMMARY_MARK = '##summary ';

/**
 * Hands this bench's headline figures to bench/all.ts, which sets SWITCHBOARD_BENCH_SUMMARY and
 * prints them all in one table at the end; a bench run alone prints nothing extra.
 */
export function summarize(bench: string, pgVersion: string, rows: SummaryRow[]): void {
  if (process.env['SWITCHBOARD_BENCH_SUMMARY'] !== '1') return;
  console.log(`${SUMMARY_MARK}${JSON.stringify({ bench, cores: os.availableParallelism(), pgVersion, rows })}`);
}

/** `a` as a percentage of `b`, for the "vs" columns. */
export const pctOf = (a: number, b: number, digits = 0): string => `${((a / b) * 100).toFixed(digits)}%`;

/** A duration as a multiple of another, for latencies beside pgbench's single-commit latency. */
export const timesOf = (a: number, b: number): string => `${(a / b).toFixed(a / b < 10 ? 1 : 0)}x`;

/** One statement as a code path sent it: its text and its parameters as sent. */
export interface CapturedStatement {
  query: string;
  params: unknown[];
  /** The parameter type OIDs the driver sent (0: left to the server). */
  types: number[];
}

/**
 * A small pool that records every statement it sends, so a bench can EXPLAIN exactly what the
 * product's own code ran rather than a copy of its SQL.
 */
export function capturingPool(url: string): { sql: Sql; statements: CapturedStatement[] } {
  const statements: CapturedStatement[] = [];
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    debug: (_conn: number, query: string, params: unknown[], types: number[]) => statements.push({ query, params: [...params], types: [...types] }),
  }) as unknown as Sql;
  return { sql, statements };
}

const arrayLiteral = (xs: unknown[]): string =>
  `{${xs.map((x) => (x === null ? 'NULL' : `"${String(x).replace(/["\\]/g, (c) => `\\${c}`)}"`)).join(',')}}`;

/** json and jsonb: a sql.json() value (an array included) goes as it is, for the driver to encode, not as an array literal. */
const JSON_TYPES = new Set([114, 3802]);

/** EXPLAIN (ANALYZE) of a captured statement, in a transaction that is rolled back. */
export async function explainAnalyze(sql: Sql, st: CapturedStatement): Promise<string[]> {
  const params = st.params.map((p, i) =>
    JSON_TYPES.has(st.types[i] ?? 0) ? p : Array.isArray(p) ? arrayLiteral(p) : p instanceof Date ? p.toISOString() : p,
  );
  let plan: string[] = [];
  await sql
    .begin(async (tx) => {
      const rows = await tx.unsafe(`explain (analyze, costs off, timing off) ${st.query}`, params as never[]);
      plan = (rows as unknown as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']);
      throw new RolledBack();
    })
    .catch((e: unknown) => {
      if (!(e instanceof RolledBack)) throw e;
    });
  return plan;
}

class RolledBack extends Error {}

/** Prints a plan indented, long lines cut (the literal arrays of ids run to kilobytes). */
export function printPlan(title: string, plan: string[], width = 150): void {
  console.log(title);
  for (const line of plan) console.log(`  ${line.length > width ? `${line.slice(0, width)}…` : line}`);
}

/** A figure for the `--json` line: a finite number rounded, or null (JSON has no NaN). */
export const figure = (x: number, digits = 2): number | null => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

/**
 * `--json`: every figure of the run as one JSON object on the last line of stdout (the tables
 * stay above it), with the machine's cores and the PostgreSQL version; call it last of all.
 */
export function printJsonLast(bench: string, pgVersion: string, figures: Record<string, unknown>): void {
  const line = JSON.stringify({ bench, at: new Date().toISOString(), cores: os.availableParallelism(), postgres: pgVersion, ...figures });
  process.stdout.write(`${line}\n`);
}

/**
 * The postmaster of the cluster withBenchDatabase runs; while it is set, PostgreSQL CPU is that
 * cluster's alone (its postmaster and the processes it forked), not that of every cluster on the
 * machine: other benches' and test runs' clusters share it, and one of their processes exiting
 * inside a drain took its whole CPU time off the count (a negative figure in a short drain).
 */
let postmasterPid: number | undefined;

/** The parent of a process, from /proc (NaN if it is gone). */
function parentPid(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return NaN;
  }
}

/**
 * CPU time (ms, user + system) used so far by each PostgreSQL process, from /proc (Linux only;
 * empty elsewhere): the bench cluster's while withBenchDatabase runs, every one on the machine
 * otherwise.
 */
function postgresCpuByPid(): Map<number, number> {
  const out = new Map<number, number>();
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      if (!stat.slice(stat.indexOf('(') + 1, close).startsWith('postgres')) continue;
      const fields = stat.slice(close + 2).split(' ');
      if (postmasterPid !== undefined && Number(pid) !== postmasterPid && Number(fields[1]) !== postmasterPid) continue;
      out.set(Number(pid), ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND);
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/**
 * CPU time (ms) used so far by PostgreSQL (postgresCpuByPid's processes, summed). Backends that
 * exited in between are not counted, so take the difference across a run whose connections stay
 * open; cpuCounter, which compares process by process, is not thrown by one that exits.
 */
export function postgresCpuMs(): number {
  let ms = 0;
  for (const x of postgresCpuByPid().values()) ms += x;
  return ms;
}
/** USER_HZ: 100 on every Linux this bench runs on (getconf CLK_TCK). */
const CLOCK_TICKS_PER_SECOND = 100;

/** This process's CPU time (ms, user + system) so far. */
export const ownCpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/**
 * The commit a run measured, for its results file: the short hash, with a + when tracked files
 * had uncommitted changes; null outside a git checkout.
 */
export function benchCommit(): string | null {
  const dir = path.dirname(fileURLToPath(import.meta.url));
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: dir, encoding: 'utf8' }).trim() !== '';
    return `${head}${dirty ? '+' : ''}`;
  } catch {
    return null;
  }
}

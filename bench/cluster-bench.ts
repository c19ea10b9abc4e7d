/**
 * Shared by bench/instances.ts and bench/storm.ts: instances in processes of their own, HAProxy on
 * the shipped configuration, and a profile of each timed window: the CPU of every process that
 * takes part (each instance, PostgreSQL's processes, HAProxy, PgBouncer, the load generator, this
 * process) read from /proc, the machine's own busy time beside them (what is left is other
 * people's work on this shared machine), PostgreSQL's wait events sampled from pg_stat_activity,
 * and the statements' execution time from pg_stat_statements.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connect, type Sql } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrate.ts';
import { HAPROXY_BIN, serverStats, type ServerStat } from '../test/support/haproxy.ts';
import { freePort, restartCluster, sleep } from '../test/support/processes.ts';
import { startThrowawayCluster, type RunningCluster } from '../test/support/throwaway-cluster.ts';
import { MCP_DRIVER_WARM, percentile, type DrainResult } from './lib.ts';
import { SENDER_WARM, type SenderJob, type SenderResult } from './webhook-sender.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const INSTANCE = fileURLToPath(new URL('./instance.ts', import.meta.url));
const SENDER = fileURLToPath(new URL('./webhook-sender.ts', import.meta.url));
const MCP_DRIVER = fileURLToPath(new URL('./mcp-driver.ts', import.meta.url));
export const SHIPPED_HAPROXY_CFG = fileURLToPath(new URL('../deploy/haproxy.cfg', import.meta.url));

/** USER_HZ (getconf CLK_TCK): 100 on every Linux this runs on. */
const TICK_MS = 10;

// ---------------------------------------------------------------------------------------------
// The database

export interface ProfiledCluster {
  cluster: RunningCluster;
  sql: Sql;
  pgVersion: string;
  postmasterPid: number;
  stop(): Promise<void>;
}

/**
 * A throwaway cluster (bench/lib.ts's kind: fsync off, synchronous_commit off) restarted once with
 * pg_stat_statements preloaded, then migrated.
 */
export async function startProfiledCluster(): Promise<ProfiledCluster> {
  const cluster = await startThrowawayCluster({ prefer: 'system' });
  try {
    const setup = connect(cluster.url, { max: 1 });
    await setup`alter system set shared_preload_libraries = 'pg_stat_statements'`;
    await setup.end({ timeout: 5 });
    await restartCluster(cluster);
    const sql = connect(cluster.url, { max: 4, applicationName: 'bench' });
    await sql`create extension if not exists pg_stat_statements`;
    await migrate(sql);
    const pgVersion = (await sql`show server_version`)[0]!.server_version as string;
    const postmasterPid = Number((await readFile(path.join(cluster.pgData, 'postmaster.pid'), 'utf8')).split('\n')[0]);
    return {
      cluster,
      sql,
      pgVersion,
      postmasterPid,
      stop: async () => {
        await sql.end({ timeout: 5 });
        await cluster.stop();
      },
    };
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Instances

export interface Instance {
  pid: number;
  url: string;
  port: number;
  output(): string;
  stop(): Promise<void>;
}

/** Node with tsx as a loader, so the pid spawned is the process that runs the code (no wrapper). */
function nodeTs(script: string, args: string[], env: NodeJS.ProcessEnv, stdin: 'ignore' | 'pipe'): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: ROOT, env, stdio: [stdin, 'pipe', 'pipe'] });
}

/** bench/instance.ts with `env` (SWITCHBOARD_*) over a bare PATH and HOME; resolves once it listens. */
export async function spawnInstance(env: Record<string, string | undefined>): Promise<Instance> {
  const full: NodeJS.ProcessEnv = { PATH: process.env['PATH'], HOME: os.tmpdir(), SWITCHBOARD_LISTEN: '127.0.0.1:0', ...env };
  for (const [k, v] of Object.entries(full)) if (v === undefined) delete full[k];
  const child = nodeTs(INSTANCE, [], full, 'ignore');
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      try {
        resolve((JSON.parse(line) as { url: string }).url);
      } catch {
        out += `${line}\n`;
      }
    });
    child.once('exit', (code) => reject(new Error(`instance exited with ${code} before listening:\n${out}`)));
  });
  return {
    pid: child.pid!,
    url,
    port: Number(new URL(url).port),
    output: () => out,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.exitCode === null && child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// HAProxy on deploy/haproxy.cfg

export interface Balancer {
  pid: number;
  url: string;
  /** What was changed in the shipped file, for the record. */
  changes: string[];
  config: string;
  /** Requests each server has been sent so far (stot), and its status. */
  stats(): Promise<Map<string, ServerStat>>;
  stop(): Promise<void>;
}

/**
 * The shipped deploy/haproxy.cfg with only what a loopback run needs rewritten: the frontend's
 * bind (127.0.0.1 and a free port instead of :8080), the server list (127.0.0.1 and each
 * instance's port instead of the compose service names, which also drops `resolvers docker
 * init-addr none` from them, and the resolvers section no server names any more), and one line
 * added to `global`, an admin socket, for the servers' states and request counts. Every timeout,
 * the balance, the health check and the request log (to stdout, which goes to /dev/null here as it
 * would go to a container's log) stay as shipped.
 */
export function rewriteShippedConfig(shipped: string, port: number, servers: { name: string; port: number }[], socket: string): { config: string; changes: string[] } {
  const out: string[] = [];
  let inResolvers = false;
  let serversWritten = false;
  for (const line of shipped.split('\n')) {
    if (/^resolvers\s/.test(line)) inResolvers = true;
    else if (/^\S/.test(line)) inResolvers = false;
    if (inResolvers) continue;
    if (/^\s+bind\s+:8080\b/.test(line)) {
      out.push(line.replace(/bind\s+:8080/, `bind 127.0.0.1:${port}`));
      continue;
    }
    if (/^\s+server\s/.test(line)) {
      if (!serversWritten) out.push(...servers.map((s) => `  server ${s.name} 127.0.0.1:${s.port} check`));
      serversWritten = true;
      continue;
    }
    out.push(line);
    if (/^global\b/.test(line)) out.push(`  stats socket ${socket} mode 600 level admin`);
  }
  if (!serversWritten) throw new Error('deploy/haproxy.cfg has no server lines to rewrite');
  return {
    config: out.join('\n'),
    changes: [
      'frontend bind :8080 -> 127.0.0.1:<free port>',
      `server lines -> ${servers.length} of "server switchboard-<i> 127.0.0.1:<instance port> check" (no "resolvers docker init-addr none")`,
      'the "resolvers docker" section removed (no server names one)',
      'global: "stats socket <tmp>/admin.sock mode 600 level admin" added (server states and request counts)',
    ],
  };
}

/** HAProxy in the foreground on the rewritten shipped configuration; resolves once every server is UP. */
export async function startShippedHaproxy(servers: { name: string; port: number }[]): Promise<Balancer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sbbench-haproxy-'));
  const socket = path.join(dir, 'admin.sock');
  const port = await freePort();
  const { config, changes } = rewriteShippedConfig(readFileSync(SHIPPED_HAPROXY_CFG, 'utf8'), port, servers, socket);
  const cfgPath = path.join(dir, 'haproxy.cfg');
  await writeFile(cfgPath, config);
  const child = spawn(HAPROXY_BIN, ['-db', '-f', cfgPath], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stats = () => serverStats(socket);
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await Promise.race([exited, sleep(5000)]);
    if (child.exitCode === null) child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    const s = await stats().catch(() => undefined);
    if (s && servers.every((x) => s.get(x.name)?.status === 'UP')) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`haproxy did not bring every server UP:\n${err}\n${JSON.stringify(s ? [...s] : null)}`);
    }
    await sleep(100);
  }
  return { pid: child.pid!, url: `http://127.0.0.1:${port}`, changes, config, stats, stop };
}

// ---------------------------------------------------------------------------------------------
// CPU from /proc

interface Proc {
  ppid: number;
  comm: string;
  /** utime + stime, in clock ticks. */
  ticks: number;
}

function readProcs(): Map<number, Proc> {
  const procs = new Map<number, Proc>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const fields = stat.slice(close + 2).split(' ');
      procs.set(Number(name), { comm: stat.slice(stat.indexOf('(') + 1, close), ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // ended meanwhile
    }
  }
  return procs;
}

/** The machine's busy and total CPU ticks, over every core (/proc/stat). */
function machineTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number) as number[];
  const busy = user! + nice! + system! + irq! + softirq! + steal!;
  return { busy, total: busy + idle! + iowait! };
}

/** Who is who among the processes of a window. */
export interface Roles {
  instances: number[];
  /** Instances up but out of the balancer in this window (their CPU kept apart from `other`). */
  idle?: number[];
  postmasterPid: number;
  haproxyPid?: number;
  /** A process named pgbouncer below this one (it runs through runuser when we are root). */
  pgbouncer?: boolean;
}

/** CPU spent in a window, ms, by role. `other` is the machine's busy time that none of ours spent. */
export interface WindowCpu {
  wallMs: number;
  instances: number[];
  idleInstances: number;
  postgres: number;
  /** Of which client backends' (the rest: the postmaster, WAL writer, checkpointer, autovacuum...). */
  postgresBackends: number;
  haproxy: number;
  pgbouncer: number;
  loadGenerator: number;
  bench: number;
  other: number;
  machineBusy: number;
  /** Cores on the machine times the wall time, ms: the most that could have been spent. */
  machineCapacity: number;
  /** PostgreSQL processes that ended within the window (their CPU in it is lost). */
  postgresEnded: number;
}

/** A PostgreSQL client backend's process title names its client's address: "postgres: user db 127.0.0.1(port) ...". */
const isClientBackend = (pid: number): boolean => {
  try {
    return /\d+\.\d+\.\d+\.\d+\(\d+\)|\[local\]/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
  } catch {
    return false;
  }
};

const isBelow = (procs: Map<number, Proc>, pid: number, ancestor: number): boolean => {
  for (let p = procs.get(pid)?.ppid, hops = 0; p !== undefined && p > 1 && hops < 10; p = procs.get(p)?.ppid, hops++) if (p === ancestor) return true;
  return false;
};

export interface WaitCounts {
  samples: number;
  /** Sum over samples of backends in each state (wait event, or CPU when active and not waiting). */
  counts: Record<string, number>;
}

export interface StatementUse {
  query: string;
  calls: number;
  totalMs: number;
}

export interface WindowProfile {
  cpu: WindowCpu;
  waits: WaitCounts;
  statements: StatementUse[];
}

async function statementTotals(sql: Sql): Promise<Map<string, StatementUse>> {
  const rows = await sql<{ id: string; query: string; calls: string; ms: number }[]>`
    select queryid::text as id, query, calls::text as calls, total_exec_time as ms from pg_stat_statements`;
  return new Map(rows.map((r) => [r.id, { query: r.query, calls: Number(r.calls), totalMs: r.ms }]));
}

/**
 * Starts a profiled window: CPU by role from /proc, wait events sampled every `sampleMs` on `sql`
 * (a connection of the bench's own, left out of the counts), the statements' execution time. The
 * function returned ends it, with the load generator's own CPU (it reports its own).
 */
export async function beginWindow(sql: Sql, roles: Roles, sampleMs = 100): Promise<(loadGeneratorMs: number) => Promise<WindowProfile>> {
  const statementsBefore = await statementTotals(sql);
  const waits: WaitCounts = { samples: 0, counts: {} };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const rows = await sql<{ w: string; n: number }[]>`
        select case when state = 'idle in transaction' then 'idle in transaction'
                    when wait_event is null then 'CPU' else wait_event_type || ':' || wait_event end as w,
               count(*)::int as n
        from pg_stat_activity
        where backend_type = 'client backend' and pid <> pg_backend_pid() and state in ('active', 'idle in transaction')
          and coalesce(application_name, '') <> 'bench'
        group by 1`;
      waits.samples++;
      for (const r of rows) waits.counts[r.w] = (waits.counts[r.w] ?? 0) + r.n;
      await sleep(sampleMs);
    }
  })();
  const before = readProcs();
  const m0 = machineTicks();
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  return async (loadGeneratorMs) => {
    const wallMs = performance.now() - t0;
    const after = readProcs();
    const m1 = machineTicks();
    const own = process.cpuUsage(own0);
    sampling = false;
    await sampler;
    const statementsAfter = await statementTotals(sql);
    const delta = (pid: number) => ((after.get(pid)?.ticks ?? 0) - (before.get(pid)?.ticks ?? 0)) * TICK_MS;
    const cpu: WindowCpu = {
      wallMs,
      instances: roles.instances.map(delta),
      idleInstances: (roles.idle ?? []).reduce((a, pid) => a + delta(pid), 0),
      postgres: 0,
      postgresBackends: 0,
      haproxy: roles.haproxyPid ? delta(roles.haproxyPid) : 0,
      pgbouncer: 0,
      loadGenerator: loadGeneratorMs,
      bench: (own.user + own.system) / 1000,
      other: 0,
      machineBusy: (m1.busy - m0.busy) * TICK_MS,
      machineCapacity: ((m1.total - m0.total) * TICK_MS),
      postgresEnded: 0,
    };
    for (const [pid, p] of after) {
      if (pid === roles.postmasterPid || p.ppid === roles.postmasterPid) {
        const d = delta(pid);
        cpu.postgres += d;
        if (p.ppid === roles.postmasterPid && isClientBackend(pid)) cpu.postgresBackends += d;
      } else if (roles.pgbouncer && p.comm === 'pgbouncer' && isBelow(after, pid, process.pid)) {
        cpu.pgbouncer += delta(pid);
      }
    }
    for (const [pid, p] of before) if (p.ppid === roles.postmasterPid && !after.has(pid)) cpu.postgresEnded++;
    const ours = cpu.instances.reduce((a, b) => a + b, 0) + cpu.idleInstances + cpu.postgres + cpu.haproxy + cpu.pgbouncer + cpu.loadGenerator + cpu.bench;
    cpu.other = Math.max(0, cpu.machineBusy - ours);
    const statements: StatementUse[] = [];
    for (const [id, s] of statementsAfter) {
      const b = statementsBefore.get(id);
      const calls = s.calls - (b?.calls ?? 0);
      if (calls > 0) statements.push({ query: s.query, calls, totalMs: s.totalMs - (b?.totalMs ?? 0) });
    }
    statements.sort((a, b) => b.totalMs - a.totalMs);
    return { cpu, waits, statements };
  };
}

/** Adds windows' profiles together (CPU and counts summed; statements merged by text). */
export function sumProfiles(profiles: WindowProfile[]): WindowProfile {
  const first = profiles[0]!;
  const cpu: WindowCpu = { ...first.cpu, instances: first.cpu.instances.map(() => 0) };
  for (const k of Object.keys(cpu) as (keyof WindowCpu)[]) if (k !== 'instances') (cpu[k] as number) = 0;
  const waits: WaitCounts = { samples: 0, counts: {} };
  const statements = new Map<string, StatementUse>();
  for (const p of profiles) {
    for (const k of Object.keys(cpu) as (keyof WindowCpu)[]) if (k !== 'instances') (cpu[k] as number) += p.cpu[k] as number;
    p.cpu.instances.forEach((ms, i) => (cpu.instances[i] = (cpu.instances[i] ?? 0) + ms));
    waits.samples += p.waits.samples;
    for (const [w, n] of Object.entries(p.waits.counts)) waits.counts[w] = (waits.counts[w] ?? 0) + n;
    for (const s of p.statements) {
      const m = statements.get(s.query) ?? { query: s.query, calls: 0, totalMs: 0 };
      m.calls += s.calls;
      m.totalMs += s.totalMs;
      statements.set(s.query, m);
    }
  }
  return { cpu, waits, statements: [...statements.values()].sort((a, b) => b.totalMs - a.totalMs) };
}

/** A profile in cores (CPU ms over wall ms), per-operation CPU, top waits and statements: for JSON and the tables. */
export function describeProfile(p: WindowProfile, operations: number, topStatements = 6) {
  const c = p.cpu;
  const cores = (ms: number) => Number((ms / c.wallMs).toFixed(3));
  const per = (ms: number) => Number((ms / Math.max(1, operations)).toFixed(3));
  const execMs = p.statements.reduce((a, s) => a + s.totalMs, 0);
  const ours = c.instances.reduce((a, b) => a + b, 0) + c.postgres + c.haproxy + c.pgbouncer + c.loadGenerator;
  const waitTotal = Object.values(p.waits.counts).reduce((a, b) => a + b, 0);
  return {
    cores: {
      instances: c.instances.map(cores),
      idle_instances: cores(c.idleInstances),
      postgres: cores(c.postgres),
      postgres_backends: cores(c.postgresBackends),
      haproxy: cores(c.haproxy),
      pgbouncer: cores(c.pgbouncer),
      load_generator: cores(c.loadGenerator),
      bench: cores(c.bench),
      other: cores(c.other),
      machine_busy: cores(c.machineBusy),
      machine_cores: cores(c.machineCapacity),
    },
    cpu_ms_per_op: {
      /** Everything this run's own processes spent per operation (not `other`, not the bench's sampler). */
      total: per(ours),
      instances: per(c.instances.reduce((a, b) => a + b, 0)),
      postgres: per(c.postgres),
      haproxy: per(c.haproxy),
      pgbouncer: per(c.pgbouncer),
      load_generator: per(c.loadGenerator),
    },
    /**
     * The rate the machine's cores would carry if this run's processes had all of them and spent
     * what they spent per operation here: cores x 1000 / total ms per operation.
     */
    rate_if_cores_were_ours: Number(((c.machineCapacity / c.wallMs) * 1000 / Math.max(1e-9, ours / Math.max(1, operations))).toFixed(0)),
    postgres_ended_in_window: c.postgresEnded,
    /** Mean client backends active (or idle in a transaction) per sample, by what they were doing. */
    backends_by_wait: Object.fromEntries(
      Object.entries(p.waits.counts)
        .sort((a, b) => b[1] - a[1])
        .map(([w, n]) => [w, Number((n / Math.max(1, p.waits.samples)).toFixed(2))]),
    ),
    wait_samples: p.waits.samples,
    backends_active_mean: Number((waitTotal / Math.max(1, p.waits.samples)).toFixed(2)),
    statements_exec_ms_per_op: per(execMs),
    statements_exec_cores: cores(execMs),
    top_statements: p.statements.slice(0, topStatements).map((s) => ({
      query: s.query.replace(/\s+/g, ' ').slice(0, 140),
      calls_per_op: Number((s.calls / Math.max(1, operations)).toFixed(3)),
      mean_ms: Number((s.totalMs / Math.max(1, s.calls)).toFixed(3)),
      ms_per_op: per(s.totalMs),
    })),
  };
}

// ---------------------------------------------------------------------------------------------
// Load generators

export interface Sent extends SenderResult {
  profile: WindowProfile;
}

/** Runs bench/webhook-sender.ts on `job`, its timed part inside a profiled window. */
export async function sendFrom(job: SenderJob, sql: Sql, roles: Roles): Promise<Sent> {
  const child = nodeTs(SENDER, [], { PATH: process.env['PATH'], HOME: os.tmpdir() }, 'pipe');
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  child.stdin!.write(`${JSON.stringify(job)}\n`);
  const warm = await lines.next();
  if (warm.done || warm.value !== SENDER_WARM) throw new Error(`webhook-sender: ${warm.value ?? 'no output'}\n${err}`);
  const end = await beginWindow(sql, roles);
  child.stdin!.write('go\n');
  const line = await lines.next();
  if (line.done) throw new Error(`webhook-sender ended without a result:\n${err}`);
  const result = JSON.parse(line.value) as SenderResult;
  const profile = await end(result.cpuMs);
  child.stdin!.end();
  await exited;
  return { ...result, profile };
}

export interface Drained extends DrainResult {
  profile: WindowProfile;
}

/**
 * bench/mcp-driver.ts in `wire` mode (claim_next then complete), its timed drain of `jobs` inside a
 * profiled window. Seed the queue with more than WARMUP_JOBS + jobs: the drain then never meets an
 * empty queue, whose claim_next answer costs differently (docs/performance.md, "Several instances").
 */
export async function drainFrom(mcpUrl: string, credential: string, workers: number, jobs: number, sql: Sql, roles: Roles): Promise<Drained> {
  const child = nodeTs(MCP_DRIVER, ['wire', mcpUrl, credential, String(workers), 'two-calls', String(jobs)], { PATH: process.env['PATH'], HOME: os.tmpdir() }, 'pipe');
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const warm = await lines.next();
  if (warm.done || warm.value !== MCP_DRIVER_WARM) throw new Error(`mcp-driver: ${warm.value ?? 'no output'}\n${err}`);
  const end = await beginWindow(sql, roles);
  child.stdin!.end('go\n');
  const line = await lines.next();
  if (line.done) throw new Error(`mcp-driver ended without a result:\n${err}`);
  const { agentCpuMs, ...result } = JSON.parse(line.value) as DrainResult & { agentCpuMs: number };
  const profile = await end(agentCpuMs);
  const code = await exited;
  if (code !== 0) throw new Error(`mcp-driver exited with ${code}:\n${err}`);
  return { ...result, profile };
}

/** Several timed runs of one path as one: counts and seconds summed, latencies merged. */
export function mergeSent(runs: Sent[]) {
  const accepted = runs.reduce((a, r) => a + r.accepted, 0);
  const seconds = runs.reduce((a, r) => a + r.seconds, 0);
  const latencies = runs.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const statuses: Record<string, number> = {};
  for (const r of runs) for (const [k, n] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + n;
  return {
    accepted,
    refused: runs.reduce((a, r) => a + r.refused, 0),
    statuses,
    seconds,
    perSecond: accepted / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? NaN,
    profile: sumProfiles(runs.map((r) => r.profile)),
  };
}

/** The machine's load averages, for the record. */
export const loadAverage = (): number[] => os.loadavg().map((x) => Number(x.toFixed(2)));

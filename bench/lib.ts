/** Shared by the bench scripts: a concurrent drain loop, its summary, and PostgreSQL's own limit. */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { RunningCluster } from '../src/db/cluster.ts';
import { connect, type Sql } from '../src/db/connect.ts';

const execFileAsync = promisify(execFile);

export interface DrainResult {
  done: number;
  seconds: number;
  p50: number;
  p99: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Runs `workers` loops of `step` until each sees nothing left; times every successful step. */
export async function drain(workers: number, step: (worker: number) => Promise<boolean>): Promise<DrainResult> {
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (;;) {
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

/** PostgreSQL's single-row insert commit rate on the same cluster, measured with its own pgbench. */
export async function pgbenchInsertRate(cluster: RunningCluster, clients: number, seconds: number): Promise<{ tps: number; command: string }> {
  const sql = connect(cluster.url, { max: 1 });
  await sql`create table if not exists bench_pgbench_insert (v integer)`;
  await sql.end({ timeout: 5 });
  // A directory the postgres OS user can read (pgbench runs as it when we are root).
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sbbench-'));
  await chmod(dir, 0o755);
  const script = path.join(dir, 'insert.sql');
  await writeFile(script, 'insert into bench_pgbench_insert (v) values (1);\n', { mode: 0o644 });
  const pgbench = path.join(cluster.binDir, 'pgbench');
  const args = ['-h', '127.0.0.1', '-p', String(cluster.port), '-U', 'postgres', '-n', '-c', String(clients), '-j', '2', '-T', String(seconds), '-f', script, 'postgres'];
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const [file, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', pgbench, ...args]] : [pgbench, args];
  try {
    const { stdout } = await execFileAsync(file, argv, { cwd: '/', maxBuffer: 1 << 20 });
    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1] ?? /tps = ([\d.]+)/.exec(stdout)?.[1];
    if (!tps) throw new Error(`cannot read tps from pgbench output:\n${stdout}`);
    return { tps: Number(tps), command: `pgbench -n -c ${clients} -j 2 -T ${seconds} -f insert.sql` };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Bulk-loads `n` pending, push-eligible operator todos on queue `work` (a fixture, not the product's write path). */
export async function seedPendingTodos(sql: Sql, endpointId: string, n: number): Promise<void> {
  const [ev] = await sql`insert into events (source, family, trust_mode, verified) values ('operator', 'operator', 'operator', true) returning id`;
  await sql`
    insert into todos (id, endpoint_id, queue, source, kind, title, payload, event_id, created_at, updated_at)
    select 'td_' || gen_random_uuid(), ${endpointId}, 'work', 'operator', 'operator', 'job ' || g, jsonb_build_object('n', g), ${ev!.id},
           now() + g * interval '1 microsecond', now()
    from generate_series(1, ${n}) g`;
}

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { RunningCluster } from './types.ts';
import { findRunningEmbeddedCluster, startEmbeddedCluster } from './embedded.ts';
import {
  cleanups,
  postmasterPid,
  quiet,
  running,
  track,
  useClusterCleanups,
  waitFor,
  withSql,
} from '../../../test/support/cluster-checks.ts';

// The persistent embedded cluster behind `switchboard serve`.

useClusterCleanups();

const clusterModuleUrl = pathToFileURL(fileURLToPath(new URL('./embedded.ts', import.meta.url))).href;
const projectRoot = fileURLToPath(new URL('../../..', import.meta.url));
const isRoot = process.getuid?.() === 0;

async function tempDataDir(): Promise<string> {
  const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'sbembed-'));
  // When root, PostgreSQL runs as the postgres OS user, which must traverse this.
  await fs.chmod(parent, 0o755);
  const dataDir = path.join(parent, 'db');
  cleanups.push(async () => {
    killServer(path.join(dataDir, 'pgdata'));
    await fs.rm(parent, { recursive: true, force: true });
  });
  return dataDir;
}

/** Last-resort cleanup so a failing test never leaves a server running. */
function killServer(pgData: string): void {
  const pid = postmasterPid(pgData);
  if (pid && running(pid)) process.kill(pid, 'SIGQUIT');
}

/** PIDs of live processes whose working directory is pgData (the postmaster and its children). */
async function serverProcesses(pgData: string): Promise<number[]> {
  const real = await fs.realpath(pgData);
  const pids: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cwd = await fs.readlink(`/proc/${entry}/cwd`).catch(() => undefined);
    if (cwd === real && running(Number(entry))) pids.push(Number(entry));
  }
  return pids;
}

interface Owner {
  child: ChildProcess;
  pid: number;
  url: string;
  exited: Promise<void>;
}

/** A separate node process that starts the embedded cluster and keeps it (SIGTERM = clean stop). */
async function spawnOwner(dataDir: string): Promise<Owner> {
  const script = `
    import { startEmbeddedCluster } from ${JSON.stringify(clusterModuleUrl)};
    const cluster = await startEmbeddedCluster({ dataDir: ${JSON.stringify(dataDir)}, log: () => {} });
    process.on('SIGTERM', () => { cluster.stop().finally(() => process.exit(0)); });
    console.log(JSON.stringify({ url: cluster.url }));
    setInterval(() => {}, 1 << 30);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: projectRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`owner process exited with ${code}: ${stderr}`)));
  });
  if (child.pid === undefined) throw new Error('owner process has no PID');
  return { child, pid: child.pid, url, exited };
}

describe('startEmbeddedCluster', () => {
  it('initializes on first start, keeps data across stop and start, requires the password', async () => {
    const dataDir = await tempDataDir();
    const messages: string[] = [];
    const log = (msg: string): void => void messages.push(msg);

    const first = track(await startEmbeddedCluster({ dataDir, log }));
    expect(messages.some((m) => m.includes('initializing'))).toBe(true);
    expect(first.url).toMatch(/^postgres:\/\/postgres:[0-9a-f]+@127\.0\.0\.1:\d+\/switchboard$/);
    expect((await fs.stat(path.join(dataDir, 'superuser.password'))).mode & 0o777).toBe(0o600);
    expect((await fs.stat(first.pgData)).mode & 0o777).toBe(0o700);
    await withSql(first.url, (sql) => sql.unsafe(`create table kept (v text); insert into kept values ('hello')`));
    const withoutPassword = first.url.replace(/:[0-9a-f]+@/, '@');
    await expect(withSql(withoutPassword, (sql) => sql`select 1`)).rejects.toThrow();
    // A second start in this same process is refused while the first is running.
    await expect(startEmbeddedCluster({ dataDir, log: quiet })).rejects.toThrow(`in use by PID ${process.pid}`);

    await first.stop();
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(false);

    messages.length = 0;
    const second = track(await startEmbeddedCluster({ dataDir, log }));
    expect(messages.some((m) => m.includes('initializing'))).toBe(false);
    const rows = await withSql(second.url, (sql) => sql<{ v: string }[]>`select v from kept`);
    expect(rows.map((r) => r.v)).toEqual(['hello']);
    await second.stop();
  }, 60_000);

  it('recovers when the owning process was SIGKILLed and left the server running', async () => {
    const dataDir = await tempDataDir();
    const owner = await spawnOwner(dataDir);
    await withSql(owner.url, (sql) => sql.unsafe(`create table kept (v text); insert into kept values ('survived')`));
    const pgData = path.join(dataDir, 'pgdata');
    const orphan = postmasterPid(pgData);

    owner.child.kill('SIGKILL');
    await owner.exited;
    expect(orphan && running(orphan)).toBe(true); // the server outlives its owner

    const messages: string[] = [];
    const cluster = track(await startEmbeddedCluster({ dataDir, log: (m) => void messages.push(m) }));
    expect(messages.some((m) => m.includes('left running'))).toBe(true);
    expect(postmasterPid(pgData)).not.toBe(orphan);
    const rows = await withSql(cluster.url, (sql) => sql<{ v: string }[]>`select v from kept`);
    expect(rows.map((r) => r.v)).toEqual(['survived']);
    await cluster.stop();
  }, 60_000);

  it('recovers when the server itself was SIGKILLed and left a stale postmaster.pid', async () => {
    const dataDir = await tempDataDir();
    const pgData = path.join(dataDir, 'pgdata');
    const crash = async (): Promise<void> => {
      const pid = postmasterPid(pgData);
      if (!pid) throw new Error('no postmaster.pid');
      process.kill(pid, 'SIGKILL');
      await waitFor(async () => (await serverProcesses(pgData)).length === 0, 'server processes to exit');
      expect(existsSync(path.join(pgData, 'postmaster.pid'))).toBe(true);
      // The owner dies too: its lock is left behind, naming a dead PID.
      await fs.writeFile(path.join(dataDir, 'switchboard.lock'), '999999\n');
    };
    const readKept = (cluster: RunningCluster) =>
      withSql(cluster.url, (sql) => sql<{ v: string }[]>`select v from kept`).then((rows) => rows.map((r) => r.v));

    const first = track(await startEmbeddedCluster({ dataDir, log: quiet }));
    await withSql(first.url, (sql) => sql.unsafe(`create table kept (v text); insert into kept values ('durable')`));
    await crash();

    // The stale PID is dead: PostgreSQL replaces the lock file itself.
    const second = track(await startEmbeddedCluster({ dataDir, log: quiet }));
    expect(await readKept(second)).toEqual(['durable']);
    await crash();

    // The stale PID now belongs to an unrelated live process (here: this test worker).
    const pidFile = path.join(pgData, 'postmaster.pid');
    const lines = (await fs.readFile(pidFile, 'utf8')).split('\n');
    lines[0] = String(process.pid);
    await fs.writeFile(pidFile, lines.join('\n'));
    const messages: string[] = [];
    const third = track(await startEmbeddedCluster({ dataDir, log: (m) => void messages.push(m) }));
    expect(messages.some((m) => m.includes('stale postmaster.pid'))).toBe(true);
    expect(await readKept(third)).toEqual(['durable']);
    // stop() of an earlier, crashed cluster object must not touch the running one.
    await first.stop();
    expect(await readKept(third)).toEqual(['durable']);
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(true);
    await third.stop();
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(false);
  }, 60_000);

  it('refuses to start while another live process holds the data directory', async () => {
    const dataDir = await tempDataDir();
    const owner = await spawnOwner(dataDir);

    const attempt = startEmbeddedCluster({ dataDir, log: quiet });
    await expect(attempt).rejects.toThrow(`in use by PID ${owner.pid}`);
    await expect(attempt).rejects.toThrow('SWITCHBOARD_DATABASE_URL');
    // The owner's server is untouched, and other processes can find it.
    expect((await findRunningEmbeddedCluster(dataDir))?.url).toBe(owner.url);
    const [row] = await withSql(owner.url, (sql) => sql`select 1 as one`);
    expect(row?.['one']).toBe(1);

    owner.child.kill('SIGTERM');
    await owner.exited;
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(false);
    expect(await findRunningEmbeddedCluster(dataDir)).toBeUndefined();
  }, 60_000);

  it.runIf(isRoot)('explains when the postgres OS user cannot reach the data directory', async () => {
    const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'sbembed-'));
    cleanups.push(() => fs.rm(parent, { recursive: true, force: true }));
    const dataDir = path.join(parent, 'db');
    await expect(startEmbeddedCluster({ dataDir, log: quiet })).rejects.toThrow(`cannot enter ${parent}`);
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(false);
  });
});
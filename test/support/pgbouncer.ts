// A real PgBouncer (Debian `pgbouncer`, installed by .ci/run) in front of a test PostgreSQL, for the
// connection-pooler tests. It refuses to run as root: as root it runs as the `postgres` OS user.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { chownToPgUser, isRoot, pgOsUser, PG_OS_USER } from '../../src/db/cluster/os-user.ts';
import { freePort, sleep } from './processes.ts';

const PREFIX = 'sbbouncer-';

export const PGBOUNCER_BIN = '/usr/sbin/pgbouncer';
export const pgbouncerInstalled = (): boolean => existsSync(PGBOUNCER_BIN);

export interface PgBouncer {
  port: number;
  /** `databaseUrl` (a database on the upstream server) reached through the pooler instead. */
  url(databaseUrl: string): string;
  /** Client connections PgBouncer holds to `database` (its admin console's SHOW CLIENTS). */
  clients(database: string): Promise<number>;
  /** The pooler's log so far (for a failing test's message). */
  log(): Promise<string>;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Any URL on the upstream server: its host, port, user and password are what PgBouncer logs in with. */
  upstreamUrl: string;
  poolMode?: 'transaction' | 'session';
  /** Server connections per database and user. */
  poolSize?: number;
}

/**
 * Starts PgBouncer on a free 127.0.0.1 port, every database name passed through to the upstream
 * server (`* =`), clients admitted without a password (auth_type trust; the user must still be in
 * the userlist). stop() ends it and deletes its directory.
 */
export async function startPgBouncer(opts: PgBouncerOptions): Promise<PgBouncer> {
  await sweepPgBouncers();
  const up = new URL(opts.upstreamUrl);
  const user = decodeURIComponent(up.username) || 'postgres';
  const password = decodeURIComponent(up.password);
  const port = await freePort();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), PREFIX));
  await fs.writeFile(path.join(dir, 'owner'), String(process.pid));
  const logFile = path.join(dir, 'pgbouncer.log');
  const quote = (v: string) => `'${v.replace(/'/g, "''")}'`;
  const upstream = [`host=${up.hostname}`, `port=${up.port || '5432'}`, `user=${quote(user)}`, ...(password ? [`password=${quote(password)}`] : [])];
  const ini = [
    '[databases]',
    `* = ${upstream.join(' ')}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `admin_users = ${user}`,
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    `pool_mode = ${opts.poolMode ?? 'transaction'}`,
    `default_pool_size = ${opts.poolSize ?? 2}`,
    'min_pool_size = 0',
    'reserve_pool_size = 0',
    'max_client_conn = 500',
    // A client waits for a server connection rather than failing (the test drives bursts).
    'query_wait_timeout = 60',
    `logfile = ${logFile}`,
    `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
    '',
  ].join('\n');
  await fs.writeFile(path.join(dir, 'pgbouncer.ini'), ini);
  await fs.writeFile(path.join(dir, 'userlist.txt'), `"${user}" ""\n`);
  await pgOsUser();
  await chownToPgUser(dir);
  for (const f of ['pgbouncer.ini', 'userlist.txt']) await chownToPgUser(path.join(dir, f));

  const argv = [PGBOUNCER_BIN, path.join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = isRoot()
    ? spawn('runuser', ['-u', PG_OS_USER, '--', ...argv], { cwd: '/', stdio: ['ignore', 'ignore', 'pipe'] })
    : spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => void (stderr += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let done = false;
  void exited.then(() => void (done = true));

  const readLog = async () => `${stderr}${await fs.readFile(logFile, 'utf8').catch(() => '')}`;
  const stop = async () => {
    const pid = Number((await fs.readFile(path.join(dir, 'pgbouncer.pid'), 'utf8').catch(() => '')).trim());
    // runuser does not pass signals on: signal PgBouncer itself (SIGTERM: immediate shutdown).
    if (pid > 0) process.kill(pid, 'SIGTERM');
    else child.kill('SIGTERM');
    await Promise.race([exited, sleep(5_000)]);
    if (!done) child.kill('SIGKILL');
    await fs.rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (done || Date.now() > deadline) {
      const text = await readLog();
      await stop().catch(() => {});
      throw new Error(`pgbouncer did not start on 127.0.0.1:${port}:\n${text}`);
    }
    await sleep(25);
  }
  return {
    port,
    url: (databaseUrl) => {
      const u = new URL(databaseUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    clients: async (database) => {
      const admin = postgres(`postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/pgbouncer`, { max: 1, fetch_types: false, onnotice: () => {} });
      try {
        // The admin console speaks only the simple query protocol.
        const rows = await admin`show clients`.simple();
        return rows.filter((r) => r.database === database).length;
      } finally {
        await admin.end({ timeout: 5 });
      }
    },
    log: readLog,
    stop,
  };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Ends the poolers of test runs that died before their afterAll (their owner process is gone). */
async function sweepPgBouncers(): Promise<void> {
  const names = (await fs.readdir(os.tmpdir()).catch(() => [] as string[])).filter((n) => n.startsWith(PREFIX));
  for (const name of names) {
    const dir = path.join(os.tmpdir(), name);
    const owner = Number(await fs.readFile(path.join(dir, 'owner'), 'utf8').catch(() => '0'));
    if (owner > 0 && alive(owner)) continue;
    if (owner === 0 && Date.now() - ((await fs.stat(dir).catch(() => undefined))?.mtimeMs ?? 0) < 60_000) continue;
    const pid = Number((await fs.readFile(path.join(dir, 'pgbouncer.pid'), 'utf8').catch(() => '')).trim());
    const cmdline = pid > 0 ? await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '') : '';
    if (cmdline.includes(dir)) process.kill(pid, 'SIGTERM');
    await fs.rm(dir, { recursive: true, force: true });
  }
}

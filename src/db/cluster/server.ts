// initdb, start and stop of one PostgreSQL data directory (PGDATA) with pg_ctl.

import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chownToPgUser, isRoot, PG_OS_USER, runAsPgUser } from './os-user.ts';
import { errorText, isAlive } from './processes.ts';
import type { ClusterLog } from './types.ts';

const SUPERUSER = 'postgres';
// sun_path is 108 bytes on Linux; leave room for "/.s.PGSQL.65535.lock".
const MAX_SOCKET_DIR_LENGTH = 80;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error('could not pick a free port'))));
    });
  });
}

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

async function fileSize(file: string): Promise<number> {
  return (await fs.stat(file).catch(() => undefined))?.size ?? 0;
}

/** The log written since byte `from`, trimmed to the last lines. */
async function logTail(logFile: string, from = 0, lines = 30): Promise<string> {
  const text = await fs.readFile(logFile, 'utf8').catch(() => '');
  const recent = text.length >= from ? text.slice(from) : text;
  return recent.trimEnd().split('\n').slice(-lines).join('\n');
}

interface PostmasterPid {
  file: string;
  pid: number;
  pgData: string | undefined;
  port: number | undefined;
}

export async function readPostmasterPid(pgData: string): Promise<PostmasterPid | undefined> {
  const file = path.join(pgData, 'postmaster.pid');
  const text = await fs.readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const lines = text.split('\n');
  return {
    file,
    pid: Number(lines[0]),
    pgData: lines[1],
    port: lines[3] ? Number(lines[3]) : undefined,
  };
}

/** Whether `pid` is a postmaster serving `pgData` (it chdirs into its data directory). */
export async function isPostmasterFor(pid: number, pgData: string): Promise<boolean> {
  const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return existsSync('/proc') ? false : isAlive(pid); // no procfs: trust the pid file
  if (path.basename(cmdline.split('\0')[0] ?? '') !== 'postgres') return false;
  const real = await fs.realpath(pgData).catch(() => pgData);
  const cwd = await fs.readlink(`/proc/${pid}/cwd`).catch(() => undefined);
  return cwd === undefined ? cmdline.includes(pgData) || cmdline.includes(real) : cwd === real;
}

export function stopCommandHint(binDir: string, pgData: string): string {
  const cmd = `${path.join(binDir, 'pg_ctl')} stop -D ${pgData} -m fast`;
  return isRoot() ? `runuser -u ${PG_OS_USER} -- ${cmd}` : cmd;
}

/**
 * Deals with a postmaster.pid left behind when the process that started the
 * server died without stopping it (e.g. SIGKILL): the server keeps running as an
 * orphan and a new start would fail with "lock file postmaster.pid already exists".
 */
export async function clearLeftoverServer(binDir: string, pgData: string, log: ClusterLog): Promise<void> {
  const leftover = await readPostmasterPid(pgData);
  if (!leftover) return;
  const { file, pid, port } = leftover;
  if (!Number.isInteger(pid) || pid <= 0) {
    log('removing unreadable PostgreSQL lock file', { file });
    await fs.rm(file, { force: true });
    return;
  }
  if (!isAlive(pid)) {
    // PostgreSQL itself replaces a lock file whose PID is gone; startServer()
    // removes it if the server still refuses.
    log('found postmaster.pid of a PostgreSQL server that is no longer running', { file, pid });
    return;
  }
  if (await isPostmasterFor(pid, pgData)) {
    log('PostgreSQL left running by a previous switchboard process that did not shut down; stopping it', {
      pid,
      port,
      pgData,
    });
    try {
      await runAsPgUser(path.join(binDir, 'pg_ctl'), ['stop', '-D', pgData, '-m', 'fast', '-w', '-t', '60']);
    } catch (err) {
      throw new Error(
        `A PostgreSQL server (PID ${pid}) is still running on ${pgData} and could not be stopped: ` +
          `${errorText(err)}\nStop it with \`${stopCommandHint(binDir, pgData)}\` (or \`kill ${pid}\`) and start again.`,
      );
    }
    return;
  }
  // The PID was reused by an unrelated process after a crash or reboot.
  log('removing stale postmaster.pid whose PID now belongs to another program', { file, pid });
  await fs.rm(file, { force: true });
}

interface StartOptions {
  binDir: string;
  pgData: string;
  logFile: string;
  socketDir: string;
  settings: Record<string, string>;
  log: ClusterLog;
}

/** pg_ctl start on a fresh free port; retries when the port got taken or a stale lock file blocks. */
export async function startServer(opts: StartOptions): Promise<number> {
  const pgCtl = path.join(opts.binDir, 'pg_ctl');
  let lastError = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const serverArgs = [
      `-p ${port}`,
      `-k ${shellQuote(opts.socketDir)}`,
      '-c listen_addresses=127.0.0.1',
      ...Object.entries(opts.settings).map(([k, v]) => `-c ${k}=${shellQuote(v)}`),
    ].join(' ');
    const logStart = await fileSize(opts.logFile);
    try {
      // -l is essential: without it the server inherits our stdout/stderr pipes
      // and the call never returns.
      await runAsPgUser(pgCtl, ['start', '-w', '-t', '60', '-D', opts.pgData, '-l', opts.logFile, '-o', serverArgs]);
      return port;
    } catch (err) {
      const tail = await logTail(opts.logFile, logStart);
      lastError = `${errorText(err)}\n--- ${opts.logFile} (last lines) ---\n${tail}`;
      if (/could not bind|Address already in use/i.test(tail)) continue;
      if (/lock file "postmaster\.pid" already exists/.test(tail)) {
        const leftover = await readPostmasterPid(opts.pgData);
        if (leftover && isAlive(leftover.pid) && (await isPostmasterFor(leftover.pid, opts.pgData))) {
          throw new Error(
            `PostgreSQL in ${opts.pgData} is already running as PID ${leftover.pid}. Stop it with ` +
              `\`${stopCommandHint(opts.binDir, opts.pgData)}\` and start again.\n${lastError}`,
          );
        }
        opts.log('PostgreSQL refused to start because of a stale postmaster.pid; removing it', {
          file: path.join(opts.pgData, 'postmaster.pid'),
          pid: leftover?.pid,
        });
        await fs.rm(path.join(opts.pgData, 'postmaster.pid'), { force: true });
        continue;
      }
      if (/shared memory block is still in use/.test(tail)) {
        throw new Error(
          `PostgreSQL in ${opts.pgData} cannot start because processes of a previous server still ` +
            `hold its shared memory. Find them with \`ps -u ${isRoot() ? PG_OS_USER : os.userInfo().username} ` +
            `-f | grep postgres\`, kill them, then start again.\n${lastError}`,
        );
      }
      break;
    }
  }
  throw new Error(
    `Could not start PostgreSQL (data ${opts.pgData}). If the problem is a leftover server, stop it with ` +
      `\`${stopCommandHint(opts.binDir, opts.pgData)}\`; if no server is running, delete ` +
      `${path.join(opts.pgData, 'postmaster.pid')} and start again.\n${lastError}`,
  );
}

/** pg_ctl stop, unless the server we started is already gone (a crash, or a later start replaced it). */
export async function stopServer(
  binDir: string,
  pgData: string,
  serverPid: number | undefined,
  mode: 'fast' | 'immediate',
): Promise<void> {
  const current = await readPostmasterPid(pgData);
  if (!current || !isAlive(current.pid) || (serverPid !== undefined && current.pid !== serverPid)) return;
  await runAsPgUser(path.join(binDir, 'pg_ctl'), ['stop', '-D', pgData, '-m', mode, '-w', '-t', '60']);
}

export function socketDirFor(preferred: string): string {
  return preferred.length <= MAX_SOCKET_DIR_LENGTH ? preferred : os.tmpdir();
}

export function serverUrl(port: number, database: string, password?: string): string {
  const auth = password ? `${SUPERUSER}:${encodeURIComponent(password)}` : SUPERUSER;
  return `postgres://${auth}@127.0.0.1:${port}/${database}`;
}

export async function initCluster(opts: {
  binDir: string;
  pgData: string;
  dataDir: string;
  password?: string;
  durable: boolean;
}): Promise<void> {
  // initdb into a side directory and rename, so a crash during initdb never
  // leaves a half-initialised pgdata behind.
  const staging = `${opts.pgData}.initializing`;
  await fs.rm(staging, { recursive: true, force: true });
  await fs.mkdir(staging, { mode: 0o700 });
  await chownToPgUser(staging);
  const args = ['-D', staging, '-U', SUPERUSER, '--encoding=UTF8', '--no-locale'];
  let pwFile: string | undefined;
  if (opts.password) {
    pwFile = path.join(opts.dataDir, `.initdb-pw-${process.pid}`);
    await fs.writeFile(pwFile, `${opts.password}\n`, { mode: 0o600 });
    await chownToPgUser(pwFile);
    args.push('-A', 'scram-sha-256', `--pwfile=${pwFile}`);
  } else {
    args.push('-A', 'trust');
  }
  if (!opts.durable) args.push('--no-sync');
  try {
    await runAsPgUser(path.join(opts.binDir, 'initdb'), args);
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true });
    throw new Error(`initdb failed for ${opts.pgData}: ${errorText(err)}`);
  } finally {
    if (pwFile) await fs.rm(pwFile, { force: true });
  }
  await fs.rename(staging, opts.pgData);
}

export async function killPostmaster(pgData: string): Promise<void> {
  const pm = await readPostmasterPid(pgData);
  if (!pm || !isAlive(pm.pid) || !(await isPostmasterFor(pm.pid, pgData))) return;
  // SIGQUIT = immediate shutdown; the postmaster takes its children down with it.
  process.kill(pm.pid, 'SIGQUIT');
  for (let i = 0; i < 50 && isAlive(pm.pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pm.pid)) process.kill(pm.pid, 'SIGKILL');
}

export function once(fn: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= fn());
}

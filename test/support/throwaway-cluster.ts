// Throwaway PostgreSQL clusters for tests and benchmarks: non-durable, trust authentication,
// in a new /tmp/sbpg-XXXXXX/{owner,postgres.log,data/,.s.PGSQL.*}; stop() kills it and deletes the directory.

import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { locateBinaries, serverVersion } from '../../src/db/cluster/binaries.ts';
import { chownToPgUser, pgOsUser, reachableBinDir } from '../../src/db/cluster/os-user.ts';
import { ownerIsAlive, ownerRecordText, readOwnerRecord } from '../../src/db/cluster/processes.ts';
import {
  initCluster,
  killPostmaster,
  once,
  readPostmasterPid,
  serverUrl,
  socketDirFor,
  startServer,
  stopServer,
} from '../../src/db/cluster/server.ts';
import type { RunningCluster } from '../../src/db/cluster/types.ts';

export type { RunningCluster };

const THROWAWAY_PREFIX = 'sbpg-';

/**
 * Starts a disposable, non-durable cluster in a new `sbpg-*` temp directory with
 * trust authentication. stop() kills it and deletes the directory.
 */
export async function startThrowawayCluster(opts: { prefer?: 'system' | 'embedded'; durable?: boolean } = {}): Promise<RunningCluster> {
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
      settings: opts.durable
        ? { max_connections: '200' }
        : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '200' },
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
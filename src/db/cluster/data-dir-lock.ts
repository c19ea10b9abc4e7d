// <dataDir>/switchboard.lock: one switchboard process per embedded data directory.

import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ownerIsAlive, ownerRecordText, readOwnerRecord } from './processes.ts';

// while a leftover lock carrying our PID from an earlier boot/container is not.
const heldLocks = new Map<string, string>(); // lock file -> token

export interface DataDirLock {
  file: string;
  token: string;
}

export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
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

export async function releaseDataDirLock(lock: DataDirLock): Promise<void> {
  if (heldLocks.get(lock.file) === lock.token) heldLocks.delete(lock.file);
  const holder = await readOwnerRecord(lock.file);
  if (holder?.pid === process.pid && holder.token === lock.token) await fs.rm(lock.file, { force: true });
}

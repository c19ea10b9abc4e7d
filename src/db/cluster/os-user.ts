// PostgreSQL refuses to run as root: when we are root, its binaries run as the `postgres` OS user.

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { hasServerBinaries } from './binaries.ts';
import { errorText } from './processes.ts';
import type { ClusterLog } from './types.ts';

const execFileAsync = promisify(execFile);

export const PG_OS_USER = 'postgres';
const RUNTIME_COPY_ROOT = '/var/lib/switchboard/pg-runtime';

export const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

interface PgUser {
  uid: number;
  gid: number;
}

let pgUserPromise: Promise<PgUser | null> | undefined;

/** null when not root (binaries run as ourselves). Creates the `postgres` OS user if missing. */
export function pgOsUser(): Promise<PgUser | null> {
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

export async function runAsPgUser(
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

export async function chownToPgUser(target: string): Promise<void> {
  const user = await pgOsUser();
  if (user) await fs.chown(target, user.uid, user.gid);
}

/**
 * Returns a bin dir the postgres OS user can execute. When root and the
 * binaries live somewhere it cannot reach (e.g. node_modules under /root),
 * copies the whole installation (bin, lib, share; symlinks kept) to
 * /var/lib/switchboard/pg-runtime/<version>.
 */
export async function reachableBinDir(binDir: string, version: string, log?: ClusterLog): Promise<string> {
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
export async function assertPgUserCanReach(dir: string): Promise<void> {
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

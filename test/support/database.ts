import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { inject } from 'vitest';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function adminSql(url: string): postgres.Sql {
  return postgres(url, { max: 1, onnotice: () => undefined, connect_timeout: 10 });
}

/**
 * Creates an empty database `sbtest_<random>` on the test server and returns its
 * URL. Intended use: one per test file, created in beforeAll, dropped in afterAll.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `sbtest_${randomBytes(6).toString('hex')}`;
  const admin = adminSql(adminUrl);
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;

  let dropped = false;
  return {
    url: url.toString(),
    name,
    async drop() {
      if (dropped) return;
      dropped = true;
      const sql = adminSql(adminUrl);
      try {
        await sql`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`;
        await sql.unsafe(`drop database if exists "${name}"`);
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
  };
}

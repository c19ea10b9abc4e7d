import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/support/database.ts';
import { connect, type Sql } from './connect.ts';
import { listMigrations, migrate } from './migrate.ts';

let db: TestDatabase;
const pools: Sql[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end({ timeout: 5 })));
  await db.drop();
});

describe('migrate', () => {
  it('applies every file exactly once when three instances start together, then nothing on a re-run', async () => {
    const [a, b, c] = [0, 1, 2].map(() => connect(db.url, { max: 2 }));
    pools.push(a!, b!, c!);
    const results = await Promise.all([migrate(a!), migrate(b!), migrate(c!)]);
    const files = (await listMigrations()).map((m) => m.file);
    expect(results.flat().sort()).toEqual(files);
    const rows = await a!`select version, count(*)::int as n from schema_migrations group by version`;
    expect(rows.every((r) => r.n === 1)).toBe(true);
    expect(rows).toHaveLength(files.length);
    expect(await migrate(a!)).toEqual([]);
  });

  it('compresses bodies, payloads and results with lz4 where the server has it (0018)', async () => {
    const sql = connect(db.url, { max: 1 });
    pools.push(sql);
    await migrate(sql);
    const [{ lz4 }] = (await sql`
      select exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) as lz4`) as unknown as [{ lz4: boolean }];
    const columns = await sql<{ col: string; compression: string }[]>`
      select attrelid::regclass::text || '.' || attname as col, attcompression::text as compression from pg_attribute
      where (attrelid = 'todos'::regclass and attname in ('payload', 'result')) or (attrelid = 'events'::regclass and attname in ('payload', 'headers'))
      order by 1`;
    const expected = lz4 ? 'l' : '';
    expect(columns).toEqual(['events.headers', 'events.payload', 'todos.payload', 'todos.result'].map((col) => ({ col, compression: expected })));
  });

  it('rolls a failing file back and names it', async () => {
    const other = await createTestDatabase();
    const sql = connect(other.url, { max: 1 });
    try {
      const { mkdtemp, writeFile } = await import('node:fs/promises');
      const { tmpdir } = await import('node:os');
      const dir = `${await mkdtemp(`${tmpdir()}/sbmig-`)}/`;
      await writeFile(`${dir}0001_ok.sql`, 'create table one (id int);');
      await writeFile(`${dir}0002_broken.sql`, 'create table two (id int); select no_such_function();');
      await expect(migrate(sql, { dir })).rejects.toThrow(/0002_broken\.sql/);
      const [t] = await sql`select to_regclass('two') as two, to_regclass('one') as one`;
      expect(t).toEqual({ two: null, one: 'one' });
    } finally {
      await sql.end({ timeout: 5 });
      await other.drop();
    }
  });
});

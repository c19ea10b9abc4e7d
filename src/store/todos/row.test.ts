import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { TODO_ROW_COLUMNS } from './row.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;

beforeAll(async () => {
  db = await migratedDatabase();
});
afterAll(async () => db.drop());

describe('TODO_ROW_COLUMNS', () => {
  it("names every column of the todos table but seq, and no other (a statement that reads all but some reads them from it)", async () => {
    const columns = await db.sql<{ name: string }[]>`
      select attname as name from pg_attribute
      where attrelid = 'todos'::regclass and attnum > 0 and not attisdropped and attname <> 'seq'`;
    expect(columns.map((c) => c.name).sort()).toEqual([...TODO_ROW_COLUMNS].sort());
  });
});

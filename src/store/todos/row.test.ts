import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { TODO_ROW_COLUMNS, todoMetaColumns } from './row.ts';

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

describe('todoMetaColumns', () => {
  it('reads every column of a TodoRow but the payload, event_id as text, on the given alias', async () => {
    const list = todoMetaColumns('t');
    expect(list).not.toMatch(/\bpayload\b/);
    expect(list).toContain('t.payload_size');
    expect(list).toContain('t.event_id::text as event_id');
    expect(list.split(', ')).toHaveLength(TODO_ROW_COLUMNS.length - 1);
    // The list is valid SQL against the table.
    await db.sql.unsafe(`select ${list} from todos t limit 0`);
  });
});

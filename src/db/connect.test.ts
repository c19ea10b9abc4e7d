import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import { connect } from './connect.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
beforeAll(async () => {
  db = await migratedDatabase();
});
afterAll(async () => db?.drop());

const planCacheMode = async (prepare: boolean) => {
  const sql = connect(db.url, { max: 1, prepare });
  try {
    const [row] = await sql<{ mode: string }[]>`select current_setting('plan_cache_mode') as mode`;
    return row!.mode;
  } finally {
    await sql.end();
  }
};

describe('connect', () => {
  it('a pool of prepared statements has each planned once per connection (force_generic_plan)', async () => {
    expect(await planCacheMode(true)).toBe('force_generic_plan');
  });

  it('a pool for a transaction-mode pooler (unnamed statements) sends no plan_cache_mode: the server default stands', async () => {
    expect(await planCacheMode(false)).toBe('auto');
  });
});

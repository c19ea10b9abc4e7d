import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import { connect } from './connect.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
beforeAll(async () => {
  db = await migratedDatabase();
});
afterAll(async () => db?.drop());

const settingOf = async (prepare: boolean, name: string) => {
  const sql = connect(db.url, { max: 1, prepare });
  try {
    const [row] = await sql<{ value: string }[]>`select current_setting(${name}) as value`;
    return row!.value;
  } finally {
    await sql.end();
  }
};
const planCacheMode = (prepare: boolean) => settingOf(prepare, 'plan_cache_mode');

describe('connect', () => {
  it('a pool of prepared statements has each planned once per connection (force_generic_plan)', async () => {
    expect(await planCacheMode(true)).toBe('force_generic_plan');
  });

  it('a pool for a transaction-mode pooler (unnamed statements) sends no plan_cache_mode: the server default stands', async () => {
    expect(await planCacheMode(false)).toBe('auto');
  });

  it('a direct pool turns JIT compilation off; one for a pooler sends nothing (the role or database decides)', async () => {
    expect(await settingOf(true, 'jit')).toBe('off');
    expect(await settingOf(false, 'jit')).toBe('on'); // PostgreSQL's default, which the throwaway cluster keeps
  });
});

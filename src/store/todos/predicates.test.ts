import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { live, liveKey } from './predicates.ts';

/**
 * Migration 0001's todos_live_key_idx spells the live predicate in SQL, and insertEventAndTodo's
 * ON CONFLICT must repeat it to infer that index. The database normalises both, so build an index
 * from the code's predicate and compare the two as PostgreSQL prints them.
 */

let db: Awaited<ReturnType<typeof migratedDatabase>>;

beforeAll(async () => {
  db = await migratedDatabase();
});
afterAll(async () => db?.drop());

async function indexPredicate(sql: typeof db.sql, name: string): Promise<string> {
  const [row] = await sql<{ predicate: string }[]>`
    select pg_get_expr(i.indpred, i.indrelid) as predicate
    from pg_index i join pg_class c on c.oid = i.indexrelid where c.relname = ${name}`;
  if (!row) throw new Error(`no index ${name}`);
  return row.predicate;
}

describe('todo predicates', () => {
  it('the live-key index of the migrations is the predicate the code uses', async () => {
    const fromCode = await db.sql.begin(async (tx) => {
      await tx`create index live_key_probe on todos (endpoint_id, idempotency_key) where ${liveKey(tx)}`;
      const predicate = await indexPredicate(tx as unknown as typeof db.sql, 'live_key_probe');
      await tx`drop index live_key_probe`;
      return predicate;
    });
    expect(await indexPredicate(db.sql, 'todos_live_key_idx')).toBe(fromCode);
  });

  it('live is pending, claimed, or failed with a retry to come (never canceled)', async () => {
    const cases = [
      { state: 'pending', retry: false, live: true },
      { state: 'claimed', retry: false, live: true },
      { state: 'failed', retry: true, live: true },
      { state: 'failed', retry: false, live: false },
      { state: 'done', retry: false, live: false },
      { state: 'canceled', retry: false, live: false },
    ];
    for (const c of cases) {
      const [row] = await db.sql<{ live: boolean }[]>`
        select ${live(db.sql)} as live
        from (select ${c.state}::text as state, ${c.retry ? new Date() : null}::timestamptz as next_retry_at) todos`;
      expect({ ...c, live: row!.live }).toEqual(c);
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { deadLetter, finished, live, liveKey } from './predicates.ts';

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

  it('the finished index of the migrations is the predicate retention uses', async () => {
    const fromCode = await db.sql.begin(async (tx) => {
      await tx`create index finished_probe on todos (updated_at) where ${finished(tx)}`;
      const predicate = await indexPredicate(tx as unknown as typeof db.sql, 'finished_probe');
      await tx`drop index finished_probe`;
      return predicate;
    });
    expect(await indexPredicate(db.sql, 'todos_finished_idx')).toBe(fromCode);
  });

  it('finished is exactly not live, and a dead letter is failed with no retry to come, as isDead says', async () => {
    const { isDead } = await import('./row.ts');
    for (const state of ['pending', 'claimed', 'failed', 'done', 'canceled']) {
      for (const retry of [false, true]) {
        const next_retry_at = retry ? new Date() : null;
        const [row] = await db.sql<{ live: boolean; finished: boolean; dead: boolean }[]>`
          select ${live(db.sql)} as live, ${finished(db.sql)} as finished, ${deadLetter(db.sql)} as dead
          from (select ${state}::text as state, ${next_retry_at}::timestamptz as next_retry_at) todos`;
        expect({ state, retry, finished: row!.finished }).toEqual({ state, retry, finished: !row!.live });
        expect({ state, retry, dead: row!.dead }).toEqual({ state, retry, dead: isDead({ state: state as never, next_retry_at }) });
      }
    }
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

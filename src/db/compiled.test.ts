import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import { arg, compile, compiledPer, rowsBucket } from './compiled.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
beforeAll(async () => {
  db = await migratedDatabase();
});
afterAll(async () => db?.drop());

describe('compile', () => {
  it('renders nested fragments once, each arg one numbered parameter however often it appears', () => {
    const sql = db.sql;
    const n = arg<number>('n');
    const inner = sql`${n}::int + ${n}::int`;
    const c = compile<{ n: number; label: string }>(sql`select ${inner} as twice, ${arg<string>('label')}::text as label, ${n}::int as once`);
    expect(c.text).toBe('select $1::int + $1::int as twice, $2::text as label, $1::int as once');
  });

  it('runs as often as asked with new values, constants (sql.json included) fixed at composition', async () => {
    const sql = db.sql;
    const c = compile<{ day: Date; tags: string[] }>(
      sql`select ${arg<Date>('day')}::timestamptz as day, ${arg<string[]>('tags')}::text[] as tags, ${sql.json({ k: 1 })}::jsonb as fixed, ${'const'}::text as word`,
    );
    for (const [day, tags] of [[new Date('2026-01-02T03:04:05Z'), ['a', 'b']], [new Date('2027-05-06T07:08:09Z'), ['c']]] as const) {
      const [row] = await c.run<{ day: Date; tags: string[]; fixed: unknown; word: string }>(sql, { day, tags: [...tags] });
      expect(row).toEqual({ day, tags: [...tags], fixed: { k: 1 }, word: 'const' });
    }
  });

  it('writes an identifier (sql(name)) into the text, not as a parameter', async () => {
    const sql = db.sql;
    const c = compile<{ n: number }>(sql`select ${arg<number>('n')}::int as ${sql('my column')}`);
    expect(c.text).toBe('select $1::int as "my column"');
    expect(await c.run(sql, { n: 7 })).toEqual([{ 'my column': 7 }]);
  });

  it('compiledPer composes each variant once, on first use', async () => {
    const composed: number[] = [];
    const statementFor = compiledPer<number, { n: number }>(
      (k) => k,
      (sql, k) => (composed.push(k), sql`select ${arg<number>('n')}::int + ${k}::int as sum`),
    );
    expect(await statementFor(db.sql, 1).run(db.sql, { n: 2 })).toEqual([{ sum: 3 }]);
    expect(await statementFor(db.sql, 1).run(db.sql, { n: 5 })).toEqual([{ sum: 6 }]);
    expect(await statementFor(db.sql, 10).run(db.sql, { n: 5 })).toEqual([{ sum: 15 }]);
    expect(statementFor(db.sql, 1)).toBe(statementFor(db.sql, 1));
    expect(composed).toEqual([1, 10]);
  });

  it('refuses a run missing a value, naming it, and a statement that is not a postgres.js query', async () => {
    const c = compile<{ a: number; b: number }>(db.sql`select ${arg<number>('a')}::int + ${arg<number>('b')}::int`);
    expect(() => c.run(db.sql, { a: 1 } as never)).toThrow(/no value for b/);
    expect(() => compile('select 1')).toThrow(/not a postgres.js statement/);
  });
});

describe('rowsBucket', () => {
  it('rounds a row count up to a power of two, never below it: 1 to 16 rows take five statements', () => {
    const counts = Array.from({ length: 16 }, (_, i) => i + 1);
    expect(counts.map(rowsBucket)).toEqual([1, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16]);
    expect(new Set(counts.map(rowsBucket)).size).toBe(5);
    expect(rowsBucket(0)).toBe(1);
  });
});

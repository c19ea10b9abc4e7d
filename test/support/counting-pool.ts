import type { Sql } from '../../src/db/connect.ts';

/**
 * A pool that counts the statements sent through it whose text `matches` (compiled statements go
 * through `sql.unsafe`); every other call passes straight through.
 */
export function countingPool(sql: Sql, matches: (text: string) => boolean): { pool: Sql; statements: () => number } {
  let statements = 0;
  const pool = new Proxy(sql, {
    get(target, prop, receiver) {
      if (prop !== 'unsafe') return Reflect.get(target, prop, receiver);
      return (text: string, ...rest: unknown[]) => {
        if (matches(text)) statements++;
        return (target.unsafe as (...a: unknown[]) => unknown)(text, ...rest);
      };
    },
  });
  return { pool, statements: () => statements };
}

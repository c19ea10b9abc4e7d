import type { Sql, TxSql } from './connect.ts';

/**
 * A statement composed once from the same postgres.js fragments as any other, then run many times
 * with new values. Composing a statement costs the driver a promise per fragment and a walk of the
 * tree on every call: for claim_next (about thirty fragments and thirty parameters) that was
 * ~0.4 ms of CPU per claim, more than PostgreSQL spent executing it. A compiled statement renders
 * its text once, with each `arg` as one numbered parameter however often it appears, and runs as
 * a prepared statement by that text (an unnamed one behind a transaction-mode pooler, as usual).
 */

class Arg {
  constructor(readonly key: string) {}
}

/** A value given at each run of a compiled statement, standing in for a `T` while it is composed. */
export const arg = <T>(key: string): T => new Arg(key) as unknown as T;

/** `arg` restricted to the keys of one statement's values (typed as text while composing). */
export const argsOf =
  <Args extends Record<string, unknown>>() =>
  (key: keyof Args & string): string =>
    arg<string>(key);

interface Fragment {
  strings: readonly string[];
  args: readonly unknown[];
}

const isFragment = (v: unknown): v is Fragment =>
  typeof v === 'object' && v !== null && Array.isArray((v as Fragment).strings) && Array.isArray((v as Fragment).args) && 'then' in v;

/** sql('name'): an identifier, already escaped by the driver, that goes into the text itself. */
const isIdentifier = (v: unknown): v is { value: string } =>
  typeof v === 'object' && v !== null && v.constructor?.name === 'Identifier' && typeof (v as { value: unknown }).value === 'string';

/** sql.json(x) and sql.array(x) wrap their value; a compiled statement takes the value itself. */
const unwrapped = (v: unknown): unknown =>
  typeof v === 'object' && v !== null && 'value' in v && 'type' in v && typeof (v as { type: unknown }).type === 'number' ? (v as { value: unknown }).value : v;

export interface Compiled<Args extends Record<string, unknown>> {
  readonly text: string;
  run<Row>(sql: Sql | TxSql, args: Args): Promise<Row[]>;
}

/**
 * Renders a composed statement. Every value in it must be an `arg` or a constant (a constant
 * becomes a parameter fixed at composition); nothing is executed.
 */
export function compile<Args extends Record<string, unknown>>(statement: unknown): Compiled<Args> {
  const order: ({ arg: string } | { constant: unknown })[] = [];
  const argIndex = new Map<string, number>();
  const placeholder = (v: unknown): string => {
    if (v instanceof Arg) {
      let n = argIndex.get(v.key);
      if (n === undefined) {
        order.push({ arg: v.key });
        n = order.length;
        argIndex.set(v.key, n);
      }
      return `$${n}`;
    }
    if (isFragment(v)) return render(v);
    if (isIdentifier(v)) return v.value;
    order.push({ constant: unwrapped(v) });
    return `$${order.length}`;
  };
  const render = (f: Fragment): string => {
    let out = f.strings[0] ?? '';
    for (let i = 1; i < f.strings.length; i++) out += placeholder(f.args[i - 1]) + f.strings[i];
    return out;
  };
  if (!isFragment(statement)) throw new Error('compile: not a postgres.js statement');
  const text = render(statement);
  return {
    text,
    run<Row>(sql: Sql | TxSql, args: Args): Promise<Row[]> {
      const params = order.map((p) => {
        if (!('arg' in p)) return p.constant;
        if (!(p.arg in args)) throw new Error(`compiled statement: no value for ${p.arg}`);
        return args[p.arg];
      });
      return sql.unsafe(text, params as never[], { prepare: true }) as unknown as Promise<Row[]>;
    },
  };
}

/**
 * The row count a statement that takes rows as a set is compiled for: `rows` rounded up to a
 * power of two. Its literal `limit` only tells the planner how few rows to expect, so a statement
 * for 8 serves 5 to 8 rows alike, and each pool connection prepares and plans 5 statements for 1
 * to 16 rows instead of 16.
 */
export const rowsBucket = (rows: number): number => 2 ** Math.ceil(Math.log2(Math.max(1, rows)));

/**
 * One compiled statement per variant of a statement (a number of queues, an event shape, a
 * transition), composed on first use: `keyOf` names the variant, `compose` writes it.
 */
export function compiledPer<V, Args extends Record<string, unknown>>(
  keyOf: (variant: V) => string | number,
  compose: (sql: Sql, variant: V) => unknown,
): (sql: Sql, variant: V) => Compiled<Args> {
  const known = new Map<string | number, Compiled<Args>>();
  return (sql, variant) => {
    const key = keyOf(variant);
    let statement = known.get(key);
    if (!statement) {
      statement = compile<Args>(compose(sql, variant));
      known.set(key, statement);
    }
    return statement;
  };
}

/** A statement with one variant, composed on first use. */
export function compiledOnce<Args extends Record<string, unknown>>(compose: (sql: Sql) => unknown): (sql: Sql) => Compiled<Args> {
  const per = compiledPer<null, Args>(() => 0, (sql) => compose(sql));
  return (sql) => per(sql, null);
}

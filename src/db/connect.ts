import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TxSql = postgres.TransactionSql;
/** A piece of SQL composed with `sql`...``, to go inside another statement. */
export type Fragment = postgres.PendingQuery<postgres.Row[]>;

/** Connections in each instance's main pool (behind PgBouncer: what one instance asks of it). */
export const POOL_MAX = 10;

/**
 * Connections each instance keeps beside its pool for the batched statements (claims, held
 * transitions, deliveries), one statement of a kind pipelined behind another (src/lib/lanes.ts).
 */
export const LANES = 4;

export interface ConnectOptions {
  max?: number;
  applicationName?: string;
  /**
   * False behind a transaction-mode pooler: a named prepared statement lives on one server
   * connection, and the pooler hands the next statement to another. Statements then go as
   * unnamed ones (parse, bind and execute in one round trip), which any server connection takes.
   */
  prepare?: boolean;
}

/** Opens a pool. Timestamps come back as Date, bigint ids as strings (they are opaque ids to us). */
export function connect(url: string, opts: ConnectOptions = {}): Sql {
  const prepare = opts.prepare ?? true;
  return postgres(url, {
    max: opts.max ?? POOL_MAX,
    prepare,
    onnotice: () => {},
    connection: {
      application_name: opts.applicationName ?? 'switchboard',
      // A prepared statement is planned once per connection instead of at every execution. Left
      // to choose, PostgreSQL kept re-planning claim_next (about 0.8 ms of planning for 0.2 ms of
      // work) because its generic estimate of "leases expired before $now" was the pessimistic
      // one; src/store/plans.test.ts holds the hot statements' generic plans to their indexes.
      // No JIT compilation: every statement here is sized for milliseconds, and the planner's cost
      // estimate decides JIT. The unheard sweep's estimate (open rings it cannot count, times a
      // claim lookup per ring) put it far above jit_above_cost: at 100,000 endpoints each of its
      // statements spent 0.99 s of 1.17 s compiling (bench/loops.ts, docs/performance.md).
      // Behind a transaction-mode pooler statements are unnamed, planned each time, and the
      // pooler would refuse an unknown startup parameter, so none is sent there (docs/deploy.md:
      // set jit there on the role or database).
      ...(prepare ? { plan_cache_mode: 'force_generic_plan', jit: 'off' } : {}),
    },
    idle_timeout: 60,
    // The default backoff grows to 10-20 s per connection after a few failed attempts, and a
    // query waits for its connection's next attempt: after a 5 s outage requests hung for up to
    // 16 s (and one for over a minute) after the database was back. Retry at most every second.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
  });
}

/** The lanes' connections: single-connection pools, so a second statement waits on the connection, sent. */
export function connectLanes(url: string, opts: Omit<ConnectOptions, 'max'> = {}): Sql[] {
  return Array.from({ length: LANES }, () => connect(url, { ...opts, max: 1 }));
}

/** Describes a database URL for logs without its password. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparseable database URL>';
  }
}

import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TxSql = postgres.TransactionSql;

/** Opens a pool. Timestamps come back as Date, bigint ids as strings (they are opaque ids to us). */
export function connect(url: string, opts: { max?: number; applicationName?: string } = {}): Sql {
  return postgres(url, {
    max: opts.max ?? 10,
    onnotice: () => {},
    connection: { application_name: opts.applicationName ?? 'switchboard' },
    idle_timeout: 60,
    // The default backoff grows to 10-20 s per connection after a few failed attempts, and a
    // query waits for its connection's next attempt: after a 5 s outage requests hung for up to
    // 16 s (and one for over a minute) after the database was back. Retry at most every second.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
  });
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

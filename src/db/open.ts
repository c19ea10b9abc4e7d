import type { Config } from '../config.ts';
import type { Logger } from '../lib/log.ts';
import { findRunningEmbeddedCluster, startEmbeddedCluster } from './cluster/embedded.ts';
import { connect, redactUrl, type Sql } from './connect.ts';

export interface Database {
  sql: Sql;
  /** For logs: the URL without its password, or where the embedded data lives. */
  description: string;
  close(): Promise<void>;
}

/**
 * Connects to SWITCHBOARD_DATABASE_URL when set; otherwise starts (or attaches to) the embedded
 * PostgreSQL in the data dir. close() ends the pool and stops a cluster this call started.
 */
export interface OpenOptions {
  /** `serve` owns an embedded cluster; `admin` commands may attach to the one a server is running. */
  role?: 'serve' | 'admin';
}

export async function openDatabase(config: Config, log: Logger, opts: OpenOptions = {}): Promise<Database> {
  if (config.databaseUrl) {
    const sql = connect(config.databaseUrl);
    await ping(sql, redactUrl(config.databaseUrl));
    log.info({ database: redactUrl(config.databaseUrl) }, 'database ready');
    return { sql, description: redactUrl(config.databaseUrl), close: () => sql.end({ timeout: 5 }) };
  }
  if (opts.role === 'admin') {
    // A running `serve` owns the cluster: share it rather than fight over the data dir.
    const running = await findRunningEmbeddedCluster(config.dataDir);
    if (running) {
      const sql = connect(running.url, { max: 2 });
      await ping(sql, `embedded PostgreSQL in ${config.dataDir}`);
      return { sql, description: `embedded PostgreSQL in ${config.dataDir}`, close: () => sql.end({ timeout: 5 }) };
    }
  }
  const cluster = await startEmbeddedCluster({
    dataDir: config.dataDir,
    log: (msg, fields) => log.info({ ...fields }, msg),
  });
  const sql = connect(cluster.url);
  try {
    await ping(sql, 'embedded PostgreSQL');
  } catch (err) {
    await cluster.stop().catch(() => {});
    throw err;
  }
  log.info({ data_dir: cluster.dataDir, postgres: cluster.version }, 'database ready (embedded PostgreSQL)');
  return {
    sql,
    description: `embedded PostgreSQL in ${cluster.dataDir}`,
    close: async () => {
      await sql.end({ timeout: 5 });
      await cluster.stop();
    },
  };
}

async function ping(sql: Sql, what: string): Promise<void> {
  try {
    await sql`select 1`;
  } catch (err) {
    throw new Error(`db: cannot reach ${what}: ${(err as Error).message}`, { cause: err });
  }
}

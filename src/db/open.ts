import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, type Config } from '../config.ts';
import type { Logger } from '../lib/log.ts';
import { findRunningEmbeddedCluster, startEmbeddedCluster, type RunningEmbeddedCluster } from './cluster/embedded.ts';
import { Lanes } from '../lib/lanes.ts';
import { connect, connectLanes, redactUrl, type Sql } from './connect.ts';

export interface Database {
  sql: Sql;
  /**
   * A session on PostgreSQL itself, for what a transaction-mode pooler cannot carry: LISTEN
   * (and migrations). The pool on SWITCHBOARD_LISTEN_DATABASE_URL when set; otherwise `sql`.
   */
  direct: Sql;
  /** Connections beside the pool that the batched statements keep to (src/lib/lanes.ts). */
  lanes: Lanes<Sql>;
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
  /** Admin only: create the embedded cluster when the data dir has none (otherwise refuse). */
  init?: boolean;
}

export async function openDatabase(config: Config, log: Logger, opts: OpenOptions = {}): Promise<Database> {
  if (config.databaseUrl) return openUrls(config.databaseUrl, config.listenDatabaseUrl, log);
  if (opts.role === 'admin') {
    // A running `serve` owns the cluster: share it rather than fight over the data dir.
    const running = await findRunningEmbeddedCluster(config.dataDir);
    if (running) {
      const sql = connect(running.url, { max: 2 });
      await ping(sql, `embedded PostgreSQL in ${config.dataDir}`);
      return {
        sql,
        direct: sql,
        lanes: new Lanes([sql]),
        description: `embedded PostgreSQL in ${config.dataDir} (${sharedWith(running)})`,
        close: () => sql.end({ timeout: 5 }),
      };
    }
    // A second terminal without the server's SWITCHBOARD_DATA_DIR must not quietly make a new,
    // empty database whose humans and tokens the running server never sees.
    if (!opts.init && !existsSync(join(config.dataDir, 'pgdata', 'PG_VERSION'))) {
      throw new ConfigError(
        'SWITCHBOARD_DATA_DIR',
        `names ${config.dataDir}, which holds no Switchboard database. Point SWITCHBOARD_DATA_DIR at the data dir \`switchboard serve\` printed, ` +
          'or SWITCHBOARD_DATABASE_URL at its database; pass --init to create a new embedded database here',
      );
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
  const lanes = connectLanes(cluster.url);
  return {
    sql,
    direct: sql,
    lanes: new Lanes(lanes),
    description: `embedded PostgreSQL in ${cluster.dataDir}`,
    close: async () => {
      await endAll([sql, ...lanes]);
      await cluster.stop();
    },
  };
}

/** Whose embedded PostgreSQL an admin command shares: the serve process and the postmaster are two PIDs. */
export function sharedWith(running: Pick<RunningEmbeddedCluster, 'postmasterPid' | 'ownerPid'>): string {
  const server = `PostgreSQL server PID ${running.postmasterPid}`;
  if (running.ownerPid === undefined) return `${server}, whose switchboard process is no longer running`;
  return `shared with the running serve, PID ${running.ownerPid}; ${server}`;
}

/** The main pool, and beside a pooler (a listen URL given) a small pool straight to PostgreSQL. */
async function openUrls(url: string, listenUrl: string | undefined, log: Logger): Promise<Database> {
  const description = redactUrl(url);
  if (!listenUrl) {
    const sql = connect(url);
    await ping(sql, description);
    log.info({ database: description }, 'database ready');
    const lanes = connectLanes(url);
    return { sql, direct: sql, lanes: new Lanes(lanes), description, close: () => endAll([sql, ...lanes]) };
  }
  const sql = connect(url, { prepare: false });
  const lanes = connectLanes(url, { prepare: false });
  // postgres.js gives LISTEN a connection of its own beside this pool; the pool itself serves
  // migrations, one connection at a time.
  const direct = connect(listenUrl, { max: 2, applicationName: 'switchboard-listen' });
  const close = () => endAll([sql, ...lanes, direct]);
  try {
    await ping(sql, description);
    await ping(direct, `${redactUrl(listenUrl)} (SWITCHBOARD_LISTEN_DATABASE_URL)`);
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
  log.info({ database: description, listen_database: redactUrl(listenUrl) }, 'database ready (behind a pooler: LISTEN and migrations on the direct URL)');
  return { sql, direct, lanes: new Lanes(lanes), description, close };
}

async function endAll(pools: Sql[]): Promise<void> {
  await Promise.all(pools.map((p) => p.end({ timeout: 5 })));
}

async function ping(sql: Sql, what: string): Promise<void> {
  try {
    await sql`select 1`;
  } catch (err) {
    throw new Error(`db: cannot reach ${what}: ${(err as Error).message}`, { cause: err });
  }
}

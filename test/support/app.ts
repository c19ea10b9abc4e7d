import { startApp, type App, type AppOptions } from '../../src/app.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { loadConfig } from '../../src/config.ts';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createLogger, type Logger } from '../../src/lib/log.ts';
import { addHuman, createToken } from '../../src/store/humans.ts';
import { createTestDatabase } from './database.ts';

/** A migrated database of this test file's own. */
export async function migratedDatabase(): Promise<{ url: string; sql: Sql; drop(): Promise<void> }> {
  const db = await createTestDatabase();
  const sql = connect(db.url, { max: 5 });
  await migrate(sql);
  return {
    url: db.url,
    sql,
    drop: async () => {
      await sql.end({ timeout: 5 });
      await db.drop();
    },
  };
}

export interface TestAppOptions {
  /** Extra configuration variables (e.g. SWITCHBOARD_METRICS_TOKEN). */
  env?: Record<string, string>;
  /** How long after test_doorbell the test doorbell is written. */
  selfTestRingDelayMs?: number;
  /** A logger to capture the app's log lines (default: silent). */
  log?: Logger;
  /** Notify hook delivery tuning (attempts, backoff, timeout), passed through to startApp. */
  notifyHookDelivery?: AppOptions['notifyHookDelivery'];
  /** The per-IP webhook ingest limit, passed through to startApp. */
  ingestLimit?: AppOptions['ingestLimit'];
  /** The MCP transport's rate limits, passed through to startApp. */
  mcpLimits?: AppOptions['mcpLimits'];
}

/** A real server on a free port over the given database, with a manual clock and no background loops. */
export async function startTestApp(databaseUrl: string, clock = new ManualClock(), opts: TestAppOptions = {}): Promise<App & { clock: ManualClock }> {
  const config = loadConfig({ ...opts.env, SWITCHBOARD_DATABASE_URL: databaseUrl, SWITCHBOARD_LISTEN: '127.0.0.1:0' });
  const app = await startApp({
    config,
    clock,
    log: opts.log ?? createLogger('silent'),
    loops: false,
    selfTestRingDelayMs: opts.selfTestRingDelayMs,
    notifyHookDelivery: opts.notifyHookDelivery,
    ingestLimit: opts.ingestLimit,
    mcpLimits: opts.mcpLimits,
  });
  return Object.assign(app, { clock });
}

let humanSeq = 0;
/** A new human with a personal token. */
export async function humanWithToken(sql: Sql, handle = `h${process.pid}x${++humanSeq}`): Promise<{ id: string; handle: string; token: string }> {
  const h = await addHuman(sql, { handle });
  const { token } = await createToken(sql, { handle });
  return { id: h.id, handle: h.handle, token };
}

/** fetch against a test app with a bearer token; JSON in and out. */
export function apiCaller(baseUrl: string, token?: string) {
  return async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json: any = undefined;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, json, text };
  };
}

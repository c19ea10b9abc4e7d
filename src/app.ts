import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from './lib/clock.ts';
import { ConfigError, type Config } from './config.ts';
import type { BucketPolicy } from './lib/rate-limit.ts';
import type { Sql } from './db/connect.ts';
import { migrate } from './db/migrate.ts';
import { openDatabase, type Database } from './db/open.ts';
import { OidcLogin } from './board/oidc.ts';
import { buildServices, maintenanceLoopsOf, wakeupsOf, type Services } from './compose.ts';
import { buildServer } from './server.ts';
import { createLogger, type Logger } from './lib/log.ts';
import { runEvery } from './lib/loops.ts';
import { settleWithin } from './lib/timeout.ts';
import { describeBindError, probeListen } from './lib/listen-probe.ts';
import type { NotifyHookOptions } from './services/notify-hooks.ts';
import { listenForWakeups, type Wakeups } from './services/wakeups.ts';
import { Readiness } from './services/readiness.ts';
import { VERSION } from './lib/version.ts';
import { Humans } from './services/humans.ts';

/** How long each shutdown step may take before stop() moves on (and cuts HTTP connections). */
const SHUTDOWN_STEP_MS = 5_000;

export interface App {
  /** Where the server actually listens (the port is known only after listening on port 0). */
  url: string;
  baseUrl: string;
  sql: Sql;
  server: FastifyInstance;
  /** Every service of this instance (compose.ts): what a test drives or watches. */
  services: Services;
  stop(): Promise<void>;
}

/** Loopback listeners only answer MCP requests whose Host is loopback or the public base URL's. */
function allowedHostsFor(config: Config): string[] | undefined {
  const loopback = ['127.0.0.1', 'localhost', '::1'];
  if (!loopback.includes(config.listenHost)) return undefined;
  return [...loopback, new URL(config.baseUrl).hostname.replace(/^\[|\]$/g, '').toLowerCase()];
}

export interface AppOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
  /** Background loops (the reaper). Tests turn them off and drive passes by hand. */
  loops?: boolean;
  /** Runs every background loop this often instead of at its own interval (a test of the loops shortens them). */
  loopIntervalMs?: number;
  /** How long after test_doorbell the test doorbell is written (default 2 s). */
  selfTestRingDelayMs?: number;
  /** Overrides the MCP rate limits (benchmarks lift them). */
  mcpLimits?: { ip?: BucketPolicy; endpoint?: BucketPolicy };
  /** Notify hook delivery tuning (tests shorten the backoff). */
  notifyHookDelivery?: Pick<NotifyHookOptions, 'attempts' | 'backoffMs' | 'timeoutMs'>;
  /** Overrides the per-IP webhook ingest limit (benchmarks lift it). */
  ingestLimit?: BucketPolicy;
}

/**
 * What `switchboard admin` and `switchboard migrate` act on: the database the server uses (an
 * embedded cluster a running `serve` owns is shared), its schema brought up to date, no server.
 */
export async function openAdmin(
  config: Config,
  log: Logger,
  opts: { init?: boolean; auditLog?: Logger; by?: string } = {},
): Promise<{ humans: Humans; applied: string[]; database: string; close(): Promise<void> }> {
  const db = await openDatabase(config, log, { role: 'admin', init: opts.init });
  try {
    const applied = await migrate(db.direct);
    return { humans: new Humans({ sql: db.sql, clock: systemClock, log: opts.auditLog, by: opts.by }), applied, database: db.description, close: () => db.close() };
  } catch (err) {
    await db.close();
    throw err;
  }
}

/** The composition root: database, migrations, services, HTTP server, wakeups and background loops. */
export async function startApp(opts: AppOptions): Promise<App> {
  const { config } = opts;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel, process.stdout, config.logFormat);
  // A taken port is found before initdb and migrations, not after them.
  if (config.listenPort !== 0) {
    const refused = await probeListen(config.listenHost, config.listenPort);
    if (refused) throw new ConfigError('SWITCHBOARD_LISTEN', describeBindError(config.listenHost, config.listenPort, refused));
  }
  const db: Database = await openDatabase(config, log);
  const shutdown = new AbortController();
  const loops: Promise<void>[] = [];
  let baseUrl = config.baseUrl;
  const services = buildServices(
    { sql: db.sql, lanes: db.lanes, clock, log },
    { config, baseUrl: () => baseUrl, selfTestRingDelayMs: opts.selfTestRingDelayMs, notifyHookDelivery: opts.notifyHookDelivery },
  );
  const { sessions, hooks, selfTests } = services;
  // The board's sign-in through an OpenID Connect provider: a surface's part, not a service.
  const oidc = config.oidc ? new OidcLogin(config.oidc, () => baseUrl, log) : null;
  let server: FastifyInstance | undefined;
  let wakeups: Wakeups | undefined;
  const readiness = new Readiness(db.sql, () => wakeups?.probe);

  try {
    await migrate(db.direct, { onApply: (file) => log.info({ file }, 'migration applied') });
    // Before serving: with a key, legacy secrets are resealed bound to their rows (a read refuses them).
    const atRest = await services.webhooks.secretsAtRest();
    if (atRest.resealed > 0) log.info({ resealed: atRest.resealed }, 'webhook and notify hook secrets resealed, bound to their rows');
    const { webhooks: plainWebhooks, hooks: plainHooks } = atRest.plaintext;
    if (plainWebhooks + plainHooks > 0) {
      log.warn(
        { webhooks: plainWebhooks, notify_hooks: plainHooks },
        `webhook signing secrets are stored unencrypted (${plainWebhooks} signed webhooks, ${plainHooks} notify hooks): set SWITCHBOARD_SECRET_ENCRYPTION_KEY (32 bytes, hex or base64); the next start seals them, then rotate each`,
      );
    }
    server = buildServer(services, {
      baseUrl: () => baseUrl,
      metricsToken: config.metricsToken,
      allowedHosts: allowedHostsFor(config),
      trustedProxies: config.trustedProxies,
      mcpLimits: opts.mcpLimits,
      ingestLimit: opts.ingestLimit,
      ingestRate: config.ingestRate,
      readiness,
      oidc,
    });
    wakeups = await listenForWakeups(db.direct, wakeupsOf(services), log);
    await services.directory.start();
    await server.listen({ host: config.listenHost, port: config.listenPort }).catch((err: NodeJS.ErrnoException) => {
      throw err.syscall === 'listen' ? new ConfigError('SWITCHBOARD_LISTEN', describeBindError(config.listenHost, config.listenPort, err)) : err;
    });
    const addr = server.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.listenPort;
    const hostForUrl = config.listenHost.includes(':') ? `[${config.listenHost}]` : config.listenHost;
    const url = `http://${hostForUrl === '0.0.0.0' ? '127.0.0.1' : hostForUrl}:${port}`;
    if (config.listenPort === 0 && !config.baseUrlExplicit) baseUrl = url;

    if (opts.loops !== false) {
      for (const loop of maintenanceLoopsOf(services)) {
        loops.push(runEvery(loop.name, opts.loopIntervalMs ?? loop.intervalMs, () => loop.tick(), { signal: shutdown.signal, log, runNow: loop.runNow }));
      }
    }
    log.info({ addr: url, base_url: baseUrl, version: VERSION, database: db.description, oidc: oidc !== null }, 'switchboard listening');
    // Discovery at startup shows a misconfigured provider in the log at once; it is not fatal (the
    // queue serves agents without the board), and a sign-in retries it.
    if (oidc) {
      oidc
        .discover()
        .then(() => log.info({ issuer: oidc.issuer }, 'oidc provider discovered'))
        .catch((err: unknown) => log.warn({ issuer: oidc.issuer, err: (err as Error).message }, 'oidc discovery failed; board sign-in by provider will retry'));
    }

    const running = server;
    let stopping: Promise<void> | undefined;
    return {
      url,
      get baseUrl() {
        return baseUrl;
      },
      sql: db.sql,
      server: running,
      services,
      stop() {
        stopping ??= (async () => {
          shutdown.abort();
          selfTests.stop();
          // Open streams would hold the HTTP server open: end them first. The sessions live on
          // in the directory for the other instances (or this one, restarted) to serve.
          await services.directory.stop();
          await wakeups?.stop();
          // A request still running (a slow client, a long poll) holds close() open: past the
          // grace period its connection is cut so a stop always ends.
          if ((await settleWithin(running.close(), SHUTDOWN_STEP_MS)) === 'timeout') {
            log.warn({ after_ms: SHUTDOWN_STEP_MS }, 'open HTTP connections did not end; closing them');
            running.server.closeAllConnections();
            await settleWithin(running.close(), SHUTDOWN_STEP_MS);
          }
          await settleWithin(Promise.all([...loops, services.presence.reconnectsSettled()]), SHUTDOWN_STEP_MS);
          // The refusals counted since the last flush (its loop has stopped with the others).
          await settleWithin(services.webhookRefusals.flush().catch((err: unknown) => log.warn({ err: (err as Error).message }, 'could not write the last webhook refusal counts')), SHUTDOWN_STEP_MS);
          if ((await settleWithin(hooks.stop(), SHUTDOWN_STEP_MS)) === 'timeout') log.warn({ after_ms: SHUTDOWN_STEP_MS }, 'notify-hook deliveries still in flight at shutdown');
          await db.close();
          log.info('switchboard stopped');
        })();
        return stopping;
      },
    };
  } catch (err) {
    shutdown.abort();
    sessions.closeAll('startup failed');
    await wakeups?.stop().catch(() => {});
    await server?.close().catch(() => {});
    await db.close().catch(() => {});
    throw err;
  }
}

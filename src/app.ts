import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from './lib/clock.ts';
import type { Config } from './config.ts';
import type { BucketPolicy } from './lib/rate-limit.ts';
import type { Sql } from './db/connect.ts';
import { migrate } from './db/migrate.ts';
import { openDatabase, type Database } from './db/open.ts';
import { OidcLogin } from './board/oidc.ts';
import { buildServer } from './server.ts';
import { createLogger, type Logger } from './lib/log.ts';
import { runEvery } from './lib/loops.ts';
import { DoorbellAcks, UNHEARD_SWEEP_INTERVAL_MS } from './services/doorbell/acks.ts';
import { Doorbell } from './services/doorbell/doorbell.ts';
import { SELF_TEST_CLEANUP_INTERVAL_MS, SelfTests } from './services/doorbell/self-tests.ts';
import { Metrics } from './lib/metrics.ts';
import { SecretBox } from './lib/crypto-box.ts';
import { Webhooks } from './services/webhooks.ts';
import { NotifyHooks, type NotifyHookOptions } from './services/notify-hooks.ts';
import type { TodoRow } from './store/todos/index.ts';
import { countSignedWebhooksUnscoped } from './store/webhooks.ts';
import { PRESENCE_EVALUATOR_INTERVAL_MS, PresenceService } from './services/presence.ts';
import { SWEEP_INTERVAL_MS, sweepOnce } from './services/maintenance/doorbell-sweep.ts';
import { EndpointCredentials } from './services/endpoint-credentials.ts';
import { SessionRegistry } from './sessions/registry.ts';
import { REAPER_INTERVAL_MS, reapOnce } from './services/maintenance/reaper.ts';
import { inactiveEndpointIdsUnscoped } from './store/endpoints.ts';
import { freshReadyTodos, queueStatsUnscoped } from './store/todos/index.ts';
import { listenForWakeups } from './services/wakeups.ts';
import { EndpointService } from './services/endpoints.ts';
import { TodoService } from './services/todos.ts';
import { TodoWork } from './services/todo-work.ts';
import { AgentPresence } from './services/presence-agent.ts';
import { IngestService } from './services/ingest.ts';
import { OperatorPresence } from './services/presence-operator.ts';
import { BoardReads } from './services/board-reads.ts';
import { VERSION } from './lib/version.ts';
import { Humans } from './services/humans.ts';

export interface App {
  /** Where the server actually listens (the port is known only after listening on port 0). */
  url: string;
  baseUrl: string;
  sql: Sql;
  server: FastifyInstance;
  sessions: SessionRegistry;
  doorbell: Doorbell;
  presence: PresenceService;
  acks: DoorbellAcks;
  selfTests: SelfTests;
  metrics: Metrics;
  hooks: NotifyHooks;
  stop(): Promise<void>;
}

export const SESSION_JANITOR_INTERVAL_MS = 60_000;

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
export async function openAdmin(config: Config, log: Logger): Promise<{ humans: Humans; applied: string[]; close(): Promise<void> }> {
  const db = await openDatabase(config, log, { role: 'admin' });
  try {
    const applied = await migrate(db.sql);
    return { humans: new Humans({ sql: db.sql, clock: systemClock }), applied, close: () => db.close() };
  } catch (err) {
    await db.close();
    throw err;
  }
}

/** The composition root: database, migrations, HTTP server and background loops. */
export async function startApp(opts: AppOptions): Promise<App> {
  const { config } = opts;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel);
  const db: Database = await openDatabase(config, log);
  const { sql } = db;
  const shutdown = new AbortController();
  const loops: Promise<void>[] = [];
  let server: FastifyInstance | undefined;
  const sessions = new SessionRegistry(clock);
  const credentials = new EndpointCredentials(sql, clock);
  const metrics = new Metrics({
    unheardSessions: () => sessions.all().filter((s) => s.unheard).length,
    queueStats: () => queueStatsUnscoped(sql, clock.now()),
  });
  const acks = new DoorbellAcks(sql, clock, log, metrics, sessions);
  const box = new SecretBox(config.secretEncryptionKey);
  const hooks = new NotifyHooks(sql, clock, log, box, metrics, {
    allowHttp: config.pushAllowHttp,
    allow: config.notifyHookAllow,
    max: config.notifyHookMax,
    ...opts.notifyHookDelivery,
  });
  const hookFailed = (err: unknown) => log.error({ stage: 'notify hooks', err: (err as Error).message }, 'notify hooks could not fire');
  const presence: PresenceService = new PresenceService(sql, clock, log, sessions, () => doorbell, (endpointId, reason) =>
    void hooks.backlog(endpointId, reason).catch(hookFailed),
  );
  const doorbell = new Doorbell({
    sessions,
    clock,
    log,
    presenceOf: (endpointId) => presence.presenceOf(endpointId),
    acks,
    ackWindowMs: config.doorbellAckWindowMs,
  });
  const webhooks = new Webhooks(sql, clock, box, () => baseUrl);
  const oidc = config.oidc ? new OidcLogin(config.oidc, () => baseUrl, log) : null;
  /** After a new push-eligible todo commits on this instance: its doorbell and its notify hooks. */
  const todoReady = (todo: TodoRow) => {
    doorbell.ringReady(todo);
    void hooks.todoReady(todo, 'created').catch(hookFailed);
  };
  const selfTests = new SelfTests(sql, clock, log, sessions, doorbell, {
    ringDelayMs: opts.selfTestRingDelayMs,
  });
  /** Forget a revoked endpoint on this instance: its cached credential and its sessions. */
  const dropEndpoint = (endpointId: string): number => {
    credentials.invalidateEndpoint(endpointId);
    return sessions.closeEndpoint(endpointId, 'endpoint revoked');
  };
  /** Rings the todos of an endpoint's queue that became ready in the last minute, if it has sessions here. */
  const ringFresh = (endpointId: string, queue: string) => {
    if (sessions.sessionsOf(endpointId).length === 0) return;
    freshReadyTodos(sql, endpointId, queue, clock.now())
      .then((todos) => todos.forEach((t) => doorbell.ringReady(t)))
      .catch((err: unknown) => log.warn({ err: (err as Error).message, endpoint_id: endpointId }, 'todo_ready wakeup failed'));
  };
  const base = { sql, clock, log };
  const endpoints = new EndpointService(base, { onRevoked: dropEndpoint });
  const todos = new TodoService(base, { onTodoReady: todoReady });
  const ingest = new IngestService(base, { metrics, webhooks, todos });
  let wakeups: { stop(): Promise<void> } | undefined;
  let baseUrl = config.baseUrl;

  try {
    await migrate(sql, { onApply: (file) => log.info({ file }, 'migration applied') });
    server = buildServer({
      sql,
      clock,
      log,
      baseUrl: () => baseUrl,
      sessions,
      credentials,
      presence,
      acks,
      selfTests,
      webhooks,
      metrics,
      metricsToken: config.metricsToken,
      sessionCounts: (endpointId) => {
        const of = sessions.sessionsOf(endpointId);
        return { sessions: of.length, unheard_sessions: of.filter((s) => s.unheard).length };
      },
      endpoints,
      todos,
      todoWork: new TodoWork(base),
      agentPresence: new AgentPresence(base, presence),
      operatorPresence: new OperatorPresence(base, presence),
      ingest,
      boardReads: new BoardReads(base),
      humans: new Humans(base),
      hooks,
      allowedHosts: allowedHostsFor(config),
      mcpLimits: opts.mcpLimits,
      ingestLimit: opts.ingestLimit,
      isDeaf: (session) => doorbell.isDeaf(session),
      oidc,
    });
    wakeups = await listenForWakeups(
      sql,
      {
        endpoint_revoked: {
          onNotify: ({ endpointId }) => {
            const closed = dropEndpoint(endpointId);
            if (closed) log.info({ endpoint_id: endpointId, sessions: closed }, 'closed sessions of a revoked endpoint');
          },
          // After a reconnect, revocations may have been missed: check every endpoint we hold sessions for.
          onListen: () => {
            const held = [...new Set(sessions.all().map((s) => s.endpoint.id))];
            inactiveEndpointIdsUnscoped(sql, held)
              .then((ids) => ids.forEach(dropEndpoint))
              .catch((err: unknown) => log.warn({ err: (err as Error).message }, 'revocation catch-up failed'));
          },
        },
        endpoint_presence: {
          onNotify: (payload) =>
            void presence.onWakeup(payload).catch((err: unknown) => log.warn({ err: (err as Error).message }, 'presence wakeup failed')),
          // Broadcasts may have been missed while disconnected: re-read what we hold.
          onListen: () => void presence.refreshCache().catch(() => {}),
        },
        doorbell_test: {
          onNotify: ({ testId }) =>
            void selfTests.onWakeup(testId).catch((err: unknown) => log.warn({ err: (err as Error).message, test_id: testId }, 'self-test wakeup failed')),
        },
        todo_ready: {
          onNotify: ({ endpointId, queue }) => ringFresh(endpointId, queue),
          // Notifications sent while the listener was reconnecting are lost: ring what became ready
          // meanwhile on every queue of every endpoint held here (the gate stops a second ring).
          onListen: () => {
            const held = new Map<string, Set<string>>();
            for (const s of sessions.all()) held.set(s.endpoint.id, new Set([...(held.get(s.endpoint.id) ?? []), ...s.endpoint.queues]));
            for (const [endpointId, queues] of held) for (const queue of queues) ringFresh(endpointId, queue);
          },
        },
      },
      log,
    );
    await server.listen({ host: config.listenHost, port: config.listenPort });
    const addr = server.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.listenPort;
    const hostForUrl = config.listenHost.includes(':') ? `[${config.listenHost}]` : config.listenHost;
    const url = `http://${hostForUrl === '0.0.0.0' ? '127.0.0.1' : hostForUrl}:${port}`;
    if (config.listenPort === 0 && !config.baseUrlExplicit) baseUrl = url;

    if (opts.loops !== false) {
      const onRequeued = (todos: TodoRow[]) => todos.forEach((t) => void hooks.todoReady(t, 'requeued').catch(hookFailed));
      loops.push(runEvery('reaper', REAPER_INTERVAL_MS, () => reapOnce({ sql, clock, log, onRequeued }), { signal: shutdown.signal, log, runNow: true }));
      loops.push(runEvery('presence-evaluator', PRESENCE_EVALUATOR_INTERVAL_MS, () => presence.evaluate(), { signal: shutdown.signal, log, runNow: true }));
      loops.push(runEvery('unheard-sweep', UNHEARD_SWEEP_INTERVAL_MS, () => acks.sweep(), { signal: shutdown.signal, log }));
      loops.push(runEvery('self-test-cleanup', SELF_TEST_CLEANUP_INTERVAL_MS, () => selfTests.cleanUp(), { signal: shutdown.signal, log }));
      loops.push(runEvery('doorbell-sweep', SWEEP_INTERVAL_MS, () => sweepOnce({ sql, clock, log, doorbell }), { signal: shutdown.signal, log }));
      loops.push(
        runEvery('session-janitor', SESSION_JANITOR_INTERVAL_MS, async () => sessions.expireIdle(), { signal: shutdown.signal, log }),
      );
    }
    if (!config.secretEncryptionKey && (await countSignedWebhooksUnscoped(sql)) > 0) {
      log.warn('webhook signing secrets are stored unencrypted: set SWITCHBOARD_SECRET_ENCRYPTION_KEY (32 bytes, hex or base64) and rotate each signed webhook');
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
      sql,
      server: running,
      sessions,
      doorbell,
      presence,
      acks,
      selfTests,
      metrics,
      hooks,
      stop() {
        stopping ??= (async () => {
          shutdown.abort();
          selfTests.stop();
          // Open streams would hold the HTTP server open: end them first.
          sessions.closeAll('server shutting down');
          await wakeups?.stop();
          await running.close();
          await Promise.all(loops);
          await hooks.stop();
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

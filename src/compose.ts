import type { Config } from './config.ts';
import { SecretBox } from './lib/crypto-box.ts';
import { Metrics } from './lib/metrics.ts';
import { SessionRegistry } from './sessions/registry.ts';
import type { ServiceBase } from './services/base.ts';
import { BoardReads } from './services/board-reads.ts';
import { CallCancellations } from './services/call-cancellations.ts';
import { ClaimWaiters } from './services/claim-waiters.ts';
import { DoorbellAcks } from './services/doorbell/acks.ts';
import { Doorbell } from './services/doorbell/doorbell.ts';
import { ReadyRings } from './services/doorbell/ready-rings.ts';
import { SelfTests } from './services/doorbell/self-tests.ts';
import { EndpointCredentials } from './services/endpoint-credentials.ts';
import { OAuthServer } from './services/oauth.ts';
import { HISTORY_INTERVAL_MS, HistoryService } from './services/history.ts';
import { WebhookRefusalTally } from './services/webhook-refusals.ts';
import { webhookRefusalsLoop } from './services/maintenance/webhook-refusals.ts';
import { EndpointService } from './services/endpoints.ts';
import { Humans } from './services/humans.ts';
import { IngestService } from './services/ingest.ts';
import { doorbellSweepLoop } from './services/maintenance/doorbell-sweep.ts';
import type { MaintenanceLoop } from './services/maintenance/loop.ts';
import { presenceEvaluatorLoop } from './services/maintenance/presence-evaluator.ts';
import { reaperLoop } from './services/maintenance/reaper.ts';
import { retentionLoop } from './services/maintenance/retention.ts';
import { selfTestCleanupLoop, selfTestRingLoop } from './services/maintenance/self-test-cleanup.ts';
import { sessionJanitorLoop } from './services/maintenance/session-janitor.ts';
import { unheardSweepLoop } from './services/maintenance/unheard-sweep.ts';
import { NotifyHooks, type NotifyHookOptions } from './services/notify-hooks.ts';
import { AgentPresence } from './services/presence-agent.ts';
import { PresenceCache } from './services/presence-cache.ts';
import { OperatorPresence } from './services/presence-operator.ts';
import { PresenceHistory } from './services/presence-history.ts';
import { PresenceService } from './services/presence.ts';
import { Revocations } from './services/revocations.ts';
import { SessionDirectory } from './services/session-directory.ts';
import { TodoService, queueStats } from './services/todos.ts';
import { TodoEvents } from './services/todo-events.ts';
import { TodoWork } from './services/todo-work.ts';
import { mergeWakeups, type WakeupHandlers } from './services/wakeups.ts';
import { Webhooks } from './services/webhooks.ts';
import { WebhookRouting } from './services/webhook-routing.ts';

/** Every service of one instance, built once on one base (buildServices is its one list). The surfaces take what they need from it. */
export type Services = ReturnType<typeof buildServices>;

export interface ServiceOptions {
  config: Config;
  /** The public base URL; a function because a test server learns its port only after listening. */
  baseUrl: () => string;
  selfTestRingDelayMs?: number;
  notifyHookDelivery?: Pick<NotifyHookOptions, 'attempts' | 'backoffMs' | 'timeoutMs'>;
}

/**
 * Builds the services in dependency order: each is given services built above it, never a closure
 * over one built below (so a reordering that breaks it fails to compile: a const used before its
 * declaration). The one cycle (the directory loads presence, which rings through the doorbell,
 * whose acknowledgements flush the directory) is closed explicitly by directory.beforeFirstCopy.
 */
export function buildServices(base: ServiceBase, opts: ServiceOptions) {
  const { config, baseUrl } = opts;
  const sessions = new SessionRegistry(base.clock);
  const directory = new SessionDirectory(base, sessions, { maxPerEndpoint: config.sessionsPerEndpoint, idleMs: config.sessionIdleMs });
  const metrics = new Metrics({
    unheardSessions: (): number => sessions.unheardCount(),
    queueStats: () => queueStats(base),
  });
  const oauth = new OAuthServer(base, baseUrl);
  const credentials = new EndpointCredentials(base, oauth);
  const box = new SecretBox(config.secretEncryptionKey);
  const acks = new DoorbellAcks(base, metrics, sessions, directory);
  const hooks = new NotifyHooks(base, box, metrics, {
    allowHttp: config.pushAllowHttp,
    allow: config.notifyHookAllow,
    ports: config.notifyHookPorts,
    max: config.notifyHookMax,
    // The listen port is known only after listening when it is 0 (tests): the base URL has it then.
    self: () => ({ baseUrl: baseUrl(), listenHost: config.listenHost, listenPort: config.listenPort || Number(new URL(baseUrl()).port) }),
    ...opts.notifyHookDelivery,
  });
  const presenceCache = new PresenceCache(base.sql, base.clock, sessions);
  const doorbell = new Doorbell({
    sessions,
    clock: base.clock,
    log: base.log,
    presenceOf: (endpointId) => presenceCache.presenceOf(endpointId),
    acks,
    ackWindowMs: config.doorbellAckWindowMs,
    streamsElsewhere: (endpointId) => directory.streamsElsewhere(endpointId),
  });
  const presence = new PresenceService(base, sessions, presenceCache, doorbell, (endpointId, reason) => hooks.announceBacklog(endpointId, reason));
  directory.beforeFirstCopy((endpointId) => presence.load(endpointId));
  const webhooks = new Webhooks(base, box, baseUrl);
  const webhookRouting = new WebhookRouting(base, webhooks);
  const webhookRefusals = new WebhookRefusalTally(base);
  const revocations = new Revocations(base, sessions, credentials);
  const readyRings = new ReadyRings(base, sessions, doorbell);
  const waiters = new ClaimWaiters();
  const events = new TodoEvents({ sql: base.sql, log: base.log, rings: readyRings, hooks, waiters });
  const todoWork = new TodoWork(base, { waiters, acks, events });
  const todos = new TodoService(base, { events, instanceId: directory.instanceId });
  return {
    base,
    sessions,
    directory,
    /** MCP calls being answered here, for cancellation. */
    calls: new CallCancellations(base, sessions),
    metrics,
    credentials,
    /** The OAuth authorization server: clients that connect by URL alone, and the CLI's browser login. */
    oauth,
    revocations,
    acks,
    doorbell,
    readyRings,
    presence,
    agentPresence: new AgentPresence(base, presence),
    operatorPresence: new OperatorPresence(base, presence),
    /** Each endpoint's presence changes, kept 30 days: the API, the CLI and the board read them. */
    presenceHistory: new PresenceHistory(base),
    selfTests: new SelfTests(base, sessions, directory, doorbell, { ringDelayMs: opts.selfTestRingDelayMs }),
    hooks,
    webhooks,
    endpoints: new EndpointService(base, { onRevoked: (endpointId) => revocations.forget(endpointId) }),
    /** Who hears of todos that became claimable, after commit. */
    events,
    todos,
    todoWork,
    webhookRouting,
    ingest: new IngestService(base, { metrics, webhooks, routing: webhookRouting, todos, replayWindowMs: config.retentionMs, refusals: webhookRefusals }),
    /** Refused deliveries per webhook, counted here and written every few seconds (its loop; App.stop writes the rest). */
    webhookRefusals,
    boardReads: new BoardReads(base),
    /** Queue history: the charts' buckets (migration 0025's triggers write them). */
    history: new HistoryService(base),
    humans: new Humans(base),
    /** SWITCHBOARD_RETENTION, for the retention loop. */
    retentionMs: config.retentionMs,
  };
}

/** What each service does on each NOTIFY channel, merged into one handler set. */
export function wakeupsOf(s: Services): WakeupHandlers {
  return mergeWakeups(
    s.directory.wakeups(),
    s.revocations.wakeups(),
    s.presence.wakeups(),
    s.selfTests.wakeups(),
    s.readyRings.wakeups(),
    s.todoWork.wakeups(),
    s.calls.wakeups(),
    s.webhooks.wakeups(),
    s.hooks.wakeups(),
  );
}

/** The background loops every instance runs (tests turn them off and drive passes by hand). */
export function maintenanceLoopsOf(s: Services): MaintenanceLoop[] {
  const { sql, clock, log } = s.base;
  return [
    reaperLoop({ sql, clock, log, events: s.events }),
    presenceEvaluatorLoop(s.presence),
    unheardSweepLoop(s.acks),
    selfTestCleanupLoop(s.selfTests),
    selfTestRingLoop(s.selfTests),
    doorbellSweepLoop({ sql, clock, log, doorbell: s.doorbell, presence: s.presence }),
    sessionJanitorLoop(s.directory),
    retentionLoop({ sql, clock, log, retentionMs: s.retentionMs }),
    { name: 'history', intervalMs: HISTORY_INTERVAL_MS, tick: () => s.history.maintain() },
    webhookRefusalsLoop(s.webhookRefusals),
  ];
}

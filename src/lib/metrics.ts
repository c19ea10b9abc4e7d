import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { VERSION } from './version.ts';

/**
 * The Prometheus registry (SPEC-0023) and every series. Identifiers are never labels; counters
 * move after commit where the outcome is known; synthetic self-test rows never move any series.
 */
export class Metrics {
  readonly registry = new Registry();

  readonly collectionErrors = new Counter({
    name: 'switchboard_metrics_collection_errors_total',
    help: 'Failures to collect or record a metric, by collector.',
    labelNames: ['collector'] as const,
    registers: [this.registry],
  });
  readonly ringsTotal = new Counter({
    name: 'switchboard_doorbell_rings_total',
    help: 'Doorbells written to a session (ring records created), by kind.',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly ringsAcknowledged = new Counter({
    name: 'switchboard_doorbell_rings_acknowledged_total',
    help: 'Rings acknowledged within their window, by kind and how (claim or ack).',
    labelNames: ['kind', 'via'] as const,
    registers: [this.registry],
  });
  readonly ringsUnheard = new Counter({
    name: 'switchboard_doorbell_rings_unheard_total',
    help: 'Rings whose window passed with no acknowledgement, by kind.',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly webhookDeliveries = new Counter({
    name: 'switchboard_webhook_deliveries_total',
    help: 'Webhook deliveries by provider, trust mode and verdict (accepted or rejected; a redelivery is accepted).',
    labelNames: ['provider', 'trust_mode', 'verdict'] as const,
    registers: [this.registry],
  });
  readonly routingDecisions = new Counter({
    name: 'switchboard_routing_decisions_total',
    help: 'Deliveries to webhooks with routing rules, by what routing made of them (queue, drop, fanout, fault).',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });
  readonly routingFaults = new Counter({
    name: 'switchboard_routing_faults_total',
    help: 'Deliveries whose routing faulted (no todo, answered 503), by cause (error, not_bool, rule_budget, delivery_budget).',
    labelNames: ['cause'] as const,
    registers: [this.registry],
  });
  readonly webhookVerifyFailures = new Counter({
    name: 'switchboard_webhook_verify_failures_total',
    help: 'Signed deliveries refused, by provider and reason.',
    labelNames: ['provider', 'reason'] as const,
    registers: [this.registry],
  });

  readonly hookNotifications = new Counter({
    name: 'switchboard_notify_hook_notifications_total',
    help: 'Notify hook notifications by type and outcome (delivered, failed, dropped).',
    labelNames: ['type', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly hookAttempts = new Counter({
    name: 'switchboard_notify_hook_attempts_total',
    help: 'Notify hook delivery attempts by result class.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly hooksDisabled = new Counter({
    name: 'switchboard_notify_hooks_disabled_total',
    help: 'Notify hooks disabled, by reason.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  constructor(opts: { unheardSessions: () => number; queueStats?: () => Promise<QueueStat[]> }) {
    collectDefaultMetrics({ register: this.registry, prefix: 'switchboard_' });
    new Gauge({
      name: 'switchboard_build_info',
      help: 'The running build.',
      labelNames: ['version'] as const,
      registers: [this.registry],
    }).set({ version: VERSION }, 1);
    new Gauge({
      name: 'switchboard_doorbell_unheard_sessions',
      help: "Sessions in this instance's registry whose last 3 rings all went unheard (aggregate with sum over instances).",
      registers: [this.registry],
      collect() {
        this.set(opts.unheardSessions());
      },
    });
    if (opts.queueStats) this.#registerQueueGauges(opts.queueStats);
    // Every collector's error series exists at 0 from the first scrape.
    for (const collector of ['doorbell_rings', 'queue']) this.collectionErrors.inc({ collector }, 0);
    for (const type of ['todo.ready', 'todos.backlog']) {
      for (const outcome of ['delivered', 'failed', 'dropped']) this.hookNotifications.inc({ type, outcome }, 0);
    }
    for (const kind of ['todo', 'digest']) {
      this.ringsTotal.inc({ kind }, 0);
      this.ringsUnheard.inc({ kind }, 0);
      for (const via of ['claim', 'ack']) this.ringsAcknowledged.inc({ kind, via }, 0);
    }
  }

  /**
   * Queue gauges, computed at scrape time by one grouped query: every known queue by state, and
   * the age of its oldest pending todo. Queue names pass a sticky cap (50 distinct, else
   * "__other__"). If the query fails, the series are omitted and the error is counted.
   */
  #registerQueueGauges(stats: () => Promise<QueueStat[]>): void {
    const errors = this.collectionErrors;
    const label = stickyLabel(50);
    let pending: Promise<QueueStat[] | null> | null = null;
    const snapshot = () => {
      pending ??= stats()
        .catch(() => {
          errors.inc({ collector: 'queue' });
          return null;
        })
        .finally(() => setTimeout(() => (pending = null), 0));
      return pending;
    };
    new Gauge({
      name: 'switchboard_queue_todos',
      help: 'Todos per queue and state (self-test todos excluded).',
      labelNames: ['queue', 'state'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        const rows = await snapshot();
        if (!rows) return;
        for (const r of rows) for (const state of ['pending', 'claimed', 'done', 'failed', 'canceled'] as const) this.inc({ queue: label(r.queue), state }, r[state]);
      },
    });
    new Gauge({
      name: 'switchboard_queue_oldest_pending_seconds',
      help: 'Age of the oldest pending todo per queue (0 when none is pending).',
      labelNames: ['queue'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        const rows = await snapshot();
        if (!rows) return;
        const oldest = new Map<string, number>();
        for (const r of rows) oldest.set(label(r.queue), Math.max(oldest.get(label(r.queue)) ?? 0, r.oldest_pending_seconds));
        for (const [queue, age] of oldest) this.set({ queue }, age);
      },
    });
  }
}

export interface QueueStat {
  queue: string;
  pending: number;
  claimed: number;
  done: number;
  failed: number;
  canceled: number;
  oldest_pending_seconds: number;
}

/** A label limiter: the first `cap` distinct values pass, later ones (or over-long ones) become "__other__". */
function stickyLabel(cap: number): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= cap || Buffer.byteLength(value) > 128) return '__other__';
    seen.add(value);
    return value;
  };
}

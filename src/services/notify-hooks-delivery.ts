import { ulid } from 'ulidx';
import type { ServiceBase } from './base.ts';
import type { Sql } from '../db/connect.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../lib/log.ts';
import type { Metrics } from '../lib/metrics.ts';
import { RateLimiter } from '../lib/rate-limit.ts';
import { sealedFor, type SecretBox } from '../lib/crypto-box.ts';
import type { OutboundPolicy } from '../lib/ssrf.ts';
import { deliverableHook, recordHookOutcome, type HookRow } from '../store/hooks.ts';
import { DeliveryScheduler, type AttemptResult, type QueuedNotification } from './notify-hooks-queue.ts';
import { attemptClass, sendHookRequest } from './notify-hooks-send.ts';

export const HOOK_BODY_MAX_BYTES = 4096;

export interface HookDeliveryOptions extends OutboundPolicy {
  attempts?: number;
  /** Waits before the 2nd and 3rd attempts; each is jittered by ±20 %. */
  backoffMs?: readonly number[];
  timeoutMs?: number;
  workers?: number;
  /** Deliveries waiting, all hooks together. */
  queueSize?: number;
  /** Deliveries waiting for one hook: a slow receiver's backlog cannot crowd out the others'. */
  perHookQueue?: number;
  perMinute?: number;
}

/**
 * Delivering notify hooks' notifications: each hook's rate, then the bounded in-process queue per
 * hook and its workers (notify-hooks-queue.ts); an attempt is one signed request
 * (notify-hooks-send.ts), and its outcome is recorded on the hook.
 */
export class HookDeliveries {
  readonly #deliveries: DeliveryScheduler;
  /** Notifications per hook: `perMinute` (default 120) a minute, refilled on the injected clock. */
  readonly #perHook: RateLimiter;

  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    base: ServiceBase,
    private readonly box: SecretBox,
    private readonly metrics: Metrics,
    private readonly opts: HookDeliveryOptions,
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
    const perMinute = opts.perMinute ?? 120;
    this.#perHook = new RateLimiter({ rate: perMinute / 60, burst: perMinute }, this.clock);
    this.#deliveries = new DeliveryScheduler(
      {
        workers: opts.workers ?? 8,
        attempts: opts.attempts ?? 3,
        backoffMs: opts.backoffMs ?? [1000, 5000],
        queueSize: opts.queueSize ?? 4096,
        perHookQueue: opts.perHookQueue ?? 64,
      },
      {
        attempt: (d) => this.#attempt(d),
        finish: (d, last) => this.#finish(d, last),
        dropped: (ds, why) => {
          for (const d of ds) this.metrics.hookNotifications.inc({ type: d.type, outcome: 'dropped' });
          this.log.warn({ hook_id: ds[0]!.hookId, dropped: ds.length, why }, 'notify hook deliveries dropped');
        },
        crashed: (d, err) => this.log.error({ hook_id: d.hookId, err: (err as Error).message }, 'notify hook delivery crashed'),
      },
    );
  }

  enqueue(hook: HookRow, payload: Record<string, unknown>): void {
    let body = JSON.stringify(payload);
    if (Buffer.byteLength(body) > HOOK_BODY_MAX_BYTES) body = JSON.stringify({ ...payload, summary: '' });
    const type = String(payload.type);
    if (this.#perHook.take(hook.id) > 0) {
      this.metrics.hookNotifications.inc({ type, outcome: 'dropped' });
      this.log.warn({ hook_id: hook.id, type }, 'notify hook over its rate; notification dropped');
      return;
    }
    const delivery: QueuedNotification = { hookId: hook.id, endpointId: hook.endpoint_id, type, body, msgId: `msg_${ulid()}`, attempts: 0 };
    this.#deliveries.enqueue(delivery, hook.consecutive_failures > 0);
  }

  /** Drops the hook's waiting deliveries here. */
  forget(hookId: string, why: 'hook_gone' | 'hook_disabled'): void {
    this.#deliveries.forget(hookId, why);
  }

  async stop(): Promise<void> {
    await this.#deliveries.stop();
  }

  /** One attempt, with the hook read again first: deleted, disabled or revoked since means none. */
  async #attempt(d: QueuedNotification): Promise<AttemptResult | 'gone'> {
    const hook = await deliverableHook(this.sql, d.endpointId, d.hookId);
    if (!hook) return 'gone';
    const r = await sendHookRequest(hook, d, { box: this.box.for(sealedFor('notify_hooks', hook.id)), policy: this.opts, timeoutMs: this.opts.timeoutMs ?? 5000, now: this.clock.now() });
    this.metrics.hookAttempts.inc({ result: attemptClass(r) });
    return r;
  }

  async #finish(d: QueuedNotification, last: AttemptResult): Promise<{ stop: boolean }> {
    const { disabled } = await recordHookOutcome(this.sql, d.hookId, { ok: last.ok, status: last.status, error: last.error }, this.clock.now());
    this.metrics.hookNotifications.inc({ type: d.type, outcome: last.ok ? 'delivered' : 'failed' });
    if (disabled) {
      this.metrics.hooksDisabled.inc({ reason: 'consecutive_failures' });
      this.log.warn({ hook_id: d.hookId }, 'notify hook disabled after repeated failures');
    }
    this.log.info({ hook_id: d.hookId, type: d.type, ok: last.ok, status: last.status, error: last.error, attempts: d.attempts }, 'notify hook delivery');
    return { stop: disabled };
  }
}

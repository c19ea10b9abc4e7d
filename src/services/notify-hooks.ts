import { audit } from '../lib/audit.ts';
import type { ServiceBase } from './base.ts';
import { ulid } from 'ulidx';
import type { Clock } from '../lib/clock.ts';
import { RateLimiter } from '../lib/rate-limit.ts';
import { TtlCache } from '../lib/ttl-cache.ts';
import { notify } from '../store/channels.ts';
import type { WakeupHandlers } from './wakeups.ts';
import { randomUUID } from 'node:crypto';
import { sealedFor, type SecretBox } from '../lib/crypto-box.ts';
import type { Sql } from '../db/connect.ts';
import { inputsOf } from './presence.ts';
import { actorLabel, type Actor } from '../domain/actor.ts';
import { invalidArgument } from '../domain/errors.ts';
import { scopedQueue } from '../domain/scope.ts';
import type { Logger } from '../lib/log.ts';
import type { Metrics } from '../lib/metrics.ts';
import { neutralizeText } from '../domain/neutralize.ts';
import { effective } from '../domain/presence/index.ts';
import { deleteHook, deliverableHook, getEndpointHook, getOwnHook, hookTargets, insertHook, listHooks, recordHookOutcome, rotateHook, type HookRow } from '../store/hooks.ts';
import { pushEligibleBacklog, type TodoMetaRow } from '../store/todos/index.ts';
import { rfc3339 } from '../domain/time.ts';
import { mintHookSecret } from '../lib/hook-signing.ts';
import { checkHookTarget, type OutboundPolicy, pointsAtSelf, type SelfAddress } from '../lib/ssrf.ts';
import { DeliveryScheduler, type AttemptResult, type QueuedNotification } from './notify-hooks-queue.ts';
import { attemptClass, sendHookRequest } from './notify-hooks-send.ts';

export const HOOK_BODY_MAX_BYTES = 4096;
export const ROTATION_GRACE_MS = 24 * 3_600_000;

export interface NotifyHookOptions extends OutboundPolicy {
  /** Hooks one endpoint may have (SWITCHBOARD_NOTIFY_HOOK_MAX). */
  max: number;
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
  /** Where this server answers: a hook may not point at it. */
  self?: () => SelfAddress;
}

export type HookReason = 'created' | 'requeued';

/** How long "this endpoint has no enabled hook" is believed with no invalidation heard. */
export const NO_HOOKS_CACHE_MS = 30_000;

/**
 * Notify hooks (SPEC-0024): outbound calls telling a consumer with no live session that work is
 * waiting. Fired after commit by the instance that made the transition; delivered by a bounded
 * in-process queue per hook and a few workers (notify-hooks-queue.ts) so ingestion never waits
 * on a receiver and no hook's receiver holds up another's.
 */
export class NotifyHooks {
  readonly #deliveries: DeliveryScheduler;
  /** Notifications per hook: `perMinute` (default 120) a minute, refilled on the injected clock. */
  readonly #perHook: RateLimiter;
  /**
   * Endpoints known to have no enabled hook, so a ready todo costs no lookup. Only a hook becoming
   * enabled (created, or re-enabled by a rotation) can make that wrong: it forgets the endpoint
   * here at once and elsewhere by `notify_hooks_changed`.
   */
  readonly #withoutHooks: TtlCache<string, true>;

  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    base: ServiceBase,
    private readonly box: SecretBox,
    private readonly metrics: Metrics,
    private readonly opts: NotifyHookOptions,
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
    const perMinute = opts.perMinute ?? 120;
    this.#perHook = new RateLimiter({ rate: perMinute / 60, burst: perMinute }, this.clock);
    this.#withoutHooks = new TtlCache(this.clock, NO_HOOKS_CACHE_MS);
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

  // ---------------------------------------------------------------------------------------------
  // Management

  view(h: HookRow) {
    let shown = h.url;
    try {
      const u = new URL(h.url);
      if (u.search) u.search = '?redacted';
      shown = u.toString();
    } catch {
      /* stored URLs were validated */
    }
    return {
      hook_id: h.id,
      url: shown,
      queues: h.queues,
      ignore_presence: h.ignore_presence,
      enabled: h.enabled,
      disabled_reason: h.disabled_reason,
      disabled_at: rfc3339(h.disabled_at) ?? null,
      consecutive_failures: h.consecutive_failures,
      last_attempt_at: rfc3339(h.last_attempt_at) ?? null,
      last_status: h.last_status,
      last_error: h.last_error,
      created_at: rfc3339(h.created_at),
    };
  }

  async create(owner: { id: string; slug: string; queues: readonly string[] }, input: { url?: unknown; queues?: unknown; ignore_presence?: unknown }, by: Actor) {
    if (typeof input.url !== 'string') throw invalidArgument('url', 'is required and must be a string');
    const target = await checkHookTarget(input.url, this.opts);
    if (this.opts.self && pointsAtSelf(target, this.opts.self())) {
      throw invalidArgument('url', `points at this Switchboard server (${target.url.origin}); a notify hook must call a receiver of your own`);
    }
    const queues = input.queues === undefined ? [] : input.queues;
    if (!Array.isArray(queues) || queues.some((q) => typeof q !== 'string')) throw invalidArgument('queues', 'must be a list of queue names');
    for (const q of queues as string[]) scopedQueue(owner, 'queues', q, by.kind === 'agent' ? 'agent' : 'operator');
    if (input.ignore_presence !== undefined && typeof input.ignore_presence !== 'boolean') throw invalidArgument('ignore_presence', 'must be true or false');
    const secret = mintHookSecret();
    // The id is chosen here: the sealed secret is bound to it.
    const id = randomUUID();
    const row = await insertHook(
      this.sql,
      {
        endpointId: owner.id,
        url: target.url.toString(),
        id,
        sealedSecret: this.box.for(sealedFor('notify_hooks', id)).seal(secret),
        queues: [...new Set(queues as string[])],
        ignorePresence: input.ignore_presence === true,
        createdBy: actorLabel(by),
        max: this.opts.max,
      },
      this.clock.now(),
    );
    await this.#hooksEnabled(owner.id);
    audit(this.log, 'notify_hook.create', by, { endpoint_id: owner.id, hook_id: row.id, url: row.url });
    return { ...this.view(row), signing_secret: secret };
  }

  /** An endpoint may have gained an enabled hook: no instance may go on believing it has none. */
  async #hooksEnabled(endpointId: string): Promise<void> {
    this.#withoutHooks.delete(endpointId);
    await notify(this.sql, 'notify_hooks_changed', { endpointId });
  }

  /** What this service does on `notify_hooks_changed`; after a reconnect it believes nothing cached. */
  wakeups(): WakeupHandlers {
    return {
      notify_hooks_changed: {
        onNotify: ({ endpointId }) => this.#withoutHooks.delete(endpointId),
        onListen: () => this.#withoutHooks.clear(),
      },
    };
  }

  async list(endpointId: string) {
    const hooks = await listHooks(this.sql, endpointId);
    return { hooks: hooks.map((h) => this.view(h)), ceiling: { max: this.opts.max, used: hooks.length } };
  }

  async rotate(row: HookRow, by: Actor) {
    const secret = mintHookSecret();
    const now = this.clock.now();
    const rotated = await rotateHook(this.sql, row.id, this.box.for(sealedFor('notify_hooks', row.id)).seal(secret), new Date(now.getTime() + ROTATION_GRACE_MS), now);
    await this.#hooksEnabled(row.endpoint_id);
    audit(this.log, 'notify_hook.rotate', by, { endpoint_id: row.endpoint_id, hook_id: row.id });
    return { ...this.view(rotated), signing_secret: secret };
  }

  async delete(row: HookRow, by: Actor) {
    await deleteHook(this.sql, row.id);
    audit(this.log, 'notify_hook.delete', by, { endpoint_id: row.endpoint_id, hook_id: row.id });
    // Other instances drop theirs at the next attempt, when they find the hook gone.
    this.#deliveries.forget(row.id, 'hook_gone');
    return { hook_id: row.id, deleted: true };
  }

  endpointHook(endpointId: string, hookId: string) {
    return getEndpointHook(this.sql, endpointId, hookId);
  }

  /** One of the human's hooks; another human's answers like a missing one. */
  ownHook(humanId: string, hookId: string) {
    return getOwnHook(this.sql, humanId, hookId);
  }

  // ---------------------------------------------------------------------------------------------
  // Firing. Callers pass only push-eligible todos (never synthetic, never quarantined).

  /** A todo became ready (created, or back to pending): one `todo.ready` per matching hook. */
  /** Fire-and-forget forms for after-commit fan-outs: a failure is logged, never thrown at the caller. */
  announceTodo(todo: TodoMetaRow, reason: HookReason): void {
    void this.todoReady(todo, reason).catch((err: unknown) => this.#cannotFire(err));
  }

  announceBacklog(endpointId: string, reason: string): void {
    void this.backlog(endpointId, reason).catch((err: unknown) => this.#cannotFire(err));
  }

  #cannotFire(err: unknown): void {
    this.log.error({ stage: 'notify hooks', err: (err as Error).message }, 'notify hooks could not fire');
  }

  async todoReady(todo: TodoMetaRow, reason: HookReason): Promise<void> {
    if (todo.synthetic || this.#withoutHooks.get(todo.endpoint_id)) return;
    const mark = this.#withoutHooks.mark();
    const targets = await hookTargets(this.sql, todo.endpoint_id);
    if (!targets || targets.hooks.length === 0) {
      this.#withoutHooks.setUnlessDropped(mark, todo.endpoint_id, true);
      return;
    }
    const out = effective(inputsOf(targets.endpoint), this.clock.now()).presence === 'out';
    const body = {
      type: 'todo.ready',
      reason,
      todo_id: todo.id,
      queue: todo.queue,
      ...(todo.kind ? { kind: todo.kind } : {}),
      ...(todo.source ? { source: todo.source } : {}),
      summary: neutralizeText(todo.title, 200),
      endpoint: targets.endpoint.slug,
      attempt: todo.attempt,
      created_at: rfc3339(todo.created_at),
    };
    for (const hook of targets.hooks) {
      if (out && !hook.ignore_presence) continue;
      const queues = hook.queues.length > 0 ? hook.queues : targets.endpoint.scope_queues;
      if (!queues.includes(todo.queue) || !targets.endpoint.scope_queues.includes(todo.queue)) continue;
      this.#enqueue(hook, body);
    }
  }

  /** An endpoint came back in: one `todos.backlog` per presence-respecting hook, counts only. */
  async backlog(endpointId: string, reason: string): Promise<void> {
    const targets = await hookTargets(this.sql, endpointId);
    const hooks = targets?.hooks.filter((h) => !h.ignore_presence) ?? [];
    if (!targets || hooks.length === 0) return;
    const backlog = await pushEligibleBacklog(this.sql, endpointId);
    if (backlog.length === 0) return;
    const now = this.clock.now();
    for (const hook of hooks) {
      const scope = hook.queues.length > 0 ? hook.queues : targets.endpoint.scope_queues;
      const mine = backlog.filter((t) => scope.includes(t.queue));
      if (mine.length === 0) continue;
      this.#enqueue(hook, {
        type: 'todos.backlog',
        reason,
        endpoint: targets.endpoint.slug,
        pending: mine.length,
        queues: [...new Set(mine.map((t) => t.queue))].sort(),
        oldest_pending_seconds: Math.max(0, Math.round((now.getTime() - mine[0]!.created_at.getTime()) / 1000)),
        created_at: rfc3339(now),
      });
    }
  }

  async stop(): Promise<void> {
    await this.#deliveries.stop();
  }

  // ---------------------------------------------------------------------------------------------
  // Delivery

  #enqueue(hook: HookRow, payload: Record<string, unknown>): void {
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

import { audit } from '../lib/audit.ts';
import type { ServiceBase } from './base.ts';
import type { Clock } from '../lib/clock.ts';
import { TtlCache } from '../lib/ttl-cache.ts';
import { notify } from '../store/channels.ts';
import type { WakeupHandlers } from './wakeups.ts';
import { randomUUID } from 'node:crypto';
import { sealedFor, type SecretBox } from '../lib/crypto-box.ts';
import type { Sql } from '../db/connect.ts';
import { actorLabel, type Actor } from '../domain/actor.ts';
import { invalidArgument } from '../domain/errors.ts';
import { scopedQueue } from '../domain/scope.ts';
import type { Logger } from '../lib/log.ts';
import type { Metrics } from '../lib/metrics.ts';
import { deleteHook, getEndpointHook, getOwnHook, insertHook, listHooks, rotateHook, type HookRow } from '../store/hooks.ts';
import type { TodoMetaRow } from '../store/todos/index.ts';
import { rfc3339 } from '../domain/time.ts';
import { mintHookSecret } from '../lib/hook-signing.ts';
import { checkHookTarget, pointsAtSelf, type SelfAddress } from '../lib/ssrf.ts';
import { HookDeliveries, type HookDeliveryOptions } from './notify-hooks-delivery.ts';
import { HookAnnouncer, type HookReason } from './notify-hooks-announce.ts';

export const ROTATION_GRACE_MS = 24 * 3_600_000;

export interface NotifyHookOptions extends HookDeliveryOptions {
  /** Hooks one endpoint may have (SWITCHBOARD_NOTIFY_HOOK_MAX). */
  max: number;
  /** Where this server answers: a hook may not point at it. */
  self?: () => SelfAddress;
}

export type { HookReason } from './notify-hooks-announce.ts';

/** How long "this endpoint has no enabled hook" is believed with no invalidation heard. */
export const NO_HOOKS_CACHE_MS = 30_000;

/**
 * Notify hooks (SPEC-0024): outbound calls telling a consumer with no live session that work is
 * waiting. Managed here (create, list, rotate, delete); fired after commit by the instance that
 * made the transition (notify-hooks-announce.ts); delivered by a bounded in-process queue per hook
 * and a few workers (notify-hooks-delivery.ts, notify-hooks-queue.ts) so ingestion never waits
 * on a receiver and no hook's receiver holds up another's.
 */
export class NotifyHooks {
  readonly #deliveries: HookDeliveries;
  readonly #announcer: HookAnnouncer;
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
    metrics: Metrics,
    private readonly opts: NotifyHookOptions,
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
    this.#withoutHooks = new TtlCache(this.clock, NO_HOOKS_CACHE_MS);
    this.#deliveries = new HookDeliveries(base, box, metrics, opts);
    this.#announcer = new HookAnnouncer(base, this.#withoutHooks, this.#deliveries);
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
  // Firing (notify-hooks-announce.ts). Callers pass only push-eligible todos (never synthetic, never quarantined).

  /** Fire-and-forget forms for after-commit fan-outs: a failure is logged, never thrown at the caller. */
  announceTodo(todo: TodoMetaRow, reason: HookReason): void {
    this.#announcer.announceTodo(todo, reason);
  }

  announceBacklog(endpointId: string, reason: string): void {
    this.#announcer.announceBacklog(endpointId, reason);
  }

  /** A todo became ready (created, or back to pending): one `todo.ready` per matching hook. */
  todoReady(todo: TodoMetaRow, reason: HookReason): Promise<void> {
    return this.#announcer.todoReady(todo, reason);
  }

  /** An endpoint came back in: one `todos.backlog` per presence-respecting hook, counts only. */
  backlog(endpointId: string, reason: string): Promise<void> {
    return this.#announcer.backlog(endpointId, reason);
  }

  async stop(): Promise<void> {
    await this.#deliveries.stop();
  }
}

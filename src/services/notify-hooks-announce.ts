import type { ServiceBase } from './base.ts';
import type { Sql } from '../db/connect.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../lib/log.ts';
import type { TtlCache } from '../lib/ttl-cache.ts';
import { inputsOf } from './presence.ts';
import { neutralizeText } from '../domain/neutralize.ts';
import { effective } from '../domain/presence/index.ts';
import { rfc3339 } from '../domain/time.ts';
import { hookTargets } from '../store/hooks.ts';
import { pushEligibleBacklog, type TodoMetaRow } from '../store/todos/index.ts';
import type { HookDeliveries } from './notify-hooks-delivery.ts';

export type HookReason = 'created' | 'requeued';

/**
 * Firing notify hooks: which of an endpoint's hooks hear of a ready todo or a backlog, and the
 * notification each is handed for delivery (notify-hooks-delivery.ts). Callers pass only
 * push-eligible todos (never synthetic, never quarantined).
 */
export class HookAnnouncer {
  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    base: ServiceBase,
    /** Endpoints known to have no enabled hook (NotifyHooks forgets one when a hook becomes enabled). */
    private readonly withoutHooks: TtlCache<string, true>,
    private readonly deliveries: HookDeliveries,
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
  }

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

  /** A todo became ready (created, or back to pending): one `todo.ready` per matching hook. */
  async todoReady(todo: TodoMetaRow, reason: HookReason): Promise<void> {
    if (todo.synthetic || this.withoutHooks.get(todo.endpoint_id)) return;
    const mark = this.withoutHooks.mark();
    const targets = await hookTargets(this.sql, todo.endpoint_id);
    if (!targets || targets.hooks.length === 0) {
      this.withoutHooks.setUnlessDropped(mark, todo.endpoint_id, true);
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
      this.deliveries.enqueue(hook, body);
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
      this.deliveries.enqueue(hook, {
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
}

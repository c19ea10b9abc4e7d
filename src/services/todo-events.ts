import type { Sql } from '../db/connect.ts';
import type { Logger } from '../lib/log.ts';
import { notify } from '../store/channels.ts';
import type { TodoMetaRow } from '../store/todos/index.ts';
import type { ClaimWaiters } from './claim-waiters.ts';
import type { ReadyRings } from './doorbell/ready-rings.ts';
import type { HookReason, NotifyHooks } from './notify-hooks.ts';

/**
 * How a todo became claimable: pushed (`created`), a delayed todo whose run_at passed (`due`),
 * back to pending after an expired lease, a retry that came due or an operator's retry
 * (`requeued`), or handed back by its holder (`released`).
 */
export type BecameReady = 'created' | 'due' | 'requeued' | 'released';

/**
 * Who hears of each way of becoming claimable, in one table:
 * - `ring`: the todo's ready ring is offered (the store grants it only to a push-eligible todo
 *   nobody announced yet, store/todos/announce.ts), here and on every instance through
 *   `todo_ready`. A released todo was announced when it was claimed or rung; the heartbeat sweep
 *   re-rings it on its schedule, so a release sends `todo_claimable`, which rings nothing.
 * - `hook`: the notify hooks' reason (a delayed todo's first readiness is its `created`); none on
 *   a release (the hooks' spec: created and requeued).
 * Every way wakes the long-polling claims of the todo's queue, here and on every instance.
 */
export const READY_EFFECTS: Readonly<Record<BecameReady, { ring: boolean; hook: HookReason | null }>> = {
  created: { ring: true, hook: 'created' },
  due: { ring: true, hook: 'created' },
  requeued: { ring: true, hook: 'requeued' },
  released: { ring: false, hook: null },
};

/**
 * A todo that became claimable, and whether it passed the sender gate (verified or token-trusted,
 * due, a real queue): an eligible one is rung and hooked; of another only its queue's claims wake.
 */
export type ClaimableTodo = { pushEligible: true; todo: TodoMetaRow } | { pushEligible: false; todo: Pick<TodoMetaRow, 'id' | 'endpoint_id' | 'queue'> };

/** Who can hear; one left out hears nothing (a test builds only what it watches). */
export interface TodoEventDeps {
  sql: Sql;
  log: Logger;
  rings?: Pick<ReadyRings, 'ringReady'>;
  hooks?: Pick<NotifyHooks, 'announceTodo'>;
  waiters?: Pick<ClaimWaiters, 'ready'>;
}

/**
 * The one owner of "todos became claimable" after their commit: push, the operator's retry, the
 * reaper and release hand them here, and READY_EFFECTS decides who hears.
 *
 * Other instances hear through a NOTIFY. A push and an operator retry send `todo_ready` inside
 * their own statement, delivered at commit, so a crash after the commit loses no wakeup
 * (`broadcast: 'sent'`); the reaper's and release's statements do not, and this sends it after
 * their commit (`'needed'`). A wakeup lost to a crash there is found by the other instances' long
 * polls looking again (LONG_POLL_RECHECK_MS) and the heartbeat sweep.
 */
export class TodoEvents {
  constructor(private readonly deps: TodoEventDeps) {}

  becameClaimable(todos: readonly ClaimableTodo[], how: BecameReady, broadcast: 'sent' | 'needed'): void {
    if (todos.length === 0) return;
    const { ring, hook } = READY_EFFECTS[how];
    for (const t of todos) {
      if (t.pushEligible && ring) this.deps.rings?.ringReady(t.todo);
      if (t.pushEligible && hook) this.deps.hooks?.announceTodo(t.todo, hook);
    }
    const queues = queuesOf(todos);
    for (const { endpointId, queue } of queues) this.deps.waiters?.ready(endpointId, queue);
    if (broadcast === 'needed') void this.#broadcast(ring ? 'todo_ready' : 'todo_claimable', queues);
  }

  async #broadcast(channel: 'todo_ready' | 'todo_claimable', queues: readonly { endpointId: string; queue: string }[]): Promise<void> {
    for (const target of queues) {
      try {
        await notify(this.deps.sql, channel, target);
      } catch (err) {
        this.deps.log.warn({ err: (err as Error).message, endpoint_id: target.endpointId, channel }, 'wakeup broadcast failed; other instances find the work at their next look');
      }
    }
  }
}

/** The distinct endpoint and queue pairs of some todos. */
function queuesOf(todos: readonly ClaimableTodo[]): { endpointId: string; queue: string }[] {
  const seen = new Map<string, { endpointId: string; queue: string }>();
  for (const { todo } of todos) seen.set(`${todo.endpoint_id}\n${todo.queue}`, { endpointId: todo.endpoint_id, queue: todo.queue });
  return [...seen.values()];
}

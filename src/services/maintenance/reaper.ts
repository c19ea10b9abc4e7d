import type { Clock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import type { Logger } from '../../lib/log.ts';
import {
  pushEligibleTodosByIds,
  reapExpiredLeasesUnscoped,
  releaseDueDelayedUnscoped,
  requeueDueRetriesUnscoped,
  type Moved,
} from '../../store/todos/index.ts';

import type { ClaimableTodo, TodoEvents } from '../todo-events.ts';
import type { MaintenanceLoop } from './loop.ts';

export const REAPER_INTERVAL_MS = 30_000;

/**
 * One reaper pass: expired leases back to pending (or dead letters at the attempt cap), due
 * retries back to pending, and delayed todos whose run_at passed released. Whatever became ready
 * goes to TodoEvents after the statements, which decides who hears.
 * Safe on every instance at once: each row is moved by one statement.
 */
export async function reapOnce(deps: {
  sql: Sql;
  clock: Clock;
  log: Logger;
  /** Who hears of what became claimable (expired leases and due retries: `requeued`; delayed todos: `due`). */
  events: Pick<TodoEvents, 'becameClaimable'>;
}): Promise<{ reaped: Moved[]; requeued: Moved[]; released: Moved[] }> {
  const now = deps.clock.now();
  const reaped = await reapExpiredLeasesUnscoped(deps.sql, now);
  const requeued = await requeueDueRetriesUnscoped(deps.sql, now);
  const released = await releaseDueDelayedUnscoped(deps.sql, now);
  if (reaped.length || requeued.length || released.length) {
    deps.log.info(
      {
        leases_expired: reaped.filter((m) => m.state === 'pending').length,
        dead_lettered: reaped.filter((m) => m.state === 'failed').length,
        retries_requeued: requeued.length,
        delayed_released: released.length,
      },
      'reaper pass',
    );
  }
  const back = [...reaped, ...requeued].filter((m) => m.state === 'pending');
  const due = released.filter((m) => m.state === 'pending');
  if (back.length + due.length === 0) return { reaped, requeued, released };
  const eligible = new Map((await pushEligibleTodosByIds(deps.sql, [...back, ...due].map((m) => m.id))).map((t) => [t.id, t]));
  const claimable = (moved: Moved[]): ClaimableTodo[] =>
    moved.map((m) => {
      const row = eligible.get(m.id);
      return row ? { pushEligible: true, todo: row } : { pushEligible: false, todo: m };
    });
  deps.events.becameClaimable(claimable(back), 'requeued', 'needed');
  deps.events.becameClaimable(claimable(due), 'due', 'needed');
  return { reaped, requeued, released };
}

export const reaperLoop = (deps: Parameters<typeof reapOnce>[0]): MaintenanceLoop => ({
  name: 'reaper',
  intervalMs: REAPER_INTERVAL_MS,
  runNow: true,
  tick: () => reapOnce(deps),
});

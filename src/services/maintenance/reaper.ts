import type { Clock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import type { Logger } from '../../lib/log.ts';
import { notify } from '../../store/channels.ts';
import {
  pushEligibleTodosByIds,
  reapExpiredLeasesUnscoped,
  releaseDueDelayedUnscoped,
  requeueDueRetriesUnscoped,
  type Moved,
  type TodoMetaRow,
} from '../../store/todos/index.ts';

import type { MaintenanceLoop } from './loop.ts';

export const REAPER_INTERVAL_MS = 30_000;

/**
 * One reaper pass: expired leases back to pending (or dead letters at the attempt cap), due
 * retries back to pending, and delayed todos whose run_at passed released. Whatever became ready
 * wakes its endpoint (todo_ready: every instance's doorbell rings it, long-polling claims look).
 * Safe on every instance at once: each row is moved by one statement.
 */
export async function reapOnce(deps: {
  sql: Sql;
  clock: Clock;
  log: Logger;
  /** Runs with the push-eligible todos this pass put back to pending (the notify hooks' `requeued`). */
  onRequeued?: (todos: TodoMetaRow[]) => void;
  /** Runs with the push-eligible delayed todos this pass released (ready for the first time: the hooks' `created`). */
  onDue?: (todos: TodoMetaRow[]) => void;
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
  // Work that is pending again wakes its endpoint's sessions on every instance.
  const ready = new Set([...reaped, ...requeued, ...released].filter((m) => m.state === 'pending').map((m) => `${m.endpoint_id}\n${m.queue}`));
  for (const key of ready) {
    const [endpointId, queue] = key.split('\n') as [string, string];
    await notify(deps.sql, 'todo_ready', { endpointId, queue });
  }
  const pending = [...reaped, ...requeued].filter((m) => m.state === 'pending').map((m) => m.id);
  if (deps.onRequeued && pending.length > 0) deps.onRequeued(await pushEligibleTodosByIds(deps.sql, pending));
  if (deps.onDue && released.length > 0) deps.onDue(await pushEligibleTodosByIds(deps.sql, released.map((m) => m.id)));
  return { reaped, requeued, released };
}

export const reaperLoop = (deps: Parameters<typeof reapOnce>[0]): MaintenanceLoop => ({
  name: 'reaper',
  intervalMs: REAPER_INTERVAL_MS,
  runNow: true,
  tick: () => reapOnce(deps),
});

import type { Clock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import type { Logger } from '../../lib/log.ts';
import { chargeDueRingsUnscoped } from '../../store/todos/index.ts';
import type { Doorbell } from '../doorbell/doorbell.ts';
import type { PresenceService } from '../presence.ts';

import type { MaintenanceLoop } from './loop.ts';

export const SWEEP_INTERVAL_MS = 30_000;

export interface SweepDeps {
  sql: Sql;
  clock: Clock;
  log: Logger;
  doorbell: Doorbell;
  /** Claims the presence transitions found due here first, so their digest goes before any ring. */
  presence?: Pick<PresenceService, 'claimHeldHere'>;
  receivers?: () => string[];
}

/**
 * One heartbeat sweep on this instance: re-ring due, unclaimed todos, but only for endpoints
 * that have a session attached here (DESIGN decision 10) and whose return to in has been claimed
 * (decision 9): a transition still unclaimed is claimed first, which sends its digest instead of
 * single rings. A charged ring that reached no session keeps its charge and gives up the
 * announcement before the charge commits, so a reconnect digest counting the todo meanwhile
 * (another instance's new stream) counts it.
 */
export async function sweepOnce(deps: SweepDeps): Promise<number> {
  await deps.presence?.claimHeldHere();
  const receivers = deps.receivers ? deps.receivers() : deps.doorbell.receivers();
  if (receivers.length === 0) return 0;
  const now = deps.clock.now();
  // The doorbells are written inside the charge's transaction: a digest elsewhere counting the
  // same rows waits until the unheard ones are given back (store/todos/announce.ts).
  const charged = await chargeDueRingsUnscoped(deps.sql, receivers, now, {
    ring: (todos) =>
      todos
        .filter((todo) => {
          deps.log.info({ todo_id: todo.id, ring: todo.ring_attempts }, 'doorbell re-ring');
          return !deps.doorbell.ring(todo, now).rung;
        })
        .map((todo) => todo.id),
  });
  return charged.length;
}

export const doorbellSweepLoop = (deps: SweepDeps): MaintenanceLoop => ({
  name: 'doorbell-sweep',
  intervalMs: SWEEP_INTERVAL_MS,
  tick: () => sweepOnce(deps),
});

import type { Clock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import type { Logger } from '../../lib/log.ts';
import { chargeDueRingsUnscoped, withdrawSweepRings } from '../../store/todos/index.ts';
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
 * announcement, so the next stream's reconnect digest counts the todo.
 */
export async function sweepOnce(deps: SweepDeps): Promise<number> {
  await deps.presence?.claimHeldHere();
  const receivers = deps.receivers ? deps.receivers() : deps.doorbell.receivers();
  if (receivers.length === 0) return 0;
  const now = deps.clock.now();
  const charged = await chargeDueRingsUnscoped(deps.sql, receivers, now);
  const unheard: string[] = [];
  for (const todo of charged) {
    deps.log.info({ todo_id: todo.id, ring: todo.ring_attempts }, 'doorbell re-ring');
    if (!deps.doorbell.ring(todo, now).rung) unheard.push(todo.id);
  }
  await withdrawSweepRings(deps.sql, unheard, now);
  return charged.length;
}

export const doorbellSweepLoop = (deps: SweepDeps): MaintenanceLoop => ({
  name: 'doorbell-sweep',
  intervalMs: SWEEP_INTERVAL_MS,
  tick: () => sweepOnce(deps),
});

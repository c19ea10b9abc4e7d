import { PRESENCE_EVALUATOR_INTERVAL_MS, type PresenceService } from '../presence.ts';
import type { MaintenanceLoop } from './loop.ts';

/** Claims presence transitions that are due (a shift starting or ending, an override running out). */
export const presenceEvaluatorLoop = (presence: PresenceService): MaintenanceLoop => ({
  name: 'presence-evaluator',
  intervalMs: PRESENCE_EVALUATOR_INTERVAL_MS,
  runNow: true,
  tick: () => presence.evaluate(),
});

import { UNHEARD_SWEEP_INTERVAL_MS, type DoorbellAcks } from '../doorbell/acks.ts';
import type { MaintenanceLoop } from './loop.ts';

/** Marks rings whose acknowledgement window has passed as unheard, and flags their sessions. */
export const unheardSweepLoop = (acks: DoorbellAcks): MaintenanceLoop => ({
  name: 'unheard-sweep',
  intervalMs: UNHEARD_SWEEP_INTERVAL_MS,
  tick: () => acks.sweep(),
});

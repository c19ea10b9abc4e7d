import { REFUSAL_FLUSH_MS, type WebhookRefusalTally } from '../webhook-refusals.ts';
import type { MaintenanceLoop } from './loop.ts';

/** Writes the refusals this instance counted per webhook, every few seconds (App.stop writes the rest). */
export const webhookRefusalsLoop = (tally: Pick<WebhookRefusalTally, 'flush'>): MaintenanceLoop => ({
  name: 'webhook-refusals',
  intervalMs: REFUSAL_FLUSH_MS,
  tick: () => tally.flush(),
});

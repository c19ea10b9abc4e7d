import { addWebhookRefusals, type WebhookRefusalCount } from '../store/webhook-refusals.ts';
import type { ServiceBase } from './base.ts';

/** How often an instance writes the refusals it counted (the refusal tally loop). */
export const REFUSAL_FLUSH_MS = 5_000;

/**
 * The deliveries each webhook refused on this instance, counted in memory and written a few
 * seconds at a time (addWebhookRefusals), so a flood of bad signatures or of deliveries over the
 * rate costs one statement per flush, not a write each. A crash loses at most the last flush
 * interval's counts; a stop writes them (App.stop).
 */
export class WebhookRefusalTally {
  readonly #pending = new Map<string, WebhookRefusalCount>();

  constructor(private readonly base: ServiceBase) {}

  /** One refused delivery of `webhookId`, answered with the error code `reason`, now. */
  count(webhookId: string, reason: string): void {
    const at = this.base.clock.now().getTime();
    this.#add({ webhookId, bucket: new Date(at - (at % 60_000)), reason, n: 1 });
  }

  /** Writes what was counted since the last flush; on failure the counts are kept for the next. */
  async flush(): Promise<number> {
    if (this.#pending.size === 0) return 0;
    const taken = [...this.#pending.values()];
    this.#pending.clear();
    try {
      return await addWebhookRefusals(this.base.sql, taken);
    } catch (err) {
      for (const c of taken) this.#add(c);
      throw err;
    }
  }

  #add(c: WebhookRefusalCount): void {
    const key = `${c.webhookId} ${c.bucket.getTime()} ${c.reason}`;
    const held = this.#pending.get(key);
    if (held) held.n += c.n;
    else this.#pending.set(key, { ...c });
  }
}

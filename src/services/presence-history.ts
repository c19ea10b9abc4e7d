import { listPresenceChanges, presenceChangeBefore, type PresenceChangeRow } from '../store/presence-history/index.ts';
import type { ServiceBase } from './base.ts';

export type { PresenceChangeRow };

/** GET .../presence/history and the CLI: how far back by default, and how many rows at most. */
export const PRESENCE_HISTORY_DEFAULT_SINCE_MS = 7 * 24 * 3_600_000;
export const PRESENCE_HISTORY_DEFAULT_LIMIT = 200;
export const PRESENCE_HISTORY_MAX_LIMIT = 1000;

/** A window of presence history: [since, until). */
export interface PresenceWindow {
  since: Date;
  until: Date;
}

/** The board's "this week": the last 7 days, now included. A chart of the same week uses the same window. */
export const presenceWeek = (now: Date): PresenceWindow => ({
  since: new Date(now.getTime() - PRESENCE_HISTORY_DEFAULT_SINCE_MS),
  until: new Date(now.getTime() + 1),
});

/**
 * Reads of the presence history (issue 39 item 2): each change of an endpoint's effective
 * presence, written once by the claim that decided it (store/presence.ts). Every read is scoped
 * to the human in its own statement: another human's endpoint has no history.
 */
export class PresenceHistory {
  constructor(private readonly base: Pick<ServiceBase, 'sql' | 'clock'>) {}

  /**
   * The API's and the CLI's list: changes since `since` (default 7 days ago, answered with the
   * rows), newest first, at most `limit` (default 200, never over 1000).
   */
  async recent(humanId: string, endpointId: string, opts: { since?: Date; limit?: number } = {}): Promise<{ since: Date; changes: PresenceChangeRow[] }> {
    const since = opts.since ?? new Date(this.base.clock.now().getTime() - PRESENCE_HISTORY_DEFAULT_SINCE_MS);
    const limit = Math.min(opts.limit ?? PRESENCE_HISTORY_DEFAULT_LIMIT, PRESENCE_HISTORY_MAX_LIMIT);
    return { since, changes: await listPresenceChanges(this.base.sql, humanId, endpointId, { since, limit }) };
  }

  /**
   * The changes claimed in [since, until), newest first (at most PRESENCE_HISTORY_MAX_LIMIT), and
   * the last change before `since`, whose `to` is the presence the window starts with (null: none
   * kept). The board's week table reads this; a presence band over the same window can too.
   */
  async between(humanId: string, endpointId: string, w: PresenceWindow): Promise<{ changes: PresenceChangeRow[]; before: PresenceChangeRow | null }> {
    const [changes, before] = await Promise.all([
      listPresenceChanges(this.base.sql, humanId, endpointId, { since: w.since, until: w.until, limit: PRESENCE_HISTORY_MAX_LIMIT }),
      presenceChangeBefore(this.base.sql, humanId, endpointId, w.since),
    ]);
    return { changes, before };
  }
}

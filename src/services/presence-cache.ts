import type { Clock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import { effective, parseShift, type Presence, type PresenceInputs, type Shift } from '../domain/presence/index.ts';
import { readPresence, readPresenceMany, type PresenceRow } from '../store/presence.ts';

/** Distinct shift strings kept parsed; past it the least recently used is dropped (tenants choose the strings). */
export const SHIFT_CACHE_MAX = 10_000;
const shiftCache = new Map<string, Shift>();
/** For tests: how many shifts are kept, and whether one is. */
export const shiftCacheSize = (): number => shiftCache.size;
export const shiftCacheHas = (text: string): boolean => shiftCache.has(text);

/** Stored shifts were validated on write; parsed once per distinct string while it stays in use. */
function storedShift(text: string | null): Shift | null {
  if (!text) return null;
  let s = shiftCache.get(text);
  if (s) {
    // A Map iterates in insertion order: re-inserting a hit makes the first key the least recently used.
    shiftCache.delete(text);
  } else {
    s = parseShift(text);
    if (shiftCache.size >= SHIFT_CACHE_MAX) shiftCache.delete(shiftCache.keys().next().value!);
  }
  shiftCache.set(text, s);
  return s;
}

export function inputsOf(row: Pick<PresenceRow, 'shift' | 'presence_override' | 'override_until' | 'override_set_at' | 'override_by'>): PresenceInputs {
  return {
    shift: storedShift(row.shift),
    override: row.presence_override,
    overrideUntil: row.override_until,
    overrideSetAt: row.override_set_at,
    overrideBy: row.override_by,
  };
}

type CachedRow = Parameters<typeof inputsOf>[0] & Pick<PresenceRow, 'presence_seen'>;

/**
 * The stored presence inputs and the last claimed presence (presence_seen) of every endpoint with
 * a session on this instance, so the doorbell can ask "may it be rung?" without a query. Filled
 * on session creation and on wakeups, re-read by the evaluator and after a claim, forgotten when
 * an endpoint's last session here closes.
 */
export class PresenceCache {
  readonly #rows = new Map<string, { inputs: PresenceInputs; seen: Presence }>();
  #onUnclaimed: (endpointId: string) => void = () => {};

  constructor(
    private readonly sql: Sql,
    private readonly clock: Clock,
    sessions: SessionRegistry,
  ) {
    sessions.on('sessionClosed', (s) => {
      if (sessions.sessionsOf(s.endpoint.id).length === 0) this.#rows.delete(s.endpoint.id);
    });
  }

  /** Called whenever a delivery decision finds an effective presence whose transition is not claimed yet. */
  whenUnclaimed(listener: (endpointId: string) => void): void {
    this.#onUnclaimed = listener;
  }

  /**
   * The presence delivery decisions follow (DESIGN decision 9): in only when the effective
   * presence is in AND that transition has been claimed; unknown endpoints are in. A transition
   * found unclaimed is handed to whoever claims (which sends the digest) and holds until then.
   */
  presenceOf(endpointId: string): Presence {
    const row = this.#rows.get(endpointId);
    if (!row) return 'in';
    const now = effective(row.inputs, this.clock.now()).presence;
    if (now !== row.seen) this.#onUnclaimed(endpointId);
    return now === 'in' && row.seen === 'in' ? 'in' : 'out';
  }

  has(endpointId: string): boolean {
    return this.#rows.has(endpointId);
  }

  /** Endpoints held here whose effective presence differs from the claimed one. */
  unclaimed(): string[] {
    const now = this.clock.now();
    return [...this.#rows].filter(([, r]) => effective(r.inputs, now).presence !== r.seen).map(([id]) => id);
  }

  /** Stores a row read elsewhere (a wakeup or a claim that already read it). */
  set(endpointId: string, row: CachedRow): void {
    this.#rows.set(endpointId, { inputs: inputsOf(row), seen: row.presence_seen });
  }

  /** Loads an endpoint's presence row (on session creation, and after a write or claim here). */
  async load(endpointId: string): Promise<void> {
    const row = await readPresence(this.sql, endpointId);
    if (row) this.set(endpointId, row);
  }

  /** Re-reads every cached endpoint: the safety net for a missed wakeup. */
  async refresh(): Promise<void> {
    const rows = await readPresenceMany(this.sql, [...this.#rows.keys()]);
    for (const row of rows) if (this.#rows.has(row.id)) this.set(row.id, row);
  }
}

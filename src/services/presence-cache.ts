import type { Clock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import { effective, parseShift, type Presence, type PresenceInputs, type Shift } from '../domain/presence/index.ts';
import { readPresence, readPresenceMany, type PresenceRow } from '../store/presence.ts';

const shiftCache = new Map<string, Shift>();
/** Stored shifts were validated on write; parsed once per distinct string. */
function storedShift(text: string | null): Shift | null {
  if (!text) return null;
  let s = shiftCache.get(text);
  if (!s) {
    s = parseShift(text);
    shiftCache.set(text, s);
  }
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

/**
 * The stored presence inputs of every endpoint with a session on this instance, so the doorbell
 * can ask "is it in?" without a query. Filled on session creation and on wakeups, re-read by the
 * evaluator, forgotten when an endpoint's last session here closes.
 */
export class PresenceCache {
  readonly #inputs = new Map<string, PresenceInputs>();

  constructor(
    private readonly sql: Sql,
    private readonly clock: Clock,
    sessions: SessionRegistry,
  ) {
    sessions.on('sessionClosed', (s) => {
      if (sessions.sessionsOf(s.endpoint.id).length === 0) this.#inputs.delete(s.endpoint.id);
    });
  }

  /** The effective presence now of an endpoint with sessions here (unknown endpoints are in). */
  presenceOf(endpointId: string): Presence {
    const inputs = this.#inputs.get(endpointId);
    return inputs ? effective(inputs, this.clock.now()).presence : 'in';
  }

  has(endpointId: string): boolean {
    return this.#inputs.has(endpointId);
  }

  /** Stores inputs read elsewhere (a wakeup that already read the row). */
  set(endpointId: string, row: Parameters<typeof inputsOf>[0]): void {
    this.#inputs.set(endpointId, inputsOf(row));
  }

  /** Loads an endpoint's presence inputs (on session creation, and after a write here). */
  async load(endpointId: string): Promise<void> {
    const row = await readPresence(this.sql, endpointId);
    if (row) this.#inputs.set(endpointId, inputsOf(row));
  }

  /** Re-reads every cached endpoint: the safety net for a missed wakeup. */
  async refresh(): Promise<void> {
    const rows = await readPresenceMany(this.sql, [...this.#inputs.keys()]);
    for (const row of rows) if (this.#inputs.has(row.id)) this.#inputs.set(row.id, inputsOf(row));
  }
}

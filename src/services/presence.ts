import type { Clock } from '../lib/clock.ts';
import type { ChannelPayloads } from '../store/channels.ts';
import type { Sql } from '../db/connect.ts';
import type { Logger } from '../lib/log.ts';
import { SessionRegistry } from '../sessions/registry.ts';
import { effective, type EffectivePresence, type Presence, type PresenceInputs } from '../domain/presence/index.ts';
import {
  claimPresenceTransitions,
  clearDeadOverride,
  notifyPresenceWritten,
  presenceWatchlistUnscoped,
  readPresence,
  writeOverride,
  writeShift,
  type OverrideColumns,
  type PresenceRow,
} from '../store/presence.ts';
import { markDigestRung, pushEligibleBacklog, pushEligibleCount } from '../store/todos/index.ts';
import { rfc3339 } from '../domain/time.ts';
import { digestDoorbell, type DigestReason } from './doorbell/digest.ts';
import type { Doorbell } from './doorbell/doorbell.ts';
import { DoorbellGate } from './doorbell/gate.ts';
import type { ServiceBase } from './base.ts';
import { inputsOf, PresenceCache } from './presence-cache.ts';
import { logPresenceWrite } from './presence-audit.ts';
import type { WakeupHandlers } from './wakeups.ts';

export { inputsOf };

export const PRESENCE_EVALUATOR_INTERVAL_MS = 30_000;
export const RECONNECT_DIGEST_GATE_MS = 10 * 60_000;

/** Who changed presence: `agent`, `operator:<human_id>`, `shift`, or an override running out. */
export type ChangedBy = 'agent' | `operator:${string}` | 'shift' | 'override_end';

/** The shape the presence verbs and routes answer with. */
export interface PresenceView {
  presence: Presence;
  source: EffectivePresence['source'];
  until: string | null;
  shift: string | null;
  pending: number;
}

function digestReason(by: string | null): DigestReason {
  if (by === 'agent') return 'clock_in';
  if (by?.startsWith('operator:')) return 'operator';
  if (by === 'override_end') return 'override_end';
  return 'shift_start';
}

/**
 * Presence at run time on one instance: a cache of the stored inputs of every endpoint with a
 * session here (the doorbell asks it before ringing), the evaluator that claims transitions, and
 * the digests sent when an endpoint comes back in. Every decision goes through presence.effective.
 */
export class PresenceService {
  readonly #reconnectGate: DoorbellGate;
  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    base: ServiceBase,
    private readonly sessions: SessionRegistry,
    private readonly cache: PresenceCache,
    /** Sends the digests; null where nothing can be rung (benchmarks, service tests). */
    private readonly doorbell: Doorbell | null,
    /** Runs on the instance that claimed an endpoint's return to in (the notify hooks' backlog). */
    private readonly onBackIn: (endpointId: string, reason: DigestReason) => void = () => {},
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
    this.#reconnectGate = new DoorbellGate(this.clock, RECONNECT_DIGEST_GATE_MS);
    sessions.on('endpointStreamAttached', (endpointId) => {
      void this.#reconnectDigest(endpointId).catch((err: unknown) =>
        this.log.warn({ endpoint_id: endpointId, err: (err as Error).message }, 'reconnect digest failed'),
      );
    });
  }

  /** The effective presence now of an endpoint with sessions here (unknown endpoints are in). */
  presenceOf(endpointId: string): Presence {
    return this.cache.presenceOf(endpointId);
  }

  /** Loads an endpoint's presence inputs into this instance's cache (on session creation). */
  load(endpointId: string): Promise<void> {
    return this.cache.load(endpointId);
  }

  /** What this service does on the endpoint_presence channel. */
  wakeups(): WakeupHandlers {
    return {
      endpoint_presence: {
        onNotify: (payload) =>
          void this.onWakeup(payload).catch((err: unknown) => this.log.warn({ err: (err as Error).message }, 'presence wakeup failed')),
        // Broadcasts may have been missed while disconnected: re-read what we hold.
        onListen: () => void this.cache.refresh().catch(() => {}),
      },
    };
  }

  async view(endpointId: string): Promise<PresenceView> {
    const row = await readPresence(this.sql, endpointId);
    if (!row) throw new Error(`endpoint ${endpointId} vanished`);
    const eff = effective(inputsOf(row), this.clock.now());
    return {
      presence: eff.presence,
      source: eff.source,
      until: rfc3339(eff.until) ?? null,
      shift: row.shift,
      pending: await pushEligibleCount(this.sql, endpointId),
    };
  }

  async inputs(endpointId: string): Promise<PresenceInputs | null> {
    const row = await readPresence(this.sql, endpointId);
    return row ? inputsOf(row) : null;
  }

  /** Writes an override; false when the endpoint is no longer active. */
  async setOverride(endpointId: string, o: OverrideColumns, by: ChangedBy): Promise<boolean> {
    const at = this.clock.now();
    const write = await writeOverride(this.sql, endpointId, o, { by, at });
    if (!write) return false;
    logPresenceWrite(this.log, 'override', write, by, at);
    await this.#afterWrite(endpointId, by);
    return true;
  }

  /** Stores a shift's canonical form, or clears it; false when the endpoint is no longer active. */
  async setShift(endpointId: string, canonical: string | null, by: ChangedBy): Promise<boolean> {
    const at = this.clock.now();
    const write = await writeShift(this.sql, endpointId, canonical, { by, at });
    if (!write) return false;
    logPresenceWrite(this.log, 'shift', write, by, at);
    await this.#afterWrite(endpointId, by);
    return true;
  }

  async #afterWrite(endpointId: string, by: ChangedBy): Promise<void> {
    await this.load(endpointId);
    await notifyPresenceWritten(this.sql, endpointId);
    await this.evaluate({ endpointId, by });
  }

  /**
   * Claims every presence transition that is due: each endpoint whose effective presence differs
   * from presence_seen is advanced by one conditional update, and only the instance whose update
   * changed the row logs it and broadcasts it. Runs every 30 s and right after a presence write.
   */
  async evaluate(opts: { endpointId?: string; by?: ChangedBy } = {}): Promise<number> {
    const now = this.clock.now();
    const rows = opts.endpointId ? [await readPresence(this.sql, opts.endpointId)].filter((r) => r !== null) : await presenceWatchlistUnscoped(this.sql);
    const wanted: { row: PresenceRow; eff: EffectivePresence; by: ChangedBy }[] = [];
    for (const row of rows) {
      if (row.state !== 'active') continue;
      const inputs = inputsOf(row);
      const eff = effective(inputs, now);
      // An override that no longer decides is cleared, so a later shift start is not mistaken for its end.
      const overrideEnded = inputs.override !== null && eff.source !== 'agent' && eff.source !== 'operator';
      if (overrideEnded) await clearDeadOverride(this.sql, row.id, inputs.overrideSetAt);
      if (eff.presence === row.presence_seen) continue;
      wanted.push({ row, eff, by: opts.by ?? (overrideEnded ? 'override_end' : 'shift') });
    }
    const claimed = await claimPresenceTransitions(
      this.sql,
      wanted.map((w) => ({ endpointId: w.row.id, to: w.eff.presence, by: w.by })),
      now,
    );
    const won = new Set(claimed.map((c) => c.endpointId));
    for (const { row, eff, by } of wanted) {
      if (!won.has(row.id)) continue;
      if (eff.presence === 'in') this.onBackIn(row.id, digestReason(by));
      this.log.info(
        { slug: row.slug, from: row.presence_seen, to: eff.presence, source: eff.source, by, until: rfc3339(eff.until) ?? null },
        'presence changed',
      );
    }
    if (!opts.endpointId) await this.cache.refresh();
    return claimed.length;
  }

  /**
   * LISTEN endpoint_presence. `<id>:in` / `<id>:out` is a claimed transition: refresh, and on `in`
   * send one digest to one local session with an open stream. `<id>:refresh` only refreshes.
   */
  async onWakeup({ endpointId, change }: ChannelPayloads['endpoint_presence']): Promise<void> {
    if (this.sessions.sessionsOf(endpointId).length === 0) return;
    const row = await readPresence(this.sql, endpointId);
    if (!row) return;
    this.cache.set(endpointId, row);
    if (change === 'in') await this.sendDigest(endpointId, digestReason(row.presence_changed_by));
  }

  /**
   * Counts the endpoint's push-eligible backlog, writes one digest to one open-stream session
   * here, and only if it was written marks exactly the counted todos (still pending) as rung now.
   */
  async sendDigest(endpointId: string, reason: DigestReason, backlog?: Awaited<ReturnType<typeof pushEligibleBacklog>>): Promise<boolean> {
    const counted = backlog ?? (await pushEligibleBacklog(this.sql, endpointId));
    if (counted.length === 0) return false;
    const now = this.clock.now();
    if (!this.doorbell) return false;
    const outcome = this.doorbell.deliverDigest(endpointId, (ringId) => digestDoorbell(counted, reason, now, ringId));
    if (!outcome.rung) {
      this.log.info({ endpoint_id: endpointId, reason, pending: counted.length, cause: outcome.reason }, 'digest not delivered');
      return false;
    }
    const marked = await markDigestRung(this.sql, endpointId, counted.map((t) => t.id), now);
    this.log.info({ slug: outcome.session.endpoint.slug, session: outcome.session.id, reason, pending: counted.length, marked }, 'digest rung');
    return true;
  }

  /** An in endpoint's first open stream here: one reconnect digest, at most every 10 minutes. */
  async #reconnectDigest(endpointId: string): Promise<void> {
    if (!this.cache.has(endpointId)) await this.cache.load(endpointId);
    if (this.presenceOf(endpointId) !== 'in') return;
    const backlog = await pushEligibleBacklog(this.sql, endpointId);
    if (backlog.length === 0 || !this.#reconnectGate.first(`digest:${endpointId}`)) return;
    await this.sendDigest(endpointId, 'reconnect', backlog);
  }
}

/** A presence service with no sessions and no doorbell: the evaluator and the writes alone (benchmarks, service tests). */
export function newStandalonePresence(base: ServiceBase): PresenceService {
  const sessions = new SessionRegistry(base.clock);
  return new PresenceService(base, sessions, new PresenceCache(base.sql, base.clock, sessions), null);
}

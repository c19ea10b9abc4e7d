import { actorLabel, AGENT, operatorActor, parseActor, SHIFT, type PresenceActor } from '../domain/actor.ts';
import type { Clock } from '../lib/clock.ts';
import type { ChannelPayloads } from '../store/channels.ts';
import type { Sql } from '../db/connect.ts';
import type { Logger } from '../lib/log.ts';
import { SessionRegistry } from '../sessions/registry.ts';
import {
  changeReason,
  effective,
  overrideEndsAtShiftStart,
  untilOnWire,
  type EffectivePresence,
  type Presence,
  type PresenceInputs,
  type PresenceWriteKind,
} from '../domain/presence/index.ts';
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
  type PresenceTransition,
} from '../store/presence.ts';
import { announceByDigest, pushEligibleCount, type DigestScope } from '../store/todos/index.ts';
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

/** The shape the presence verbs and routes answer with. */
export interface PresenceView {
  presence: Presence;
  source: EffectivePresence['source'];
  until: string | null;
  shift: string | null;
  pending: number;
}

/**
 * Who caused a transition the evaluator found (no writer named): the override's author, else the
 * shift (SPEC-0022: `shift` also when an override runs out). An operator override whose author
 * reads as no one's is put down to `operator:unknown`.
 */
function causeOf(eff: EffectivePresence, overrideBy: string | null): PresenceActor {
  if (eff.source === 'agent') return AGENT;
  if (eff.source === 'operator') {
    const by = parseActor(overrideBy);
    return by?.kind === 'operator' ? by : operatorActor('unknown');
  }
  return SHIFT;
}

/** Why a transition happened, as its digest says it: an override running out is not a shift start. */
function digestReason(by: PresenceActor, overrideRanOut: boolean): DigestReason {
  if (by.kind === 'agent') return 'clock_in';
  if (by.kind === 'operator') return 'operator';
  return overrideRanOut ? 'override_end' : 'shift_start';
}

/** This instance's gate on a return's digest outlives any delay in hearing of the transition. */
const DIGEST_GATE_MS = 60 * 60_000;

const DIGEST_REASONS: readonly string[] = ['clock_in', 'operator', 'shift_start', 'override_end'] satisfies DigestReason[];

/** The digest reason the claim stored (a row claimed by an older version: from who changed it). */
function storedReason(row: PresenceRow): DigestReason {
  const stored = row.presence_change_reason;
  if (stored !== null && DIGEST_REASONS.includes(stored)) return stored as DigestReason;
  const by = row.presence_changed_by;
  return digestReason(parseActor(by) ?? SHIFT, by === 'override_end');
}

/**
 * Presence at run time on one instance: a cache of the stored inputs of every endpoint with a
 * session here (the doorbell asks it before ringing), the evaluator that claims transitions, and
 * the digests sent when an endpoint comes back in. Every decision goes through presence.effective.
 */
export class PresenceService {
  readonly #reconnectsInFlight = new Set<Promise<void>>();
  readonly #reconnectGate: DoorbellGate;
  /** One digest per transition on this instance: keyed by endpoint and the transition's time. */
  readonly #returnGate: DoorbellGate;
  /** Endpoint id -> presence_changed_at of the last in-transition this instance claimed (and digested). */
  readonly #ownClaims = new Map<string, number>();
  /** Claim statements in flight, by endpoint: a broadcast waits for them to know whose claim it hears. */
  readonly #pendingClaims = new Map<string, Set<Promise<unknown>>>();
  readonly #claiming = new Map<string, Promise<unknown>>();
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
    this.#returnGate = new DoorbellGate(this.clock, DIGEST_GATE_MS);
    cache.whenUnclaimed((endpointId) => void this.claim(endpointId));
    sessions.on('endpointStreamAttached', (endpointId, session) => {
      // The stream's own attach time: the moment Doorbell.ring compares a ring's decision with.
      const deciding = this.#reconnectDigest(endpointId, session.stream?.attachedAt ?? this.clock.now())
        .catch((err: unknown) => this.log.warn({ endpoint_id: endpointId, err: (err as Error).message }, 'reconnect digest failed'))
        .finally(() => this.#reconnectsInFlight.delete(deciding));
      this.#reconnectsInFlight.add(deciding);
    });
  }

  /** Resolves once every reconnect digest being decided now is sent or dropped (shutdown; tests that push right after connecting). */
  async reconnectsSettled(): Promise<void> {
    await Promise.all([...this.#reconnectsInFlight]);
  }

  /** The presence delivery follows, of an endpoint with sessions here: in only once its return was claimed. */
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
        onListen: () => this.cache.refresh(),
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
      until: untilOnWire(eff.until),
      shift: row.shift,
      pending: await pushEligibleCount(this.sql, endpointId),
    };
  }

  async inputs(endpointId: string): Promise<PresenceInputs | null> {
    const row = await readPresence(this.sql, endpointId);
    return row ? inputsOf(row) : null;
  }

  /** Writes an override; false when the endpoint is no longer active. */
  async setOverride(endpointId: string, o: OverrideColumns, by: PresenceActor): Promise<boolean> {
    const at = this.clock.now();
    const write = await writeOverride(this.sql, endpointId, o, { by: actorLabel(by), at });
    if (!write) return false;
    logPresenceWrite(this.log, 'override', write, by, at);
    await this.#afterWrite(endpointId, by, 'override');
    return true;
  }

  /** Stores a shift's canonical form, or clears it; false when the endpoint is no longer active. */
  async setShift(endpointId: string, canonical: string | null, by: PresenceActor): Promise<boolean> {
    const at = this.clock.now();
    const write = await writeShift(this.sql, endpointId, canonical, { by: actorLabel(by), at });
    if (!write) return false;
    logPresenceWrite(this.log, 'shift', write, by, at);
    await this.#afterWrite(endpointId, by, 'shift');
    return true;
  }

  async #afterWrite(endpointId: string, by: PresenceActor, write: Exclude<PresenceWriteKind, null>): Promise<void> {
    // Claim before this instance's cache sees the new inputs, so the claim records who wrote them.
    await this.evaluate({ endpointId, by, write });
    await notifyPresenceWritten(this.sql, endpointId);
  }

  /**
   * Claims one endpoint's due transition now, if any (DESIGN decision 9): the push path and the
   * sweep call this when they find an effective presence whose transition is unclaimed, through
   * the same code as the evaluator. Concurrent calls for one endpoint share one claim.
   */
  claim(endpointId: string): Promise<unknown> {
    let running = this.#claiming.get(endpointId);
    if (!running) {
      running = this.evaluate({ endpointId })
        .catch((err: unknown) => this.log.warn({ endpoint_id: endpointId, err: (err as Error).message }, 'presence claim failed'))
        .finally(() => this.#claiming.delete(endpointId));
      this.#claiming.set(endpointId, running);
    }
    return running;
  }

  /** Claims every unclaimed transition of the endpoints held here (the sweep, before it charges rings). */
  async claimHeldHere(): Promise<void> {
    await Promise.all(this.cache.unclaimed().map((id) => this.claim(id)));
  }

  /**
   * Claims every presence transition that is due: each endpoint whose effective presence differs
   * from presence_seen is advanced by one conditional update (applied only while its override and
   * shift are those it was computed from), and only the instance whose update changed the row logs
   * it, broadcasts it and sends its own sessions the digest. Runs every 30 s, right after a
   * presence write, and whenever a delivery decision finds a transition unclaimed. The claim also
   * writes the transition's presence history row (with `write`, what the writer `by` wrote).
   */
  async evaluate(opts: { endpointId?: string; by?: PresenceActor; write?: PresenceWriteKind } = {}): Promise<number> {
    const now = this.clock.now();
    const rows = opts.endpointId ? [await readPresence(this.sql, opts.endpointId)].filter((r) => r !== null) : await presenceWatchlistUnscoped(this.sql);
    const wanted: { row: PresenceRow; eff: EffectivePresence; transition: PresenceTransition }[] = [];
    for (const row of rows) {
      if (row.state !== 'active') continue;
      const inputs = inputsOf(row);
      const eff = effective(inputs, now);
      // An override that no longer decides is cleared, so a later shift start is not mistaken for its
      // end: by the claim of the transition it causes, in the same update (claimPresenceTransitions),
      // else on its own.
      const overrideEnded = inputs.override !== null && eff.source !== 'agent' && eff.source !== 'operator';
      if (eff.presence === row.presence_seen) {
        if (overrideEnded) await clearDeadOverride(this.sql, row.id, inputs.overrideSetAt);
        continue;
      }
      const by = opts.by ?? causeOf(eff, row.override_by);
      const reason = digestReason(by, overrideEnded && !overrideEndsAtShiftStart(inputs));
      const from = { override: row.presence_override, overrideSetAt: row.override_set_at, shift: row.shift };
      const record = {
        from: row.presence_seen,
        source: eff.source,
        until: eff.until,
        reason: changeReason({ to: eff.presence, by, write: opts.by ? (opts.write ?? null) : null, inputs, overrideEnded }),
      };
      wanted.push({ row, eff, transition: { endpointId: row.id, to: eff.presence, by: actorLabel(by), reason, from, clearOverride: overrideEnded, record } });
    }
    // Marked as this instance's own before anyone awaiting the claim resumes, so its own broadcast is skipped.
    const claiming = claimPresenceTransitions(this.sql, wanted.map((w) => w.transition), now).then((won) => {
      for (const c of won) if (c.to === 'in') this.#ownClaims.set(c.endpointId, now.getTime());
      return won;
    });
    for (const w of wanted) this.#pendingClaims.set(w.row.id, (this.#pendingClaims.get(w.row.id) ?? new Set()).add(claiming));
    const claimed = await claiming.finally(() => {
      for (const w of wanted) {
        const pending = this.#pendingClaims.get(w.row.id);
        pending?.delete(claiming);
        if (pending?.size === 0) this.#pendingClaims.delete(w.row.id);
      }
    });
    const won = new Set(claimed.map((c) => c.endpointId));
    if (opts.endpointId) {
      if (this.cache.has(opts.endpointId)) await this.cache.load(opts.endpointId);
    } else await this.cache.refresh();
    for (const { row, eff, transition } of wanted) {
      if (!won.has(row.id)) continue;
      this.log.info(
        { slug: row.slug, from: row.presence_seen, to: eff.presence, source: eff.source, by: transition.by, until: untilOnWire(eff.until) },
        'presence changed',
      );
      if (eff.presence !== 'in') continue;
      const reason = transition.reason as DigestReason;
      this.onBackIn(row.id, reason);
      await this.#digestIfStillIn(row.id, reason).catch((err: unknown) =>
        this.log.warn({ endpoint_id: row.id, err: (err as Error).message }, 'presence digest failed'),
      );
    }
    return claimed.length;
  }

  /**
   * LISTEN endpoint_presence. `<id>:in` / `<id>:out` is a claimed transition: refresh, and on `in`
   * send one digest to one local session with an open stream, unless this instance claimed it
   * (the claimant already sent its own). `<id>:refresh` only refreshes.
   */
  async onWakeup({ endpointId, change }: ChannelPayloads['endpoint_presence']): Promise<void> {
    if (this.sessions.sessionsOf(endpointId).length === 0) return;
    await Promise.allSettled(this.#pendingClaims.get(endpointId) ?? []);
    const row = await readPresence(this.sql, endpointId);
    if (!row) return;
    this.cache.set(endpointId, row);
    if (change !== 'in') return;
    const claimedHere = this.#ownClaims.get(endpointId);
    if (claimedHere !== undefined && claimedHere === row.presence_changed_at?.getTime()) {
      this.#ownClaims.delete(endpointId);
      return;
    }
    await this.#digestIfStillIn(endpointId, storedReason(row));
  }

  /**
   * The return digest, re-checked just before it is sent: the row must still be claimed in and be
   * in. SPEC-0022: each instance hosting an open stream of the endpoint sends one digest for the
   * transition to one of its sessions (the claimant, and each instance its broadcast reaches); a
   * gate of this instance's own keeps it to one here, so a failed write elsewhere costs no one here.
   */
  async #digestIfStillIn(endpointId: string, reason: DigestReason): Promise<void> {
    const sessions = this.sessions.sessionsOf(endpointId);
    if (sessions.length === 0) return;
    const row = await readPresence(this.sql, endpointId);
    const now = this.clock.now();
    if (!row || row.state !== 'active' || row.presence_seen !== 'in' || effective(inputsOf(row), now).presence !== 'in') {
      this.log.info({ endpoint_id: endpointId, reason }, 'digest not sent: no longer in');
      return;
    }
    const since = row.presence_changed_at ?? now;
    const key = `${endpointId}:${since.getTime()}`;
    if (!this.#returnGate.first(key)) {
      this.log.info({ endpoint_id: endpointId, reason }, 'digest not sent: this instance sent it');
      return;
    }
    if (!(await this.sendDigest(endpointId, reason, { since }))) this.#returnGate.forget(key);
  }

  /**
   * Counts the endpoint's push-eligible backlog in `scope` that no ring announced since
   * `scope.since`, writes one digest to one open-stream session here, and marks exactly the
   * counted todos as announced now, only if it was written (store/todos/announce.ts). True when
   * a digest was written.
   */
  async sendDigest(endpointId: string, reason: DigestReason, scope: DigestScope): Promise<boolean> {
    if (!this.doorbell) return false;
    const doorbell = this.doorbell;
    const now = this.clock.now();
    let outcome: ReturnType<Doorbell['deliverDigest']> | undefined;
    let pending = 0;
    const counted = await announceByDigest(this.sql, endpointId, scope, now, (backlog) => {
      pending = backlog.length;
      outcome = doorbell.deliverDigest(endpointId, (ringId) => digestDoorbell(backlog, reason, now, ringId));
      return outcome.rung;
    });
    if (!outcome) return false;
    // announceByDigest answers null exactly when the digest was not written.
    if (!outcome.rung || !counted) {
      this.log.info({ endpoint_id: endpointId, reason, pending, cause: outcome.rung ? null : outcome.reason }, 'digest not delivered');
      return false;
    }
    const { session, ringId } = outcome;
    this.log.info({ slug: session.endpoint.slug, session: session.id, ring_id: ringId, reason, pending: counted.length }, 'digest rung');
    this.log.debug({ session: session.id, ring_id: ringId, todo_ids: counted.map((t) => t.id) }, 'digest counted');
    return true;
  }

  /**
   * An in endpoint's first open stream here: one reconnect digest, at most every 10 minutes. It
   * counts what was waiting when the stream attached; a todo that becomes ready later, or that a
   * ring decided at or after the attach announced, is the single ring's, so the agent does not
   * hear it twice.
   */
  async #reconnectDigest(endpointId: string, attachedAt: Date): Promise<void> {
    if (!this.cache.has(endpointId)) await this.cache.load(endpointId);
    if (this.presenceOf(endpointId) !== 'in') return;
    const key = `digest:${endpointId}`;
    if (!this.#reconnectGate.first(key)) return;
    if (!(await this.sendDigest(endpointId, 'reconnect', { since: attachedAt, readyBy: attachedAt }))) this.#reconnectGate.forget(key);
  }
}

/** A presence service with no sessions and no doorbell: the evaluator and the writes alone (benchmarks, service tests). */
export function newStandalonePresence(base: ServiceBase): PresenceService {
  const sessions = new SessionRegistry(base.clock);
  return new PresenceService(base, sessions, new PresenceCache(base.sql, base.clock, sessions), null);
}

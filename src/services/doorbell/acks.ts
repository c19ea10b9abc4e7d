import type { ServiceBase } from '../base.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import type { Logger } from '../../lib/log.ts';
import type { Session, SessionRegistry } from '../../sessions/registry.ts';
import type { Metrics } from '../../lib/metrics.ts';
import { notFound } from '../../domain/errors.ts';
import { ackRing, insertRing, lastRingsOfSessions, markUnheardRingsUnscoped, type AckedRing, type LastRing, type NewRing, type RingKind, type RingState } from '../../store/rings.ts';
import { clearSessionUnheard, markUnheardSessionsUnscoped } from '../../store/sessions.ts';
import type { SessionDirectory } from '../session-directory.ts';

export const UNHEARD_SWEEP_INTERVAL_MS = 30_000;

/** Synthetic (self-test) rings never move a metric. */
const counted = (r: { kind: RingKind; synthetic: boolean }): boolean => !r.synthetic && r.kind !== 'test';

/**
 * Doorbell acknowledgement at run time (SPEC-0025): records a ring for every doorbell written,
 * counts acknowledgements and unheard rings, and keeps the per-session unheard mark in the session
 * directory (an acknowledgement reaches it with the session's next activity flush).
 */
export class DoorbellAcks {
  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    base: ServiceBase,
    private readonly metrics: Metrics,
    private readonly sessions: SessionRegistry,
    /**
     * Writes the acknowledgements seen on this instance to the directory before the marks are
     * decided, and refreshes this instance's copies from it afterwards.
     */
    private readonly directory: Pick<SessionDirectory, 'flush' | 'refreshChoiceFacts'>,
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
  }

  /**
   * Records a written doorbell. Never awaited by the writer: a failure is logged and counted,
   * and the doorbell, already written, stands. The ring is counted once its record is written,
   * and as acknowledged too when a claim of its todo committed first.
   */
  recordWritten(ring: NewRing, slug: string): void {
    insertRing(this.sql, ring).then(
      (acked) => {
        if (!counted(ring)) return;
        this.metrics.ringsTotal.inc({ kind: ring.kind });
        if (acked) this.metrics.ringsAcknowledged.inc({ kind: ring.kind, via: 'claim' });
      },
      (err: unknown) => {
        this.metrics.collectionErrors.inc({ collector: 'doorbell_rings' });
        this.log.error(
          { stage: 'ring record', slug, todo_id: ring.todoId, ring_id: ring.ringId, err: (err as Error).message },
          'could not record a doorbell ring',
        );
      },
    );
  }

  /** An acknowledgement by this session (a claim or ack_doorbell): counts it and clears its mark. */
  async acknowledged(session: Session, rings: readonly AckedRing[], via: 'claim' | 'ack'): Promise<void> {
    // A claim that acknowledged no ring (its todo was never rung) still resets the unheard run.
    session.ackedAt = this.clock.now();
    session.lastAckAt = session.ackedAt;
    session.dirty = true;
    for (const r of rings.filter(counted)) {
      if (!r.late) this.metrics.ringsAcknowledged.inc({ kind: r.kind, via });
      if (r.unheardNow) this.metrics.ringsUnheard.inc({ kind: r.kind });
    }
    if (session.unheard) {
      // The mark is cleared at once: an operator watching the count sees the session heard again.
      session.unheard = false;
      await clearSessionUnheard(this.sql, session.id, session.ackedAt);
      this.log.info({ slug: session.endpoint.slug, session: session.id, via }, 'session heard a doorbell again');
    }
  }

  /**
   * ack_doorbell: acknowledges one ring of the session's endpoint and counts it; another
   * endpoint's ring answers like a missing one.
   */
  async ack(session: Session, ringId: string): Promise<RingState> {
    const r = await ackRing(this.sql, session.endpoint.id, ringId, session.id, this.clock.now());
    if (!r) throw notFound(`no doorbell ring ${ringId} on this endpoint`);
    await this.acknowledged(session, r.acked ? [r.acked] : [], 'ack');
    return r.state;
  }

  /** Each session's latest ring and why it was chosen (the board's session list). */
  lastRingsOf(sessionIds: readonly string[]): Promise<Map<string, LastRing>> {
    return lastRingsOfSessions(this.sql, sessionIds);
  }

  /**
   * The unheard sweep: claims expired rings once across instances and counts only those, then
   * marks unheard the sessions, on any instance, whose last 3 rings all went unheard.
   */
  async sweep(): Promise<number> {
    const now = this.clock.now();
    const { unheard, claimed } = await markUnheardRingsUnscoped(this.sql, now);
    for (const r of unheard.filter(counted)) this.metrics.ringsUnheard.inc({ kind: r.kind });
    for (const r of claimed.filter(counted)) this.metrics.ringsAcknowledged.inc({ kind: r.kind, via: 'claim' });
    await this.directory.flush();
    for (const s of await markUnheardSessionsUnscoped(this.sql)) {
      const here = this.sessions.peek(s.id);
      if (here) here.unheard = true;
      this.log.warn(
        { slug: s.slug, session: s.id, client: { name: s.client_name, version: s.client_version } },
        'session marked unheard: its last 3 doorbells reached it but nothing acted on them',
      );
    }
    // Another instance's sweep may mark a session this one hosts, and an acknowledgement elsewhere
    // may clear it: the copies here take the directory's marks, so the gauge counts them.
    await this.directory.refreshChoiceFacts();
    return unheard.length;
  }
}

import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../lib/log.ts';
import type { Session, SessionRegistry, WriteVerdict } from '../../sessions/registry.ts';
import type { Presence } from '../../domain/presence/index.ts';
import { newRingId, type RingKind } from '../../store/rings.ts';
import type { DoorbellAcks } from './acks.ts';
import { testDoorbell, todoDoorbell, type ChannelNotification, type DoorbellTodo } from '../../domain/doorbell-notification.ts';
import { bestTier, rankRingCandidates, type RingCandidate, type RingChoiceReason } from '../../domain/doorbell-choice.ts';

/** A session with this many unflushed frames accepts no more doorbells: drop, never block. */
export const DOORBELL_BUFFER = 16;
/** Consecutive failed writes on one session before it is reported as deaf. */
export const DEAF_THRESHOLD = 3;
/** A todo that becomes ready rings at most once a minute across the cluster (ReadyRings). */
export const CREATION_GATE_MS = 60_000;

export interface RingTarget extends DoorbellTodo {
  endpoint_id: string;
}

export type RingFailure = 'held' | 'no_session' | 'all_full' | 'no_stream' | 'write_failed';
export type RingOutcome = { rung: true; session: Session; ringId: string; chosen: RingChoiceReason } | { rung: false; reason: RingFailure };

export interface DoorbellOptions {
  sessions: SessionRegistry;
  clock: Clock;
  log: Logger;
  /** The endpoint's effective presence now; an endpoint that is out is never rung. */
  presenceOf?: (endpointId: string) => Presence;
  /** Records rings; without it (unit tests) nothing is recorded. */
  acks?: DoorbellAcks;
  /** The window a todo or digest ring has to be acknowledged in. */
  ackWindowMs?: number;
  /** The endpoint's streams on other instances (the session directory); without it, every instance is as good. */
  streamsElsewhere?: (endpointId: string) => Promise<RingCandidate[]>;
}

/** What a ring record will say about the doorbell being written. */
interface RingFacts {
  kind: RingKind;
  todoId: string | null;
  queue: string | null;
  synthetic: boolean;
  windowSeconds: number;
}

/** What the session choice reads of a session held here. */
export const ringCandidate = (s: Session): RingCandidate => ({
  streamAttachedAt: s.stream?.attachedAt ?? null,
  lastAckAt: s.lastAckAt,
  calledTool: s.calledTool,
  unheard: s.unheard,
});

/**
 * Rings exactly one session of a todo's endpoint on this instance (ReadyRings and the sweep decide
 * which instance rings): tenant first, then queue scope, then the one session choice
 * (domain/doorbell-choice.ts: the session that acknowledged a ring last, then the newest stream; a
 * probe that never listed or called tools, then an unheard session, last). A session whose buffer is full
 * is passed over for the next. Never blocks and never retries: the queue is the record. Every
 * doorbell carries a fresh meta.ring_id; a ring is recorded, with why its session was chosen, only
 * for a write that landed.
 */
export class Doorbell {
  readonly #deafRuns = new WeakMap<Session, { failures: number }>();
  readonly #sessions: SessionRegistry;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #presenceOf: (endpointId: string) => Presence;
  readonly #acks: DoorbellAcks | undefined;
  readonly #ackWindowSeconds: number;
  readonly #streamsElsewhere: DoorbellOptions['streamsElsewhere'];

  constructor(opts: DoorbellOptions) {
    this.#streamsElsewhere = opts.streamsElsewhere;
    this.#sessions = opts.sessions;
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#presenceOf = opts.presenceOf ?? (() => 'in');
    this.#acks = opts.acks;
    this.#ackWindowSeconds = Math.round((opts.ackWindowMs ?? 15 * 60_000) / 1000);
  }

  /**
   * The sweep's receivers (DESIGN decision 10, ADR-0027): endpoints with a session attached here,
   * streaming or momentarily streamless, whose effective presence is in. A ring still prefers a
   * streaming session; one that stays streamless is ended by the session janitor.
   */
  receivers(): string[] {
    return [...new Set(this.#sessions.all().map((s) => s.endpoint.id))].filter((id) => this.#presenceOf(id) === 'in');
  }

  /**
   * Whether this instance should compete for a ring of the endpoint's todo (in `queue`): its best
   * streaming session is at least as likely to hear it as any streaming on another instance (the
   * same choice as a ring's, across the cluster). The directory is asked only when the best here
   * has not acknowledged a ring, since nothing ranks above that; if it cannot answer, compete.
   */
  async ringsBestHere(endpointId: string, queue?: string): Promise<boolean> {
    const here = this.#sessions.sessionsOf(endpointId).filter((s) => s.stream !== null && (queue === undefined || s.endpoint.queues.includes(queue)));
    if (here.length === 0) return false;
    const best = bestTier(here.map(ringCandidate));
    if (best === 0 || !this.#streamsElsewhere) return true;
    try {
      return best <= bestTier(await this.#streamsElsewhere(endpointId));
    } catch (err) {
      this.#log.warn({ endpoint_id: endpointId, err: (err as Error).message }, 'could not compare sessions across instances; ringing here');
      return true;
    }
  }

  /** Whether the endpoint is out now: its doorbells wait for the digest on its return. */
  holds(endpointId: string): boolean {
    return this.#presenceOf(endpointId) === 'out';
  }

  /**
   * PublishTodoReady: ring one session of the todo's endpoint. `decidedAt` is when the store
   * recorded this ring as the todo's announcement: a stream that attached after it is not offered
   * the ring, because that stream's reconnect digest counts the todo (store/todos/announce.ts).
   */
  ring(todo: RingTarget, decidedAt?: Date): RingOutcome {
    if (this.#presenceOf(todo.endpoint_id) === 'out') {
      this.#log.debug({ todo_id: todo.id, endpoint_id: todo.endpoint_id }, 'doorbell held: endpoint is out');
      return { rung: false, reason: 'held' };
    }
    return this.#ringOne(todo, decidedAt, (ringId) => todoDoorbell(todo, { ring_id: ringId }), {
      kind: 'todo',
      todoId: todo.id,
      queue: todo.queue,
      synthetic: false,
      windowSeconds: this.#ackWindowSeconds,
    });
  }

  /**
   * A self-test doorbell: the same session selection as a todo doorbell, whatever the presence
   * (the human asked for it), with the test's own window.
   */
  ringTest(todo: RingTarget, waitSeconds: number): RingOutcome {
    return this.#ringOne(todo, undefined, (ringId) => testDoorbell(todo, { ring_id: ringId }), {
      kind: 'test',
      todoId: todo.id,
      queue: todo.queue,
      synthetic: true,
      windowSeconds: waitSeconds,
    });
  }

  /** A digest goes to one session of the endpoint with an open stream on this instance (the same choice), or nowhere. */
  deliverDigest(endpointId: string, build: (ringId: string) => ChannelNotification): RingOutcome {
    const streaming = this.#sessions.sessionsOf(endpointId).filter((s) => s.stream !== null);
    if (streaming.length === 0) return { rung: false, reason: 'no_session' };
    const facts: RingFacts = { kind: 'digest', todoId: null, queue: null, synthetic: false, windowSeconds: this.#ackWindowSeconds };
    return this.#deliver(endpointId, streaming, build, facts);
  }

  #ringOne(todo: RingTarget, decidedAt: Date | undefined, build: (ringId: string) => ChannelNotification, facts: RingFacts): RingOutcome {
    const candidates = this.#sessions
      .sessionsOf(todo.endpoint_id)
      .filter((s) => s.endpoint.queues.includes(todo.queue))
      .filter((s) => !decidedAt || !s.stream || s.stream.attachedAt.getTime() <= decidedAt.getTime());
    if (candidates.length === 0) {
      this.#log.info({ todo_id: todo.id, endpoint_id: todo.endpoint_id }, 'doorbell not rung: no session of the endpoint on this instance');
      return { rung: false, reason: 'no_session' };
    }
    const outcome = this.#deliver(todo.endpoint_id, candidates, build, facts);
    if (!outcome.rung) this.#log.info({ todo_id: todo.id, slug: candidates[0]!.endpoint.slug, cause: outcome.reason }, 'doorbell dropped');
    return outcome;
  }

  /**
   * Offers the doorbell to the sessions in the order the session choice ranks them; the first
   * write that lands wins. A streamless session is tried only to learn the verdict (`no_stream`).
   */
  #deliver(endpointId: string, group: Session[], build: (ringId: string) => ChannelNotification, facts: RingFacts): RingOutcome {
    let failure: RingFailure = 'all_full';
    // Sorted by id first, so equals are tried in the same order every time.
    const byId = [...group].sort((a, b) => (a.id < b.id ? -1 : 1));
    for (const { candidate, reason } of rankRingCandidates(byId.map((s) => ({ ...ringCandidate(s), session: s })))) {
      const session = candidate.session;
      if (session.unflushed >= DOORBELL_BUFFER) continue;
      const ringId = newRingId();
      const verdict = this.#sessions.write(session, build(ringId));
      this.#recordWrite(session, facts, ringId, verdict, reason);
      if (verdict === 'written') {
        this.#acks?.recordWritten(
          { ringId, endpointId, sessionId: session.id, sentAt: this.#clock.now(), reason, ...facts },
          session.endpoint.slug,
        );
        return { rung: true, session, ringId, chosen: reason };
      }
      failure = verdict;
    }
    return { rung: false, reason: failure };
  }

  /** True while a session's last DEAF_THRESHOLD or more doorbell writes all failed (the board's deaf warning). */
  isDeaf(session: Session): boolean {
    return (this.#deafRuns.get(session)?.failures ?? 0) >= DEAF_THRESHOLD;
  }

  /** Counts consecutive failed writes per session: one warning at the threshold, one note on recovery. */
  #recordWrite(session: Session, facts: RingFacts, ringId: string, verdict: WriteVerdict, chosen: RingChoiceReason): void {
    const run = this.#deafRuns.get(session) ?? { failures: 0 };
    this.#deafRuns.set(session, run);
    const fields = { slug: session.endpoint.slug, session: session.id, kind: facts.kind, todo_id: facts.todoId, ring_id: ringId, chosen };
    if (verdict === 'written') {
      if (run.failures >= DEAF_THRESHOLD) this.#log.info({ ...fields, failed_before: run.failures }, 'doorbell recovered');
      run.failures = 0;
      this.#log.info(fields, 'doorbell rung');
      return;
    }
    run.failures++;
    this.#log.debug({ ...fields, cause: verdict }, 'doorbell write failed');
    if (run.failures === DEAF_THRESHOLD) {
      this.#log.warn(
        { ...fields, failures: run.failures, cause: verdict, client: session.clientInfo },
        'doorbell undeliverable: consumer attached but receiving nothing',
      );
    }
  }
}

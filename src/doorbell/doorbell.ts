import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { Session, SessionRegistry, WriteVerdict } from '../mcp/sessions.ts';
import type { Presence } from '../presence/index.ts';
import { DoorbellGate } from './gate.ts';
import { todoDoorbell, type ChannelNotification, type DoorbellTodo } from './notification.ts';

/** A session with this many unflushed frames accepts no more doorbells: drop, never block. */
export const DOORBELL_BUFFER = 16;
/** Consecutive failed writes on one session before it is reported as deaf. */
export const DEAF_THRESHOLD = 3;
export const CREATION_GATE_MS = 60_000;

export interface RingTarget extends DoorbellTodo {
  endpoint_id: string;
}

export type RingOutcome =
  | { rung: true; session: Session }
  | { rung: false; reason: 'gated' | 'held' | 'no_session' | 'all_full' | 'no_stream' | 'write_failed' };

interface DeafState {
  failures: number;
}

/**
 * Rings exactly one session of a todo's endpoint on this instance: tenant first, then queue
 * scope; sessions with an open stream first, in per-endpoint round-robin; a streamless session
 * only if no streaming one accepts. Never blocks and never retries: the queue is the record.
 */
export class Doorbell {
  readonly #cursors = new Map<string, number>();
  readonly #deaf = new WeakMap<Session, DeafState>();
  readonly #gate: DoorbellGate;

  constructor(
    private readonly sessions: SessionRegistry,
    clock: Clock,
    private readonly log: Logger,
    /** The endpoint's effective presence now; an endpoint that is out is never rung. */
    private readonly presenceOf: (endpointId: string) => Presence = () => 'in',
  ) {
    this.#gate = new DoorbellGate(clock, CREATION_GATE_MS);
    sessions.on('sessionClosed', (s) => {
      if (sessions.sessionsOf(s.endpoint.id).length === 0) this.#cursors.delete(s.endpoint.id);
    });
  }

  /**
   * The sweep's receivers: endpoints with at least one session attached here, streaming or not
   * (a ring falls back to a streamless session), whose effective presence is in.
   */
  receivers(): string[] {
    return [...new Set(this.sessions.all().map((s) => s.endpoint.id))].filter((id) => this.presenceOf(id) === 'in');
  }

  /** A creation or wakeup ring: at most one per todo per minute on this instance. */
  ringReady(todo: RingTarget): RingOutcome {
    if (!this.#gate.first(todo.id)) return { rung: false, reason: 'gated' };
    return this.ring(todo);
  }

  /** PublishTodoReady: ring one session of the todo's endpoint. */
  ring(todo: RingTarget): RingOutcome {
    if (this.presenceOf(todo.endpoint_id) === 'out') {
      this.log.debug({ todo_id: todo.id, endpoint_id: todo.endpoint_id }, 'doorbell held: endpoint is out');
      return { rung: false, reason: 'held' };
    }
    const candidates = this.sessions
      .sessionsOf(todo.endpoint_id)
      .filter((s) => s.endpoint.queues.includes(todo.queue))
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    if (candidates.length === 0) {
      this.log.info({ todo_id: todo.id, endpoint_id: todo.endpoint_id }, 'doorbell not rung: no session of the endpoint on this instance');
      return { rung: false, reason: 'no_session' };
    }
    const message = todoDoorbell(todo);
    const streaming = candidates.filter((s) => s.stream !== null);
    const streamless = candidates.filter((s) => s.stream === null);
    let outcome = this.#deliver(todo.endpoint_id, streaming, message, todo.id);
    if (!outcome.rung) outcome = this.#deliver(todo.endpoint_id, streamless, message, todo.id, outcome.reason);
    if (!outcome.rung) this.log.info({ todo_id: todo.id, slug: candidates[0]!.endpoint.slug, cause: outcome.reason }, 'doorbell dropped');
    return outcome;
  }

  /** A digest goes to one session of the endpoint with an open stream on this instance, or nowhere. */
  deliverDigest(endpointId: string, message: ChannelNotification): RingOutcome {
    const streaming = this.sessions
      .sessionsOf(endpointId)
      .filter((s) => s.stream !== null)
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    if (streaming.length === 0) return { rung: false, reason: 'no_session' };
    return this.#deliver(endpointId, streaming, message, `digest:${endpointId}`);
  }

  /** Offers `message` to each session of `group` in round-robin order; the first write that lands wins. */
  #deliver(
    endpointId: string,
    group: Session[],
    message: ChannelNotification,
    what: string,
    priorFailure: Exclude<RingOutcome, { rung: true }>['reason'] = 'all_full',
  ): RingOutcome {
    let failure = priorFailure;
    for (const session of this.#rotation(endpointId, group)) {
      if (session.unflushed >= DOORBELL_BUFFER) continue;
      const verdict = this.sessions.write(session, message);
      this.#recordWrite(session, what, verdict);
      if (verdict === 'written') {
        this.#cursors.set(endpointId, (this.#cursors.get(endpointId) ?? 0) + 1);
        return { rung: true, session };
      }
      failure = verdict;
    }
    return { rung: false, reason: failure };
  }

  #rotation(endpointId: string, group: Session[]): Session[] {
    if (group.length === 0) return group;
    const start = (this.#cursors.get(endpointId) ?? 0) % group.length;
    return [...group.slice(start), ...group.slice(0, start)];
  }

  /** Counts consecutive failures per session: one warning at the threshold, one note on recovery. */
  #recordWrite(session: Session, what: string, verdict: WriteVerdict): void {
    const state = this.#deaf.get(session) ?? { failures: 0 };
    this.#deaf.set(session, state);
    const fields = { slug: session.endpoint.slug, session: session.id, doorbell: what };
    if (verdict === 'written') {
      if (state.failures >= DEAF_THRESHOLD) this.log.info({ ...fields, failed_before: state.failures }, 'doorbell recovered');
      state.failures = 0;
      this.log.info(fields, 'doorbell rung');
      return;
    }
    state.failures++;
    this.log.debug({ ...fields, cause: verdict }, 'doorbell write failed');
    if (state.failures === DEAF_THRESHOLD) {
      this.log.warn(
        { ...fields, failures: state.failures, cause: verdict, client: session.clientInfo },
        'doorbell undeliverable: consumer attached but receiving nothing',
      );
    }
  }
}

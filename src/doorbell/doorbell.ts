import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { Session, SessionRegistry, WriteVerdict } from '../mcp/sessions.ts';
import { DoorbellGate } from './gate.ts';
import { todoDoorbell, type DoorbellTodo } from './notification.ts';

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
  | { rung: false; reason: 'gated' | 'no_session' | 'all_full' | 'no_stream' | 'write_failed' };

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
  ) {
    this.#gate = new DoorbellGate(clock, CREATION_GATE_MS);
    sessions.on('sessionClosed', (s) => {
      if (sessions.sessionsOf(s.endpoint.id).length === 0) this.#cursors.delete(s.endpoint.id);
    });
  }

  /** Endpoints with at least one session attached here, streaming or not: the sweep's receivers. */
  attachedEndpoints(): string[] {
    return [...new Set(this.sessions.all().map((s) => s.endpoint.id))];
  }

  /** A creation or wakeup ring: at most one per todo per minute on this instance. */
  ringReady(todo: RingTarget): RingOutcome {
    if (!this.#gate.first(todo.id)) return { rung: false, reason: 'gated' };
    return this.ring(todo);
  }

  /** PublishTodoReady: ring one session of the todo's endpoint. */
  ring(todo: RingTarget): RingOutcome {
    const candidates = this.sessions
      .sessionsOf(todo.endpoint_id)
      .filter((s) => s.endpoint.queues.includes(todo.queue))
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    if (candidates.length === 0) {
      this.log.info({ todo_id: todo.id, endpoint_id: todo.endpoint_id }, 'doorbell not rung: no session of the endpoint on this instance');
      return { rung: false, reason: 'no_session' };
    }
    const streaming = candidates.filter((s) => s.stream !== null);
    const streamless = candidates.filter((s) => s.stream === null);
    const message = todoDoorbell(todo);
    let lastFailure: WriteVerdict | 'all_full' = 'all_full';
    for (const group of [streaming, streamless]) {
      for (const session of this.#rotation(todo.endpoint_id, group)) {
        if (session.unflushed >= DOORBELL_BUFFER) continue;
        const verdict = this.sessions.write(session, message);
        this.#recordWrite(session, todo, verdict);
        if (verdict === 'written') {
          this.#cursors.set(todo.endpoint_id, (this.#cursors.get(todo.endpoint_id) ?? 0) + 1);
          return { rung: true, session };
        }
        lastFailure = verdict;
      }
    }
    this.log.info({ todo_id: todo.id, slug: candidates[0]!.endpoint.slug, cause: lastFailure }, 'doorbell dropped');
    return { rung: false, reason: lastFailure };
  }

  #rotation(endpointId: string, group: Session[]): Session[] {
    if (group.length === 0) return group;
    const start = (this.#cursors.get(endpointId) ?? 0) % group.length;
    return [...group.slice(start), ...group.slice(0, start)];
  }

  /** Counts consecutive failures per session: one warning at the threshold, one note on recovery. */
  #recordWrite(session: Session, todo: RingTarget, verdict: WriteVerdict): void {
    const state = this.#deaf.get(session) ?? { failures: 0 };
    this.#deaf.set(session, state);
    const fields = { slug: session.endpoint.slug, session: session.id, todo_id: todo.id };
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

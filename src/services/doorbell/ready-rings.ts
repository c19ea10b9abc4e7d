import type { SessionRegistry } from '../../sessions/registry.ts';
import { freshReadyTodos, freshReadyTodosOf, ringReadyOnce } from '../../store/todos/index.ts';
import type { ServiceBase } from '../base.ts';
import type { WakeupHandlers } from '../wakeups.ts';
import { CREATION_GATE_MS, type Doorbell, type RingTarget } from './doorbell.ts';
import { DoorbellGate } from './gate.ts';

/** Waits before asking the store again after the claim failed (real time: it waits for I/O to recover). */
const CLAIM_RETRY_DELAYS_MS = [250, 1000, 4000];

/**
 * A todo that became ready (created, or requeued anywhere) rings once across the cluster, and
 * only if no digest announced it first (store/todos/announce.ts). Every instance hears
 * todo_ready; those holding an open stream of the todo's endpoint compete for the todo's ready
 * ring in the database, and the one that takes it writes the doorbell to one of its streams (or
 * gives the ring back when none took it). A local gate absorbs this instance's own double fires
 * (its creation ring and the LISTEN echo of it) without a round trip.
 */
export class ReadyRings {
  readonly #localGate: DoorbellGate;

  constructor(
    private readonly base: ServiceBase,
    private readonly sessions: SessionRegistry,
    private readonly doorbell: Doorbell,
  ) {
    this.#localGate = new DoorbellGate(base.clock, CREATION_GATE_MS);
  }

  /**
   * Rings a ready todo if this instance holds a stream of its endpoint and the store lets it.
   * Presence is read when the todo became ready: one ready while its endpoint is out waits for
   * the return digest, even if the endpoint is back in by the time the store answers.
   */
  ringReady(todo: RingTarget): void {
    if (!this.sessions.hasOpenStream(todo.endpoint_id) || this.doorbell.holds(todo.endpoint_id) || !this.#localGate.first(todo.id)) return;
    this.#claimAndRing(todo, 0);
  }

  /**
   * A claim that could not be asked (the database restarting) decides nothing: the todo is retried
   * a few times, then let through the local gate so the LISTEN catch-up can ring it; otherwise it
   * would wait for the heartbeat sweep's first re-ring, minutes later.
   */
  #claimAndRing(todo: RingTarget, failures: number): void {
    const { sql, clock, log } = this.base;
    // An instance holding only sessions less likely to hear (a proxy's probe, an unheard one)
    // leaves the ring to the instance that holds a better one: it heard todo_ready too.
    this.doorbell
      .ringsBestHere(todo.endpoint_id, todo.queue)
      .then(async (best) => {
        // The stream seen before the comparison may have closed during it: a claim without one
        // would take the ring from an instance that holds the new stream, after its digest left
        // the todo to this ring (announce.ts).
        if (!best || !this.sessions.hasOpenStream(todo.endpoint_id)) return;
        // Read after the comparison: the ring is decided when it is claimed (announce.ts), not earlier.
        const at = clock.now();
        await ringReadyOnce(sql, todo.id, at, () => this.doorbell.ring(todo, at).rung);
      })
      .catch((err: unknown) => {
        const retry = failures < CLAIM_RETRY_DELAYS_MS.length;
        log.warn({ err: (err as Error).message, todo_id: todo.id, retry }, 'doorbell ready ring failed');
        if (!retry) return this.#localGate.forget(todo.id);
        setTimeout(() => this.#claimAndRing(todo, failures + 1), CLAIM_RETRY_DELAYS_MS[failures]).unref();
      });
  }

  /** Rings the todos of an endpoint's queue that became ready in the last minute, if it has a stream here. */
  ringFresh(endpointId: string, queue: string): void {
    if (!this.sessions.hasOpenStream(endpointId) || this.doorbell.holds(endpointId)) return;
    const { sql, clock, log } = this.base;
    freshReadyTodos(sql, endpointId, queue, clock.now())
      .then((todos) => todos.forEach((t) => this.ringReady(t)))
      .catch((err: unknown) => log.warn({ err: (err as Error).message, endpoint_id: endpointId }, 'todo_ready wakeup failed'));
  }

  wakeups(): WakeupHandlers {
    return {
      todo_ready: {
        onNotify: ({ endpointId, queue }) => this.ringFresh(endpointId, queue),
        // Notifications sent while the listener was reconnecting are lost: ring what became ready
        // meanwhile for every endpoint streaming here, in one query.
        onListen: async () => {
          const streaming = this.sessions.streamingEndpoints();
          for (const todo of await freshReadyTodosOf(this.base.sql, streaming, this.base.clock.now())) {
            if (this.sessions.sessionsOf(todo.endpoint_id).some((s) => s.stream !== null && s.endpoint.queues.includes(todo.queue))) this.ringReady(todo);
          }
        },
      },
    };
  }
}

import { SwitchboardError } from '../domain/errors.ts';
import type { WakeupHandlers } from './wakeups.ts';

/** The longest claim_next may wait for work (its `wait` argument). */
export const LONG_POLL_MAX_SECONDS = 60;
/** Long-polling claim_next calls one endpoint may have waiting at once on one instance. */
export const LONG_POLL_PER_ENDPOINT = 8;
/**
 * A waiting call looks again this often even when nothing woke it: work that became claimable
 * with no wakeup reaching this instance (one lost to a crash between a commit and its broadcast, or
 * sent while the listener reconnected) is found within this long. Each look also keeps its session live.
 */
export const LONG_POLL_RECHECK_MS = 5_000;

/** Why a wait ended. */
export type WaitOutcome = 'woken' | 'timeout' | 'aborted';

/** One waiting call's place: woken by ready work on its queues. */
export interface WaitSlot {
  /**
   * Resolves when work may be ready on the slot's queues (at once when some was announced since the
   * last call), when `ms` pass, or when `signal` aborts.
   */
  next(ms: number, signal: AbortSignal): Promise<WaitOutcome>;
  leave(): void;
}

interface Waiter {
  queues: readonly string[];
  /** Ready work was announced since the waiter last looked. */
  pending: boolean;
  wake: (() => void) | null;
}

/**
 * The long-polling claim_next calls waiting on this instance, by endpoint. A `todo_ready` or
 * `todo_claimable` notification (from any instance, sent for TodoEvents) or a local event wakes every waiter of
 * that endpoint watching that queue; each then tries the normal claim, so one todo goes to one
 * waiter and the rest wait on. Bounded per endpoint; nothing here outlives a call.
 */
export class ClaimWaiters {
  readonly #byEndpoint = new Map<string, Set<Waiter>>();

  constructor(private readonly perEndpoint = LONG_POLL_PER_ENDPOINT) {}

  /** A slot for one waiting call, or a resource_exhausted refusal naming the limit. */
  enter(endpointId: string, queues: readonly string[]): WaitSlot {
    let set = this.#byEndpoint.get(endpointId);
    if ((set?.size ?? 0) >= this.perEndpoint) {
      throw new SwitchboardError(
        'resource_exhausted',
        `this endpoint already has ${this.perEndpoint} claim_next calls waiting (the limit is ${this.perEndpoint} per endpoint); call without wait, or retry when one returns`,
        { limit: this.perEndpoint },
      );
    }
    if (!set) this.#byEndpoint.set(endpointId, (set = new Set()));
    const waiter: Waiter = { queues, pending: false, wake: null };
    set.add(waiter);
    const owner = set;
    return {
      next: (ms, signal) => {
        if (signal.aborted) return Promise.resolve('aborted');
        if (waiter.pending) {
          waiter.pending = false;
          return Promise.resolve('woken');
        }
        return new Promise<WaitOutcome>((resolve) => {
          const finish = (outcome: WaitOutcome) => {
            clearTimeout(timer);
            signal.removeEventListener('abort', onAbort);
            waiter.wake = null;
            waiter.pending = false;
            resolve(outcome);
          };
          const onAbort = () => finish('aborted');
          const timer = setTimeout(() => finish('timeout'), Math.max(0, ms));
          signal.addEventListener('abort', onAbort, { once: true });
          waiter.wake = () => finish('woken');
        });
      },
      leave: () => {
        owner.delete(waiter);
        if (owner.size === 0 && this.#byEndpoint.get(endpointId) === owner) this.#byEndpoint.delete(endpointId);
      },
    };
  }

  /** Work may be ready on an endpoint's queue (every queue when `queue` is null). */
  ready(endpointId: string, queue: string | null): void {
    for (const w of this.#byEndpoint.get(endpointId) ?? []) {
      if (queue !== null && !w.queues.includes(queue)) continue;
      if (w.wake) w.wake();
      else w.pending = true;
    }
  }

  /** Calls waiting now on this endpoint. */
  waiting(endpointId: string): number {
    return this.#byEndpoint.get(endpointId)?.size ?? 0;
  }

  wakeups(): WakeupHandlers {
    return {
      todo_ready: {
        onNotify: ({ endpointId, queue }) => this.ready(endpointId, queue),
        // Notifications sent while the listener was away are lost: every waiter looks again.
        onListen: () => {
          for (const endpointId of [...this.#byEndpoint.keys()]) this.ready(endpointId, null);
        },
      },
      // A release elsewhere: claimable again, nothing to ring.
      todo_claimable: { onNotify: ({ endpointId, queue }) => this.ready(endpointId, queue) },
    };
  }
}

import type { SessionRegistry } from '../../sessions/registry.ts';
import { freshReadyTodos } from '../../store/todos/index.ts';
import type { ServiceBase } from '../base.ts';
import type { WakeupHandlers } from '../wakeups.ts';
import type { Doorbell } from './doorbell.ts';

/**
 * todo_ready on this instance: a todo created or requeued anywhere rings one of its endpoint's
 * sessions here, if this instance holds one. The doorbell's gate stops a second ring of a todo.
 */
export class ReadyRings {
  constructor(
    private readonly base: ServiceBase,
    private readonly sessions: SessionRegistry,
    private readonly doorbell: Doorbell,
  ) {}

  /** Rings the todos of an endpoint's queue that became ready in the last minute, if it has sessions here. */
  ringFresh(endpointId: string, queue: string): void {
    if (this.sessions.sessionsOf(endpointId).length === 0) return;
    const { sql, clock, log } = this.base;
    freshReadyTodos(sql, endpointId, queue, clock.now())
      .then((todos) => todos.forEach((t) => this.doorbell.ringReady(t)))
      .catch((err: unknown) => log.warn({ err: (err as Error).message, endpoint_id: endpointId }, 'todo_ready wakeup failed'));
  }

  wakeups(): WakeupHandlers {
    return {
      todo_ready: {
        onNotify: ({ endpointId, queue }) => this.ringFresh(endpointId, queue),
        // Notifications sent while the listener was reconnecting are lost: ring what became ready
        // meanwhile on every queue of every endpoint held here.
        onListen: () => {
          const held = new Map<string, Set<string>>();
          for (const s of this.sessions.all()) held.set(s.endpoint.id, new Set([...(held.get(s.endpoint.id) ?? []), ...s.endpoint.queues]));
          for (const [endpointId, queues] of held) for (const queue of queues) this.ringFresh(endpointId, queue);
        },
      },
    };
  }
}

import type { Sql } from '../db/connect.ts';
import type { Logger } from '../lib/log.ts';

/**
 * Cross-instance messages over PostgreSQL LISTEN/NOTIFY. The listening connection reconnects by
 * itself; `onListen` runs after every (re)connect so a handler can catch up on what it missed.
 */
export type WakeupChannel = 'endpoint_revoked' | 'todo_ready' | 'endpoint_presence' | 'doorbell_test';
export type WakeupHandlers = Partial<Record<WakeupChannel, { onNotify(payload: string): void; onListen?(): void }>>;

export async function listenForWakeups(sql: Sql, handlers: WakeupHandlers, log: Logger): Promise<{ stop(): Promise<void> }> {
  const subscriptions = await Promise.all(
    Object.entries(handlers).map(([channel, h]) =>
      sql.listen(
        channel,
        (payload) => {
          try {
            h.onNotify(payload);
          } catch (err) {
            log.error({ channel, err: (err as Error).message }, 'wakeup handler failed');
          }
        },
        () => {
          log.debug({ channel }, 'listening for wakeups');
          h.onListen?.();
        },
      ),
    ),
  );
  return {
    stop: async () => {
      await Promise.all(subscriptions.map((s) => s.unlisten().catch(() => {})));
    },
  };
}

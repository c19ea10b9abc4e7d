import type { Sql } from '../db/connect.ts';
import type { Logger } from '../lib/log.ts';
import { decodePayload, type Channel, type ChannelPayloads } from '../store/channels.ts';
import { settleWithin } from '../lib/timeout.ts';

/**
 * Cross-instance messages over PostgreSQL LISTEN/NOTIFY. The listening connection reconnects by
 * itself; `onListen` runs after every (re)connect so a handler can catch up on what it missed.
 * Handlers receive decoded payloads; one this version cannot decode is logged and dropped.
 */
export type WakeupHandlers = { [C in Channel]?: { onNotify(payload: ChannelPayloads[C]): void; onListen?(): void } };

/** How long a shutdown waits for UNLISTEN. */
const UNLISTEN_TIMEOUT_MS = 2_000;

export async function listenForWakeups(sql: Sql, handlers: WakeupHandlers, log: Logger): Promise<{ stop(): Promise<void> }> {
  const subscribe = <C extends Channel>(channel: C, h: NonNullable<WakeupHandlers[C]>) =>
    sql.listen(
      channel,
      (raw) => {
        const payload = decodePayload(channel, raw);
        if (payload === null) {
          log.warn({ channel, payload: raw }, 'wakeup payload not understood; dropped');
          return;
        }
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
    );
  const subscriptions = await Promise.all(
    (Object.keys(handlers) as Channel[]).map((channel) => subscribe(channel, handlers[channel] as NonNullable<WakeupHandlers[typeof channel]>)),
  );
  return {
    // With the database unreachable an UNLISTEN never answers: shutdown goes on without it.
    stop: async () => {
      if ((await settleWithin(Promise.all(subscriptions.map((s) => s.unlisten().catch(() => {}))), UNLISTEN_TIMEOUT_MS)) === 'timeout') {
        log.warn('wakeups: UNLISTEN did not answer; closing the connection instead');
      }
    },
  };
}

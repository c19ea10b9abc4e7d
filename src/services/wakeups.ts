import type { Sql } from '../db/connect.ts';
import type { Logger } from '../lib/log.ts';
import { randomBytes } from 'node:crypto';
import { decodePayload, notify, type Channel, type ChannelPayloads } from '../store/channels.ts';
import { Coalesced } from '../lib/coalesce.ts';
import { settleWithin } from '../lib/timeout.ts';

/**
 * Cross-instance messages over PostgreSQL LISTEN/NOTIFY. The listening connection reconnects by
 * itself; after a reconnect every handler's `onListen` catches up on what it missed. The
 * catch-ups are coalesced: one pass, in turn, once the subscriptions have been quiet for
 * CATCH_UP_QUIET_MS, however many channels re-subscribed and however many attempts failed first.
 * Handlers receive decoded payloads; one this version cannot decode is logged and dropped.
 */
export type WakeupHandlers = { [C in Channel]?: { onNotify(payload: ChannelPayloads[C]): void; onListen?(): void | Promise<void> } };

/**
 * Several services' handler sets as one: where two handle the same channel, both run (each in
 * turn, a failure of one not stopping the other), as do both catch-ups.
 */
export function mergeWakeups(...sets: WakeupHandlers[]): WakeupHandlers {
  const merged: Record<string, { onNotify(payload: never): void; onListen?(): void | Promise<void> }> = {};
  for (const set of sets) {
    for (const [channel, h] of Object.entries(set) as [string, { onNotify(payload: never): void; onListen?(): void | Promise<void> }][]) {
      const prev = merged[channel];
      if (!prev) {
        merged[channel] = h;
        continue;
      }
      merged[channel] = {
        onNotify: (payload) => {
          try {
            prev.onNotify(payload);
          } finally {
            h.onNotify(payload);
          }
        },
        onListen:
          prev.onListen || h.onListen
            ? async () => {
                try {
                  await prev.onListen?.();
                } finally {
                  await h.onListen?.();
                }
              }
            : undefined,
      };
    }
  }
  return merged as WakeupHandlers;
}

/** Subscriptions quiet for this long after a (re)connect: the catch-up pass runs. */
export const CATCH_UP_QUIET_MS = 1_000;

/** How long a shutdown waits for UNLISTEN. */
const UNLISTEN_TIMEOUT_MS = 2_000;

export interface Wakeups {
  stop(): Promise<void>;
  /**
   * Whether this instance's LISTEN connection hears now: sends a `listen_probe` with a fresh
   * nonce and waits at most `timeoutMs` for it to come back.
   */
  probe(timeoutMs: number): Promise<boolean>;
}

export async function listenForWakeups(sql: Sql, handlers: WakeupHandlers, log: Logger): Promise<Wakeups> {
  const catchUps = Object.entries(handlers).flatMap(([channel, h]) => (h?.onListen ? [{ channel, run: h.onListen.bind(h) }] : []));
  const catchUp = new Coalesced(
    async () => {
      const started = performance.now();
      for (const { channel, run } of catchUps) {
        try {
          await run();
        } catch (err) {
          log.warn({ channel, err: (err as Error).message }, 'wakeup catch-up failed');
        }
      }
      log.info({ ms: Math.round(performance.now() - started) }, 'wakeups: caught up after reconnecting');
    },
    CATCH_UP_QUIET_MS,
  );
  const subscribedOnce = new Set<Channel>();
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
        // The first subscription missed nothing: only a re-subscription catches up.
        if (subscribedOnce.has(channel)) catchUp.request();
        else subscribedOnce.add(channel);
      },
    );
  const probes = new Map<string, () => void>();
  const subscriptions = await Promise.all([
    ...(Object.keys(handlers) as Channel[]).map((channel) => subscribe(channel, handlers[channel] as NonNullable<WakeupHandlers[typeof channel]>)),
    // Every instance hears every probe; only the one that sent a nonce is waiting for it.
    sql.listen('listen_probe' satisfies Channel, (raw) => probes.get(decodePayload('listen_probe', raw)?.nonce ?? '')?.()),
  ]);
  return {
    probe: async (timeoutMs) => {
      const nonce = randomBytes(16).toString('hex');
      const heard = new Promise<void>((resolve) => probes.set(nonce, resolve));
      try {
        await notify(sql, 'listen_probe', { nonce });
        return (await settleWithin(heard, timeoutMs)) === 'done';
      } catch {
        return false;
      } finally {
        probes.delete(nonce);
      }
    },
    // With the database unreachable an UNLISTEN never answers: shutdown goes on without it.
    stop: async () => {
      catchUp.cancel();
      if ((await settleWithin(Promise.all(subscriptions.map((s) => s.unlisten().catch(() => {}))), UNLISTEN_TIMEOUT_MS)) === 'timeout') {
        log.warn('wakeups: UNLISTEN did not answer; closing the connection instead');
      }
    },
  };
}

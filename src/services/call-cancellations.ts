import { encodePayload, notify } from '../store/channels.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import type { ServiceBase } from './base.ts';
import type { WakeupHandlers } from './wakeups.ts';

/** A JSON-RPC request id. */
export type RequestId = string | number;

/** A NOTIFY payload is at most 8,000 bytes; a cancel naming a longer id stays on this instance. */
const MAX_CANCEL_PAYLOAD = 1_000;

/** One call being answered: its signal, and the end of its tracking. */
export interface TrackedCall {
  signal: AbortSignal;
  /** The client went away: nothing will read the answer. */
  abort(): void;
  end(): void;
}

/**
 * The MCP calls this instance is answering, so a long-running one (claim_next's long poll) can
 * be ended: by `notifications/cancelled` for it, which may reach any instance behind a load
 * balancer (one that is not answering the call tells the others, `mcp_cancel`), and by the end of
 * its session (DELETE anywhere, revocation, idle expiry, this server stopping).
 */
export class CallCancellations {
  readonly #calls = new Map<string, Map<RequestId, AbortController>>();

  constructor(
    private readonly base: Pick<ServiceBase, 'sql' | 'log'>,
    registry: SessionRegistry,
  ) {
    registry.on('sessionClosed', (s) => {
      for (const call of this.#calls.get(s.id)?.values() ?? []) call.abort();
    });
  }

  begin(sessionId: string, requestId: RequestId): TrackedCall {
    const call = new AbortController();
    let calls = this.#calls.get(sessionId);
    if (!calls) this.#calls.set(sessionId, (calls = new Map()));
    calls.set(requestId, call);
    const mine = calls;
    return {
      signal: call.signal,
      abort: () => call.abort(),
      end: () => {
        if (mine.get(requestId) === call) mine.delete(requestId);
        if (mine.size === 0 && this.#calls.get(sessionId) === mine) this.#calls.delete(sessionId);
      },
    };
  }

  /** notifications/cancelled from the session's client: the call ends here, or on the instance answering it. */
  cancel(sessionId: string, requestId: RequestId): void {
    if (this.#abortHere(sessionId, requestId)) return;
    if (encodePayload('mcp_cancel', { sessionId, requestId }).length > MAX_CANCEL_PAYLOAD) return;
    notify(this.base.sql, 'mcp_cancel', { sessionId, requestId }).catch((err: unknown) =>
      this.base.log.warn({ session: sessionId, err: (err as Error).message }, 'could not pass a cancellation to the other instances'),
    );
  }

  /** Calls being answered here now. */
  get size(): number {
    let n = 0;
    for (const calls of this.#calls.values()) n += calls.size;
    return n;
  }

  wakeups(): WakeupHandlers {
    return { mcp_cancel: { onNotify: ({ sessionId, requestId }) => void this.#abortHere(sessionId, requestId) } };
  }

  #abortHere(sessionId: string, requestId: RequestId): boolean {
    const call = this.#calls.get(sessionId)?.get(requestId);
    call?.abort();
    return call !== undefined;
  }
}

import { encodePayload, notify } from '../store/channels.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import type { ServiceBase } from './base.ts';
import type { WakeupHandlers } from './wakeups.ts';

/** A JSON-RPC request id. */
export type RequestId = string | number;

/** A NOTIFY payload is at most 8,000 bytes; a cancel naming a longer id stays on this instance. */
const MAX_CANCEL_PAYLOAD = 1_000;

/**
 * One call being answered: whether it was ended, and the signal a tool waits on. Most calls never
 * read the signal (only a long wait does), so its AbortController is made when first asked for:
 * one per call was 2-3 % of an MCP drain's server CPU.
 */
export class TrackedCall {
  #controller: AbortController | null = null;
  #aborted = false;

  constructor(readonly end: () => void) {}

  get aborted(): boolean {
    return this.#aborted;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  /** Ends the call: the client cancelled it or went away, its session ended, the server stops. */
  abort(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#controller?.abort();
  }
}

/**
 * The MCP calls this instance is answering, so a long-running one (claim_next's long poll) can
 * be ended: by `notifications/cancelled` for it, which may reach any instance behind a load
 * balancer (one that is not answering the call tells the others, `mcp_cancel`), and by the end of
 * its session (DELETE anywhere, revocation, idle expiry, this server stopping).
 */
export class CallCancellations {
  readonly #calls = new Map<string, Map<RequestId, TrackedCall>>();

  constructor(
    private readonly base: Pick<ServiceBase, 'sql' | 'log'>,
    registry: SessionRegistry,
  ) {
    registry.on('sessionClosed', (s) => {
      for (const call of this.#calls.get(s.id)?.values() ?? []) call.abort();
    });
  }

  begin(sessionId: string, requestId: RequestId): TrackedCall {
    let calls = this.#calls.get(sessionId);
    if (!calls) this.#calls.set(sessionId, (calls = new Map()));
    const mine = calls;
    const call = new TrackedCall(() => {
      if (mine.get(requestId) === call) mine.delete(requestId);
      if (mine.size === 0 && this.#calls.get(sessionId) === mine) this.#calls.delete(sessionId);
    });
    mine.set(requestId, call);
    return call;
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

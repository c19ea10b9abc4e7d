import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Implementation, JSONRPCMessage, Notification } from '@modelcontextprotocol/sdk/types.js';
import { backoffDelay } from './backoff.ts';
import { SseReader, type SseEvent } from './sse.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type BridgeLog = (level: LogLevel, message: string) => void;

/** How long an initialize may take before the attempt counts as failed. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** The server writes a keepalive every 15 s: a stream silent for three of them is taken as dead. */
export const STREAM_IDLE_MS = 45_000;
/** A stream open this long resets the backoff: the next loss starts again at the shortest delay. */
export const STABLE_STREAM_MS = 10_000;

export interface UpstreamOptions {
  url: URL;
  token: string;
  /** Sent in every initialize: the stdio client's own name and version, so the server's hints fit it. */
  clientInfo: Implementation;
  log: BridgeLog;
  /** Every notification the server sends on the session (doorbells arrive here). */
  onNotification: (n: Notification) => void;
  /** After each new session (the first one, and after the server lost the previous one). */
  onSession?: (client: Client) => void;
  random?: () => number;
  idleMs?: number;
}

/** An HTTP status the server answered with, or 0 when no answer came. */
export function httpStatusOf(err: unknown): number {
  if (err instanceof StreamableHTTPError && typeof err.code === 'number') return err.code;
  return 0;
}

/** A short, credential-free account of a failure. */
export function describeFailure(err: unknown): string {
  const status = httpStatusOf(err);
  if (status === 401) return 'HTTP 401: the credential was refused';
  if (status) return `HTTP ${status}`;
  const e = err as { message?: string; cause?: { code?: string; message?: string } } | undefined;
  const cause = e?.cause?.code ?? e?.cause?.message;
  const message = e?.message ?? String(err);
  return cause ? `${message} (${cause})` : message;
}

/**
 * One Switchboard MCP session over Streamable HTTP, kept alive: it initializes, holds the
 * notification stream (GET) open, re-opens it when it drops, starts a new session when the server
 * no longer knows the old one (404), and backs off between attempts. The SDK client carries the
 * requests (POST); the GET stream is read here so its state is known and every loss is retried.
 */
export class Upstream {
  #client: Client | null = null;
  #transport: StreamableHTTPClientTransport | null = null;
  #closed = false;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;
  #streamAbort: AbortController | null = null;
  #waiters = new Set<() => void>();
  #lastError = 'not connected yet';
  #lastLogged = '';
  #streamOpen = false;
  /** The server's instructions from the first session, relayed to the stdio client. */
  instructions: string | undefined;

  constructor(private readonly opts: UpstreamOptions) {}

  get streamOpen(): boolean {
    return this.#streamOpen;
  }

  /** Why the last attempt failed (credential-free). */
  get lastError(): string {
    return this.#lastError;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** The session's client, waiting up to `ms` for one; null when none is there by then. */
  async session(ms: number): Promise<Client | null> {
    const deadline = Date.now() + ms;
    while (!this.#client && !this.#closed) {
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, left);
        this.#waiters.add(done);
      });
    }
    return this.#closed ? null : this.#client;
  }

  /** The server answered 404 for this client's session: drop it and start a new one now. */
  sessionLost(client: Client | null): void {
    if (!client || client !== this.#client) return;
    this.#note('warn', 'the server no longer knows this session; starting a new one');
    this.#drop();
    this.#wake?.();
  }

  /** Ends the session (DELETE, best effort) and stops reconnecting. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#streamAbort?.abort();
    this.#wake?.();
    for (const w of [...this.#waiters]) w();
    // An initialize still in flight is left to finish on its own (it closes what it opened).
    await Promise.race([this.#loop, new Promise((r) => setTimeout(r, 1000).unref())]);
    const transport = this.#transport;
    const client = this.#client;
    this.#client = null;
    this.#transport = null;
    if (transport) {
      await Promise.race([transport.terminateSession().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())]);
    }
    await client?.close().catch(() => {});
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#closed) {
      if (!this.#client) {
        try {
          await this.#initialize();
        } catch (err) {
          this.#fail(err, 'connect');
          await this.#sleep(backoffDelay(attempt++, this.opts.random));
          continue;
        }
      }
      const outcome = await this.#stream();
      if (this.#closed) break;
      if (outcome.lastedMs >= STABLE_STREAM_MS) attempt = 0;
      if (outcome.status === 404) {
        this.#note('warn', 'the server no longer knows this session; starting a new one');
        this.#drop();
      } else if (outcome.status === 401 || outcome.status === 403) {
        this.#drop();
      }
      await this.#sleep(backoffDelay(attempt++, this.opts.random));
    }
  }

  async #initialize(): Promise<void> {
    let transport: StreamableHTTPClientTransport | null = null;
    const client = new Client(this.opts.clientInfo, { capabilities: {} });
    // Delivered in order, whatever their method; the relay picks what the stdio side gets.
    client.fallbackNotificationHandler = async (n) => this.opts.onNotification(n as Notification);
    client.onerror = (err) => this.opts.log('debug', `client: ${describeFailure(err)}`);
    transport = new StreamableHTTPClientTransport(this.opts.url, {
      requestInit: { headers: { Authorization: `Bearer ${this.opts.token}` } },
      // GET is answered 405 here so the SDK leaves the notification stream to #stream(); a POST
      // answered 404 means the server lost the session.
      fetch: async (input, init) => {
        if ((init?.method ?? 'GET').toUpperCase() === 'GET') return new Response(null, { status: 405 });
        const res = await fetch(input, init);
        if (res.status === 404 && transport === this.#transport) queueMicrotask(() => this.sessionLost(client));
        return res;
      },
    });
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
    } catch (err) {
      await client.close().catch(() => {});
      throw err;
    }
    if (this.#closed) {
      await client.close().catch(() => {});
      return;
    }
    this.instructions ??= client.getInstructions();
    this.#client = client;
    this.#transport = transport;
    this.#note('info', `connected to ${redactUrl(this.opts.url)} (session ${(transport.sessionId ?? '?').slice(0, 8)}…)`);
    for (const w of [...this.#waiters]) w();
    this.opts.onSession?.(client);
  }

  /** Holds the notification stream open until it ends; says how it went. */
  async #stream(): Promise<{ lastedMs: number; status?: number }> {
    const transport = this.#transport;
    if (!transport?.sessionId) {
      // A server that names no session cannot hold a notification stream for it.
      this.#lastError = 'the server named no session';
      this.#drop();
      return { lastedMs: 0 };
    }
    const abort = new AbortController();
    this.#streamAbort = abort;
    let idle: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(() => abort.abort(new Error(`the stream was silent for ${Math.round((this.opts.idleMs ?? STREAM_IDLE_MS) / 1000)} s`)), this.opts.idleMs ?? STREAM_IDLE_MS);
    };
    let openedAt = 0;
    try {
      arm();
      const headers: Record<string, string> = {
        authorization: `Bearer ${this.opts.token}`,
        accept: 'text/event-stream',
        'mcp-session-id': transport.sessionId,
      };
      if (transport.protocolVersion) headers['mcp-protocol-version'] = transport.protocolVersion;
      const res = await fetch(this.opts.url, { method: 'GET', headers, signal: abort.signal });
      if (!res.ok || !res.body) {
        await res.body?.cancel().catch(() => {});
        const refusal = new StreamableHTTPError(res.status, res.statusText);
        if (res.status === 404) this.#lastError = describeFailure(refusal);
        else this.#fail(refusal, 'opening the notification stream');
        return { lastedMs: 0, status: res.status };
      }
      openedAt = Date.now();
      this.#streamOpen = true;
      this.#lastError = 'none';
      this.#note('info', 'notification stream open');
      const sse = new SseReader((e) => this.#onEvent(transport, e));
      const decoder = new TextDecoder();
      const reader = res.body.getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        sse.feed(decoder.decode(value, { stream: true }));
      }
      if (!this.#closed) this.#fail(new Error('the server closed the stream'), 'notification stream');
    } catch (err) {
      if (!this.#closed) this.#fail(abort.signal.reason instanceof Error ? abort.signal.reason : err, 'notification stream');
    } finally {
      clearTimeout(idle);
      this.#streamOpen = false;
      if (this.#streamAbort === abort) this.#streamAbort = null;
    }
    return { lastedMs: openedAt ? Date.now() - openedAt : 0 };
  }

  #onEvent(transport: StreamableHTTPClientTransport, e: SseEvent): void {
    if (e.event !== 'message') return;
    let message: JSONRPCMessage;
    try {
      message = JSON.parse(e.data) as JSONRPCMessage;
    } catch {
      this.opts.log('warn', 'the server sent an event that is not JSON; ignored');
      return;
    }
    // Into the SDK client: notifications reach the handlers above, requests (ping) are answered.
    transport.onmessage?.(message);
  }

  #drop(): void {
    const client = this.#client;
    this.#client = null;
    this.#transport = null;
    this.#streamAbort?.abort();
    void client?.close().catch(() => {});
  }

  #fail(err: unknown, stage: string): void {
    const status = httpStatusOf(err);
    this.#lastError = describeFailure(err);
    if (status === 401 || status === 403) {
      this.#note('error', `switchboard refused the credential (HTTP ${status}): check SWITCHBOARD_AGENT_TOKEN, the --url, and that the endpoint is not revoked; retrying`);
      return;
    }
    this.#note('warn', `${stage} failed: ${this.#lastError}; retrying`);
  }

  /** Logs a state line, once per change, so a long outage does not flood stderr. */
  #note(level: LogLevel, message: string): void {
    if (message === this.#lastLogged) return this.opts.log('debug', message);
    this.#lastLogged = message;
    this.opts.log(level, message);
  }

  #sleep(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        if (self.#wake === done) self.#wake = null;
        resolve();
      }
      this.#wake = done;
    });
  }
}

/** The URL without any user or password in it, for logs. */
export function redactUrl(url: URL): string {
  const u = new URL(url.href);
  u.username = '';
  u.password = '';
  u.search = '';
  return u.href;
}

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { Clock } from '../lib/clock.ts';
import { SwitchboardError } from '../domain/errors.ts';
import { SSE_KEEPALIVE_MS, startKeepalive, writeEventStreamHead } from '../lib/sse.ts';

/** What a session knows about its endpoint: a snapshot taken when the session was created. */
export interface SessionEndpoint {
  id: string;
  slug: string;
  agentId: string;
  queues: readonly string[];
  verbs: readonly string[];
  /** How many webhooks its agent may manage itself. */
  webhookMax: number;
}

export interface ClientInfo {
  name: string;
  version: string;
}

export interface Session {
  readonly id: string;
  readonly endpoint: SessionEndpoint;
  readonly createdAt: Date;
  protocolVersion: string;
  clientInfo: ClientInfo;
  /** Set by `notifications/initialized`. */
  initialized: boolean;
  lastActivityAt: Date;
  /** POSTs being handled right now; an open stream also keeps the session alive. */
  inFlight: number;
  stream: OpenStream | null;
  /** Frames written to the stream that the socket has not flushed yet (the doorbell buffer). */
  unflushed: number;
  /** Its last 3 rings went unheard with no acknowledgement from it (SPEC-0025 REQ-5). */
  unheard: boolean;
}

interface OpenStream {
  res: ServerResponse;
  keepalive: NodeJS.Timeout;
}

export type WriteVerdict = 'written' | 'no_stream' | 'write_failed';

export const SESSION_IDLE_MS = 30 * 60_000;
export const KEEPALIVE_MS = SSE_KEEPALIVE_MS;
/** Live sessions one endpoint may hold on one instance (SWITCHBOARD_SESSIONS_PER_ENDPOINT). */
export const SESSIONS_PER_ENDPOINT_DEFAULT = 32;
/** Live sessions one instance holds at most, whatever the endpoints. */
export const SESSIONS_PER_INSTANCE_MAX = 20_000;

export interface SessionEvents {
  /** The endpoint's first open stream on this instance (0 → 1). */
  endpointStreamAttached: [endpointId: string, session: Session];
  /** A session's stream opened (every time, including re-opens). */
  streamOpened: [session: Session];
  streamClosed: [session: Session];
  sessionClosed: [session: Session, reason: string];
}

/**
 * The per-instance registry of live MCP sessions. Nothing here is persisted: a restart drops
 * every session and clients initialize again. It is the one place that knows whether a session
 * has an open stream, which the doorbell writer's verdict depends on.
 */
export class SessionRegistry extends EventEmitter<SessionEvents> {
  readonly #sessions = new Map<string, Session>();
  /** endpoint id → its sessions here, so every per-endpoint question costs that endpoint's sessions only. */
  readonly #byEndpoint = new Map<string, Set<Session>>();
  readonly #maxPerEndpoint: number;
  readonly #maxTotal: number;
  /** endpoint id → number of its sessions with an open stream on this instance. */
  readonly #openStreams = new Map<string, number>();
  readonly #clock: Clock;
  readonly #keepaliveMs: number;

  constructor(clock: Clock, opts: { keepaliveMs?: number; maxPerEndpoint?: number; maxTotal?: number } = {}) {
    super();
    this.#clock = clock;
    this.#keepaliveMs = opts.keepaliveMs ?? KEEPALIVE_MS;
    this.#maxPerEndpoint = opts.maxPerEndpoint ?? SESSIONS_PER_ENDPOINT_DEFAULT;
    this.#maxTotal = opts.maxTotal ?? SESSIONS_PER_INSTANCE_MAX;
  }

  /**
   * A new session. At the endpoint's cap the oldest session with no open stream and nothing in
   * flight makes room (a client that restarted without DELETE leaves such sessions behind); when
   * every one is busy, or this instance holds its maximum, the initialize is refused (429).
   */
  create(endpoint: SessionEndpoint, protocolVersion: string, clientInfo: ClientInfo): Session {
    const mine = this.#byEndpoint.get(endpoint.id);
    if (mine && mine.size >= this.#maxPerEndpoint) {
      const idle = [...mine].filter((s) => s.stream === null && s.inFlight === 0).sort((a, b) => a.lastActivityAt.getTime() - b.lastActivityAt.getTime());
      if (!idle[0]) {
        throw new SwitchboardError('rate_limited', `endpoint ${endpoint.slug} already holds ${this.#maxPerEndpoint} live sessions, each with an open stream or a call in flight; close one (DELETE) and retry`, { retry_after: 60 });
      }
      this.close(idle[0], 'session cap: the oldest idle session made room');
    }
    if (this.#sessions.size >= this.#maxTotal) {
      throw new SwitchboardError('rate_limited', `this instance holds its maximum of ${this.#maxTotal} sessions; retry shortly`, { retry_after: 60 });
    }
    const now = this.#clock.now();
    const session: Session = {
      id: randomBytes(16).toString('base64url'),
      endpoint,
      createdAt: now,
      protocolVersion,
      clientInfo,
      initialized: false,
      lastActivityAt: now,
      inFlight: 0,
      stream: null,
      unflushed: 0,
      unheard: false,
    };
    this.#sessions.set(session.id, session);
    if (mine) mine.add(session);
    else this.#byEndpoint.set(endpoint.id, new Set([session]));
    return session;
  }

  /** The session, only if it belongs to this endpoint: another endpoint's answers like a missing one. */
  get(id: string, endpointId: string): Session | undefined {
    const s = this.#sessions.get(id);
    return s && s.endpoint.id === endpointId ? s : undefined;
  }

  sessionsOf(endpointId: string): Session[] {
    const mine = this.#byEndpoint.get(endpointId);
    return mine ? [...mine] : [];
  }

  all(): Session[] {
    return [...this.#sessions.values()];
  }

  get size(): number {
    return this.#sessions.size;
  }

  hasOpenStream(endpointId: string): boolean {
    return (this.#openStreams.get(endpointId) ?? 0) > 0;
  }

  touch(session: Session): void {
    session.lastActivityAt = this.#clock.now();
  }

  /**
   * Makes `res` the session's stream. The newest stream wins: an older one is ended, so a
   * half-open socket can never lock a reconnecting client out.
   */
  attachStream(session: Session, res: ServerResponse): void {
    // The client may have left while the request was being authenticated: its 'close' has already
    // fired and would never detach the stream, so a dead response must not count as one.
    if (res.destroyed) return;
    if (session.stream) this.#endStream(session);
    writeEventStreamHead(res, { 'mcp-session-id': session.id });
    res.flushHeaders();
    const keepalive = startKeepalive(res, this.#keepaliveMs);
    session.stream = { res, keepalive };
    res.once('close', () => {
      if (session.stream?.res === res) this.#detach(session);
    });
    this.touch(session);
    const before = this.#openStreams.get(session.endpoint.id) ?? 0;
    this.#openStreams.set(session.endpoint.id, before + 1);
    this.emit('streamOpened', session);
    if (before === 0) this.emit('endpointStreamAttached', session.endpoint.id, session);
  }

  /**
   * Writes one JSON-RPC message to the session's stream. The verdict is decided synchronously
   * from the stream's state and the write itself: a doorbell counts only when `written`.
   */
  write(session: Session, message: unknown): WriteVerdict {
    const stream = session.stream;
    if (!stream) return 'no_stream';
    const { res } = stream;
    if (res.destroyed || res.writableEnded || !res.writable) {
      this.#detach(session);
      return 'write_failed';
    }
    try {
      session.unflushed++;
      res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`, () => {
        session.unflushed = Math.max(0, session.unflushed - 1);
      });
      return 'written';
    } catch {
      this.#detach(session);
      return 'write_failed';
    }
  }

  close(session: Session, reason: string): void {
    if (!this.#sessions.delete(session.id)) return;
    const mine = this.#byEndpoint.get(session.endpoint.id);
    mine?.delete(session);
    if (mine?.size === 0) this.#byEndpoint.delete(session.endpoint.id);
    if (session.stream) this.#endStream(session);
    this.emit('sessionClosed', session, reason);
  }

  closeEndpoint(endpointId: string, reason: string): number {
    const victims = this.sessionsOf(endpointId);
    for (const s of victims) this.close(s, reason);
    return victims.length;
  }

  /** Closes sessions with nothing in flight, no stream and no activity for the idle window. */
  expireIdle(idleMs = SESSION_IDLE_MS): number {
    const cutoff = this.#clock.now().getTime() - idleMs;
    let n = 0;
    for (const s of this.#sessions.values()) {
      if (s.inFlight === 0 && !s.stream && s.lastActivityAt.getTime() <= cutoff) {
        this.close(s, 'idle');
        n++;
      }
    }
    return n;
  }

  closeAll(reason: string): void {
    for (const s of [...this.#sessions.values()]) this.close(s, reason);
  }

  #endStream(session: Session): void {
    const stream = session.stream;
    if (!stream) return;
    this.#detach(session);
    if (!stream.res.writableEnded) stream.res.end();
  }

  #detach(session: Session): void {
    const stream = session.stream;
    if (!stream) return;
    clearInterval(stream.keepalive);
    session.stream = null;
    session.unflushed = 0;
    this.touch(session);
    const n = (this.#openStreams.get(session.endpoint.id) ?? 1) - 1;
    if (n <= 0) this.#openStreams.delete(session.endpoint.id);
    else this.#openStreams.set(session.endpoint.id, n);
    this.emit('streamClosed', session);
  }
}

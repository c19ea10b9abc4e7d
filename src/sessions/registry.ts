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
  /** The agent's name, as vended (whoami shows it). */
  agentName?: string;
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
  /** When the session directory last confirmed this session is live (ms); 0 forces a check. */
  verifiedAt: number;
  /** Activity not yet written to the directory; the directory service flushes it in batches. */
  dirty: boolean;
  /** Its last acknowledgement (a claim or ack_doorbell) on this instance, until flushed. */
  ackedAt: Date | null;
  /** Its last acknowledgement anywhere, as known here (the doorbell's session choice reads it). */
  lastAckAt: Date | null;
  /** It has listed or called tools since initialize: a proxy's probe never does (domain/doorbell-choice.ts). */
  calledTool: boolean;
  /** POSTs being handled right now; an open stream also keeps the session alive. */
  inFlight: number;
  stream: OpenStream | null;
  /** Frames written to the stream that the socket has not flushed yet (the doorbell buffer). */
  unflushed: number;
  /** Its last 3 rings went unheard with no acknowledgement from it (SPEC-0025 REQ-5), as last read from the directory. */
  unheard: boolean;
  /** The OAuth grant whose access token its last request here carried (null: an sbk_ credential); revoking the grant ends it. */
  oauthGrantId: string | null;
  /** When that access token expires: its stream here is ended then (endExpiredStreams), so a client whose token lapsed hears no more doorbells until it reconnects with a fresh one. */
  oauthExpiresAt: Date | null;
}

/** What a session is when this instance learns of it: new here, or read from the directory. */
export interface SessionFacts {
  id?: string;
  createdAt?: Date;
  protocolVersion: string;
  clientInfo: ClientInfo;
  initialized?: boolean;
  unheard?: boolean;
  lastAckAt?: Date | null;
  calledTool?: boolean;
}

interface OpenStream {
  res: ServerResponse;
  keepalive: NodeJS.Timeout;
  /** When it attached: a ring decided before this moment is not this stream's to hear (Doorbell.ring). */
  attachedAt: Date;
}

export type WriteVerdict = 'written' | 'no_stream' | 'write_failed';

export const KEEPALIVE_MS = SSE_KEEPALIVE_MS;
/** Live sessions one endpoint may hold across the cluster (SWITCHBOARD_SESSIONS_PER_ENDPOINT). */
export const SESSIONS_PER_ENDPOINT_DEFAULT = 32;
/** Sessions one instance keeps in memory at most, whatever the endpoints. */
export const SESSIONS_PER_INSTANCE_MAX = 20_000;
/** A session copy with no stream and no call here for this long is dropped from this instance's memory (not ended). */
export const LOCAL_COPY_IDLE_MS = 5 * 60_000;

export interface SessionEvents {
  /** The endpoint's first open stream on this instance (0 → 1). */
  endpointStreamAttached: [endpointId: string, session: Session];
  /** A session's stream opened (every time, including re-opens). */
  streamOpened: [session: Session];
  streamClosed: [session: Session];
  sessionClosed: [session: Session, reason: string];
}

/**
 * This instance's copies of live MCP sessions. The cluster's sessions live in the session
 * directory (services/session-directory.ts); a copy is made here when a session is created or
 * first used on this instance. It is the one place that knows whether a session has an open
 * stream here, which the doorbell writer's verdict depends on.
 */
export class SessionRegistry extends EventEmitter<SessionEvents> {
  readonly #sessions = new Map<string, Session>();
  /** endpoint id → its sessions here, so every per-endpoint question costs that endpoint's sessions only. */
  readonly #byEndpoint = new Map<string, Set<Session>>();
  readonly #maxTotal: number;
  /** endpoint id → number of its sessions with an open stream on this instance. */
  readonly #openStreams = new Map<string, number>();
  readonly #clock: Clock;
  readonly #keepaliveMs: number;

  constructor(clock: Clock, opts: { keepaliveMs?: number; maxTotal?: number } = {}) {
    super();
    this.#clock = clock;
    this.#keepaliveMs = opts.keepaliveMs ?? KEEPALIVE_MS;
    this.#maxTotal = opts.maxTotal ?? SESSIONS_PER_INSTANCE_MAX;
  }

  /**
   * A copy of a session on this instance (a new one gets a fresh id). At the instance maximum the
   * copy used longest ago with no stream and nothing in flight is dropped from memory (the session
   * lives on in the directory); when every copy is busy the request is refused (429).
   */
  create(endpoint: SessionEndpoint, facts: SessionFacts): Session {
    if (this.#sessions.size >= this.#maxTotal) {
      let idlest: Session | undefined;
      for (const s of this.#sessions.values()) {
        if (s.stream === null && s.inFlight === 0 && (!idlest || s.lastActivityAt < idlest.lastActivityAt)) idlest = s;
      }
      if (!idlest) throw new SwitchboardError('rate_limited', `this instance holds its maximum of ${this.#maxTotal} busy sessions; retry shortly`, { retry_after: 60 });
      this.close(idlest, 'instance maximum: the copy used longest ago made room');
    }
    const now = this.#clock.now();
    const session: Session = {
      id: facts.id ?? randomBytes(16).toString('base64url'),
      endpoint,
      createdAt: facts.createdAt ?? now,
      protocolVersion: facts.protocolVersion,
      clientInfo: facts.clientInfo,
      initialized: facts.initialized ?? false,
      lastActivityAt: now,
      verifiedAt: now.getTime(),
      dirty: false,
      ackedAt: null,
      lastAckAt: facts.lastAckAt ?? null,
      calledTool: facts.calledTool ?? false,
      inFlight: 0,
      stream: null,
      unflushed: 0,
      unheard: facts.unheard ?? false,
      oauthGrantId: null,
      oauthExpiresAt: null,
    };
    this.#sessions.set(session.id, session);
    const mine = this.#byEndpoint.get(endpoint.id);
    if (mine) mine.add(session);
    else this.#byEndpoint.set(endpoint.id, new Set([session]));
    return session;
  }

  /** This instance's copy of a session, whichever endpoint it belongs to. */
  peek(id: string): Session | undefined {
    return this.#sessions.get(id);
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

  /** Sessions held here marked unheard (the metrics gauge counts this instance's registry, SPEC-0025 REQ-6). */
  unheardCount(): number {
    let n = 0;
    for (const s of this.#sessions.values()) if (s.unheard) n++;
    return n;
  }

  get size(): number {
    return this.#sessions.size;
  }

  hasOpenStream(endpointId: string): boolean {
    return (this.#openStreams.get(endpointId) ?? 0) > 0;
  }

  touch(session: Session): void {
    session.lastActivityAt = this.#clock.now();
    session.dirty = true;
  }

  /** The endpoints with at least one open stream on this instance. */
  streamingEndpoints(): string[] {
    return [...this.#openStreams.keys()];
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
    session.stream = { res, keepalive, attachedAt: this.#clock.now() };
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

  /** Drops copies with nothing in flight, no stream and no activity here for `idleMs`. */
  expireIdle(idleMs = LOCAL_COPY_IDLE_MS, reason = 'idle here'): Session[] {
    const cutoff = this.#clock.now().getTime() - idleMs;
    const dropped: Session[] = [];
    for (const s of this.#sessions.values()) {
      if (s.inFlight === 0 && !s.stream && !s.dirty && s.lastActivityAt.getTime() <= cutoff) dropped.push(s);
    }
    for (const s of dropped) this.close(s, reason);
    return dropped;
  }

  closeAll(reason: string): void {
    for (const s of [...this.#sessions.values()]) this.close(s, reason);
  }

  /**
   * Ends the streams here whose OAuth access token has expired; the sessions stay. An open stream
   * makes no request that would be refused, so without this it would carry doorbells (and each
   * todo's summary) for as long as the socket lives. The client's SDK reconnects the stream, meets
   * the 401, refreshes and goes on. Answers the sessions whose stream it ended.
   */
  endExpiredStreams(): Session[] {
    const now = this.#clock.now().getTime();
    const lapsed = [...this.#sessions.values()].filter((s) => s.stream && s.oauthExpiresAt && s.oauthExpiresAt.getTime() <= now);
    for (const s of lapsed) this.#endStream(s);
    return lapsed;
  }

  /** Ends the session's stream here (a newer one opened elsewhere); the session stays. */
  endStream(session: Session): void {
    this.#endStream(session);
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

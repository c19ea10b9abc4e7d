import type { ServerResponse } from 'node:http';
import { ulid } from 'ulidx';
import { SESSION_IDLE_DEFAULT_MS } from '../config.ts';
import type { RingCandidate } from '../domain/doorbell-choice.ts';
import { SwitchboardError } from '../domain/errors.ts';
import { settleWithin } from '../lib/timeout.ts';
import { VERSION } from '../lib/version.ts';
import type { ClientInfo, Session, SessionEndpoint, SessionRegistry } from '../sessions/registry.ts';
import { SESSIONS_PER_ENDPOINT_DEFAULT } from '../sessions/registry.ts';
import {
  attachSessionStream,
  deleteSession,
  detachSessionStream,
  choiceFactsOf,
  expireIdleSessionsUnscoped,
  findSession,
  insertSession,
  recordSessionActivity,
  sessionCountsOf,
  sessionsOfEndpoints,
  type SessionChoiceFacts,
  type SessionCounts,
  type SessionRow,
} from '../store/sessions.ts';
import { heartbeatInstance, reapDeadInstancesUnscoped, removeInstance } from '../store/instances.ts';
import type { ServiceBase } from './base.ts';
import type { WakeupHandlers } from './wakeups.ts';

/** A copy confirmed live this recently is used without asking the directory. */
export const SESSION_CACHE_MS = 5_000;
/** How often an instance writes the activity it saw (last seen, acknowledgements) to the directory. */
export const ACTIVITY_FLUSH_MS = 2_000;
/** How often an instance heartbeats and reaps dead instances (dead after INSTANCE_DEAD_AFTER_MS). */
export const HEARTBEAT_MS = 5_000;
/** How long a shutdown waits to write its last activity and leave the directory. */
const STOP_WRITE_TIMEOUT_MS = 2_000;

export interface SessionDirectoryOptions {
  maxPerEndpoint?: number;
  /** No stream and no call for this long: the session is dead and ends everywhere. */
  idleMs?: number;
}

/**
 * The cluster's MCP sessions: PostgreSQL holds every session (store/sessions.ts) and this
 * instance's registry holds copies of those used here. Any instance answers a POST or DELETE for
 * any live session; a GET stream stays where it was accepted, and the directory names its
 * instance. The newest stream wins across instances; DELETE, idle expiry and revocation end a
 * session on every instance at once (`mcp_session` and `endpoint_revoked` notifications).
 */
export class SessionDirectory {
  readonly instanceId = `i_${ulid()}`;
  readonly #maxPerEndpoint: number;
  readonly #idleMs: number;
  #onFirstCopy: (endpointId: string) => Promise<void> = async () => {};
  #timers: NodeJS.Timeout[] = [];
  #reads = 0;
  #flushing: Promise<void> = Promise.resolve();

  /**
   * Runs `load` when this instance first holds a copy of an endpoint's session, so its presence is
   * loaded before a ring. Set after construction: presence is built on services that need the
   * directory (compose.ts closes that one cycle here).
   */
  beforeFirstCopy(load: (endpointId: string) => Promise<void>): void {
    this.#onFirstCopy = load;
  }

  constructor(
    private readonly base: ServiceBase,
    readonly registry: SessionRegistry,
    opts: SessionDirectoryOptions = {},
  ) {
    this.#maxPerEndpoint = opts.maxPerEndpoint ?? SESSIONS_PER_ENDPOINT_DEFAULT;
    this.#idleMs = opts.idleMs ?? SESSION_IDLE_DEFAULT_MS;
    // A stream replaced by a newer one here, or ended with its session, names nothing to clear:
    // look once the registry has finished (attachStream sets the new stream after closing the old).
    registry.on('streamClosed', (s) =>
      queueMicrotask(() => {
        if (s.stream !== null || registry.peek(s.id) !== s) return;
        detachSessionStream(base.sql, s.id, this.instanceId, base.clock.now()).catch((err: unknown) => this.#warn('stream detach', s, err));
      }),
    );
  }

  /** A new session: written to the directory before its id is handed out. */
  async create(endpoint: SessionEndpoint, protocolVersion: string, clientInfo: ClientInfo): Promise<Session> {
    const session = this.registry.create(endpoint, { protocolVersion, clientInfo });
    try {
      const { inserted, evicted } = await insertSession(
        this.base.sql,
        { id: session.id, endpointId: endpoint.id, protocolVersion, clientName: clientInfo.name, clientVersion: clientInfo.version, at: session.createdAt },
        { maxPerEndpoint: this.#maxPerEndpoint },
      );
      if (!inserted) {
        throw new SwitchboardError(
          'rate_limited',
          `endpoint ${endpoint.slug} already holds ${this.#maxPerEndpoint} live sessions, each with an open stream; close one (DELETE) and retry`,
          { retry_after: 60 },
        );
      }
      if (evicted) this.#dropCopy(evicted, 'session cap: the session seen longest ago made room');
    } catch (err) {
      this.registry.close(session, 'not created');
      throw err;
    }
    await this.#onFirstCopy(endpoint.id);
    return session;
  }

  /**
   * The live session named by a request, bound to the authenticated endpoint, or undefined. A
   * copy confirmed within SESSION_CACHE_MS costs no database round trip; another instance's
   * session is read from the directory and copied here.
   */
  async resolve(id: string, endpoint: SessionEndpoint): Promise<Session | undefined> {
    const now = this.base.clock.now().getTime();
    const copy = this.registry.get(id, endpoint.id);
    if (copy && (copy.stream !== null || now - copy.verifiedAt < SESSION_CACHE_MS)) return copy;
    this.#reads++;
    const row = await findSession(this.base.sql, id, endpoint.id);
    if (!row) {
      if (copy) this.registry.close(copy, 'ended elsewhere');
      return undefined;
    }
    if (copy) {
      copy.verifiedAt = now;
      copy.initialized ||= row.initialized;
      takeChoiceFacts(copy, { unheard: row.unheard, lastAckAt: row.last_ack_at, calledTool: row.called_tool });
      return copy;
    }
    if (this.registry.peek(id)) return undefined;
    const firstOfEndpoint = this.registry.sessionsOf(endpoint.id).length === 0;
    const adopted = this.registry.create(endpoint, {
      id: row.id,
      createdAt: row.created_at,
      protocolVersion: row.protocol_version,
      clientInfo: { name: row.client_name, version: row.client_version },
      initialized: row.initialized,
      unheard: row.unheard,
      lastAckAt: row.last_ack_at,
      calledTool: row.called_tool,
    });
    if (firstOfEndpoint) await this.#onFirstCopy(endpoint.id);
    return adopted;
  }

  /**
   * Names this instance as the holder of the session's stream, so the directory is right before
   * the client sees its stream open; the instance that held it before ends its own. False when
   * the session ended meanwhile.
   */
  async claimStream(session: Session): Promise<boolean> {
    const live = await attachSessionStream(this.base.sql, session.id, this.instanceId, this.base.clock.now());
    if (!live) this.registry.close(session, 'ended elsewhere');
    return live;
  }

  /** Makes `res` the session's stream here, once claimed; a client that left meanwhile leaves no stream named. */
  openStream(session: Session, res: ServerResponse): void {
    this.registry.attachStream(session, res);
    if (session.stream?.res !== res) {
      detachSessionStream(this.base.sql, session.id, this.instanceId, this.base.clock.now()).catch((err: unknown) => this.#warn('stream detach', session, err));
    }
  }

  /** Directory reads made to resolve a request's session so far (the claim bench shows the cache at work). */
  get reads(): number {
    return this.#reads;
  }

  /** DELETE by the client: the session ends on every instance. */
  async close(session: Session, reason: string): Promise<void> {
    this.registry.close(session, reason);
    await deleteSession(this.base.sql, session.id);
  }

  /** Every live session of an endpoint, as the cluster sees it, oldest first. */
  async sessionsOf(endpointId: string): Promise<SessionRow[]> {
    return (await this.sessionsOfEach([endpointId])).get(endpointId) ?? [];
  }

  /**
   * Every live session of each endpoint, as the cluster sees it, oldest first: one with no stream
   * and no call for the idle time is dead (the janitor ends it within a minute) and not listed.
   */
  async sessionsOfEach(endpointIds: readonly string[]): Promise<Map<string, SessionRow[]>> {
    const out = new Map<string, SessionRow[]>(endpointIds.map((id) => [id, []]));
    const idleSince = this.#idleSince().getTime();
    for (const row of await sessionsOfEndpoints(this.base.sql, endpointIds)) {
      if (row.stream_instance !== null || row.last_seen_at.getTime() > idleSince) out.get(row.endpoint_id)?.push(row);
    }
    return out;
  }

  /** Per endpoint: live sessions, live streams and unheard sessions across the cluster, and idle sessions ended. */
  countsOf(endpointIds: readonly string[]): Promise<Map<string, SessionCounts>> {
    return sessionCountsOf(this.base.sql, endpointIds, this.#idleSince());
  }

  /**
   * The endpoint's sessions with a live stream on other instances, as the doorbell's session choice
   * sees them: whether one there is likelier to hear a ring than any here.
   */
  async streamsElsewhere(endpointId: string): Promise<RingCandidate[]> {
    return (await sessionsOfEndpoints(this.base.sql, [endpointId]))
      .filter((r) => r.stream_instance !== null && r.stream_instance !== this.instanceId)
      .map((r) => ({ streamAttachedAt: r.stream_opened_at ?? r.last_seen_at, lastAckAt: r.last_ack_at, calledTool: r.called_tool, unheard: r.unheard }));
  }

  /**
   * The directory's unheard marks and choice facts (last acknowledgement, a tool called) for the
   * copies held here, which another instance may have changed (a claim answered elsewhere).
   */
  async refreshChoiceFacts(): Promise<void> {
    const here = this.registry.all();
    const facts = await choiceFactsOf(
      this.base.sql,
      here.map((s) => ({ id: s.id, endpointId: s.endpoint.id })),
    );
    for (const s of here) {
      const f = facts.get(s.id);
      if (f) takeChoiceFacts(s, f);
    }
  }

  #idleSince(): Date {
    return new Date(this.base.clock.now().getTime() - this.#idleMs);
  }

  /** Writes the activity seen here since the last flush (last seen, acknowledgements, initialized). */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      const dirty = this.registry.all().filter((s) => s.dirty);
      if (dirty.length === 0) return;
      const batch = dirty.map((s) => ({ id: s.id, seenAt: s.lastActivityAt, ackedAt: s.ackedAt, initialized: s.initialized, calledTool: s.calledTool }));
      for (const s of dirty) {
        s.dirty = false;
        s.ackedAt = null;
      }
      await recordSessionActivity(this.base.sql, batch).catch((err: unknown) => {
        for (const s of dirty) s.dirty = true;
        this.base.log.warn({ err: (err as Error).message, sessions: dirty.length }, 'session activity flush failed; retrying');
      });
    });
    return this.#flushing;
  }

  /** This instance is alive; instances that stopped heartbeating are removed with their streams. */
  async heartbeat(): Promise<void> {
    await heartbeatInstance(this.base.sql, this.instanceId, VERSION);
    const dead = await reapDeadInstancesUnscoped(this.base.sql);
    if (dead.length > 0) this.base.log.warn({ instances: dead }, 'instances stopped heartbeating; their streams are gone');
  }

  /**
   * Ends sessions with no stream and no call across the cluster for the idle time (counted on
   * their endpoints), and forgets copies idle here.
   */
  async expireIdle(): Promise<number> {
    await this.flush();
    const ended = await expireIdleSessionsUnscoped(this.base.sql, this.#idleSince(), this.base.clock.now());
    for (const id of ended) this.#dropCopy(id, 'idle');
    this.registry.expireIdle();
    return ended.length;
  }

  /**
   * Ends the streams here whose OAuth access token has expired (SessionRegistry.endExpiredStreams);
   * the sessions stay, for the client to reconnect with a refreshed token. Answers how many.
   */
  endExpiredAccessStreams(): number {
    const lapsed = this.registry.endExpiredStreams();
    for (const s of lapsed) this.base.log.info({ slug: s.endpoint.slug, session: s.id, grant_id: s.oauthGrantId }, 'ended an mcp stream whose oauth access token expired');
    return lapsed.length;
  }

  /** Registers this instance and starts its heartbeat and activity flush (wall-clock timers: liveness is real time). */
  async start(): Promise<void> {
    await this.heartbeat();
    const every = (ms: number, what: string, fn: () => Promise<unknown>) => {
      const t = setInterval(() => void fn().catch((err: unknown) => this.base.log.warn({ err: (err as Error).message }, `${what} failed`)), ms);
      t.unref();
      this.#timers.push(t);
    };
    every(HEARTBEAT_MS, 'instance heartbeat', () => this.heartbeat());
    every(ACTIVITY_FLUSH_MS, 'session activity flush', () => this.flush());
  }

  /** A clean shutdown: streams here end, the directory forgets this instance; the sessions live on elsewhere. */
  async stop(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    this.registry.closeAll('server shutting down');
    // With the database gone, shutdown does not wait for it: the heartbeat ages out instead.
    const writes = (async () => {
      await this.flush();
      await removeInstance(this.base.sql, this.instanceId);
    })();
    const outcome = await settleWithin(writes, STOP_WRITE_TIMEOUT_MS);
    if (outcome !== 'done') {
      this.base.log.warn({ err: outcome === 'timeout' ? 'timed out' : outcome.message }, 'could not remove this instance from the directory');
    }
  }

  wakeups(): WakeupHandlers {
    return {
      mcp_session: {
        onNotify: (p) => {
          if (p.change === 'closed') this.#dropCopy(p.sessionId, 'ended elsewhere');
          else if (p.instanceId !== this.instanceId) {
            const copy = this.registry.peek(p.sessionId);
            if (copy?.stream) this.registry.endStream(copy);
          }
        },
        // Notifications missed while reconnecting: every copy is checked again on its next use.
        onListen: () => {
          for (const s of this.registry.all()) s.verifiedAt = 0;
        },
      },
    };
  }

  #dropCopy(id: string, reason: string): void {
    const copy = this.registry.peek(id);
    if (copy) this.registry.close(copy, reason);
  }

  #warn(stage: string, session: Session, err: unknown): void {
    this.base.log.warn({ stage, slug: session.endpoint.slug, session: session.id, err: (err as Error).message }, 'session directory write failed');
  }
}

/**
 * A copy takes the directory's facts: the unheard mark as it is there, and the later of two
 * acknowledgements; a tool called anywhere stays called.
 */
function takeChoiceFacts(copy: Session, f: SessionChoiceFacts): void {
  copy.unheard = f.unheard;
  if (f.lastAckAt && (!copy.lastAckAt || f.lastAckAt > copy.lastAckAt)) copy.lastAckAt = f.lastAckAt;
  copy.calledTool ||= f.calledTool;
}

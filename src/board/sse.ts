import type { ServerResponse } from 'node:http';
import type { Clock } from '../lib/clock.ts';
import type { BoardReads } from '../services/board-reads.ts';
import type { EndpointService } from '../services/endpoints.ts';
import { inputsOf } from '../services/presence.ts';
import { verdictOf } from '../services/doorbell/self-tests.ts';
import type { Humans } from '../services/humans.ts';
import type { Logger } from '../lib/log.ts';
import { SSE_KEEPALIVE_MS, startKeepalive } from '../lib/sse.ts';
import { effective, untilOnWire } from '../domain/presence/index.ts';

/**
 * Live updates for the board: one server-sent event stream per browser tab, carrying only the
 * signed-in human's events.
 *
 * How: while a human has at least one stream open on this instance, one poller per human asks
 * PostgreSQL every 2 s two cheap questions, both scoped to the human's own endpoints: which of
 * their todos changed since the last look (an index on (endpoint_id, updated_at)), and their
 * endpoints' rows (presence inputs, last seen, state) plus each one's latest self-test. Presence
 * is recomputed with presence.effective at the injected clock's now, so a shift boundary or an
 * override running out shows up without any write. Polling the database (rather than LISTEN)
 * sees changes made by every instance, including claims and completions, which send no
 * notification. Events are hints: the page re-reads its regions, and a reload always shows the
 * truth.
 *
 * Event types: `ready` {} once the stream's baseline is taken (the page re-reads once, which closes
 * the gap between rendering it and opening the stream), and again after frames were dropped (below),
 * `todo` {type: created|claimed|done|failed|
 * pending, id, endpoint_id, state},
 * `presence` {endpoint_id, presence, source, until}, `endpoint` {endpoint_id, what: seen|sessions|
 * self_test|state}.
 *
 * A browser that stops reading is not buffered for: a stream never holds more than
 * MAX_BUFFERED_BYTES unsent. A look's frames go out as one write, or as one `ready` when they are
 * more than that; frames that do not fit are dropped, and once there is room again the stream gets
 * one `ready` (the page re-reads everything it shows). A stream that had to drop frames at every
 * look for STALL_LIMIT_MS is destroyed (EventSource reconnects and re-reads). Keepalives are
 * written only to an empty buffer.
 *
 * Every look also re-reads each stream's board session: a signed-out, replaced or expired session
 * ends its streams at the next look, whichever instance holds them (sign-out on this instance
 * ends them at once).
 */

export const BOARD_POLL_MS = 2000;
export const BOARD_KEEPALIVE_MS = SSE_KEEPALIVE_MS;
/** Changes committed slightly out of updated_at order are still seen: each look overlaps the last by this much. */
const OVERLAP_MS = 10_000;
/** Open streams one browser session may hold at once (tabs). */
export const STREAMS_PER_SESSION = 8;
/** Unsent bytes a stream may hold; frames that would go past it are dropped. */
export const MAX_BUFFERED_BYTES = 64 * 1024;
/** A stream that drops frames at every look for this long (injected clock) is destroyed. */
export const STALL_LIMIT_MS = 30_000;
const READY_FRAME = 'event: ready\ndata: {}\n\n';

export interface BoardEventsDeps {
  endpoints: Pick<EndpointService, 'listOwn'>;
  reads: Pick<BoardReads, 'latestSelfTests' | 'todoChangesSince'>;
  clock: Clock;
  log: Logger;
  /** The live board session behind a cookie value, or null (signed out, replaced or expired). */
  sessions: Pick<Humans, 'findWebSession'>;
  /** The cluster's session counts of each endpoint. */
  sessionCounts: (endpointIds: readonly string[]) => Promise<Map<string, { sessions: number; unheard_sessions: number }>>;
  pollMs?: number;
  keepaliveMs?: number;
}

interface Subscriber {
  res: ServerResponse;
  sessionKey: string;
  /** The session's cookie value, to re-read the session at each look. */
  token: string;
  /** Frames were dropped since the last drain: the page needs a full re-read. */
  missed: boolean;
  /** A frame was dropped since the last look's review. */
  droppedThisLook: boolean;
  /** It took frames since the last look's review: a look's frames were written to it, or its buffer drained. */
  tookThisLook: boolean;
  /** Start of the run of looks that each dropped frames (injected clock), null when the last did not. */
  stalledSince: number | null;
}

interface EndpointMark {
  presence: string;
  rest: Record<'seen' | 'sessions' | 'self_test' | 'state', string>;
}

class HumanWatch {
  readonly subscribers = new Set<Subscriber>();
  #timer: NodeJS.Timeout | undefined;
  #cursor: Date | null = null;
  /** id@updated_at@state of every change seen inside the overlap window. */
  #seen = new Map<string, number>();
  #endpoints = new Map<string, EndpointMark>();
  #primed = false;
  #stopped = false;

  constructor(
    private readonly humanId: string,
    private readonly deps: BoardEventsDeps,
  ) {}

  start(): void {
    void this.#tick();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  async #tick(): Promise<void> {
    try {
      await this.checkSessions();
      await this.poll();
    } catch (err) {
      this.deps.log.warn({ human_id: this.humanId, err: (err as Error).message }, 'board live updates: poll failed');
    }
    this.reviewStalls();
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#tick(), this.deps.pollMs ?? BOARD_POLL_MS);
    this.#timer.unref();
  }

  /** Ends the streams whose board session is gone (signed out, replaced, expired) or not this human's. */
  async checkSessions(): Promise<void> {
    const byToken = new Map<string, Subscriber[]>();
    for (const s of this.subscribers) byToken.set(s.token, [...(byToken.get(s.token) ?? []), s]);
    await Promise.all(
      [...byToken].map(async ([token, subs]) => {
        const found = await this.deps.sessions.findWebSession(token);
        if (found && found.human.id === this.humanId) return;
        for (const s of subs) endStream(s.res);
      }),
    );
  }

  /**
   * Destroys streams that had to drop frames at every look for STALL_LIMIT_MS (or were ended and
   * never flushed). A drain between looks does not count: a socket that never reads still drains
   * into the kernel's buffers (megabytes), a look at a time, until they are full. A look with
   * nothing to send neither starts nor ends a stall while the stream still holds unsent bytes:
   * only a look whose frames it takes ends one.
   */
  reviewStalls(): void {
    const now = this.deps.clock.now().getTime();
    for (const s of this.subscribers) {
      if (s.res.destroyed) continue;
      // An ended stream that still holds bytes waits on a client that does not read.
      const unsent = s.res.writableLength;
      const quietLook = !s.droppedThisLook && !s.tookThisLook;
      const stalled = s.droppedThisLook || (quietLook && s.stalledSince !== null && unsent > 0) || (s.res.writableEnded && unsent > 0);
      s.droppedThisLook = false;
      s.tookThisLook = false;
      if (!stalled) {
        s.stalledSince = null;
        continue;
      }
      if (s.stalledSince === null) {
        s.stalledSince = now;
        this.deps.log.info({ human_id: this.humanId, unsent_bytes: s.res.writableLength }, 'board live updates: stream not reading, dropping frames');
      }
      if (now - s.stalledSince >= STALL_LIMIT_MS) {
        this.deps.log.info({ human_id: this.humanId, unsent_bytes: s.res.writableLength }, 'board live updates: stream not reading, closed');
        s.res.destroy();
      }
    }
  }

  /** One look: compares with the previous one and sends what changed (nothing on the first look). */
  async poll(): Promise<void> {
    const { clock, reads } = this.deps;
    const now = clock.now();
    const endpoints = await this.deps.endpoints.listOwn(this.humanId);
    const ids = endpoints.map((e) => e.id);
    const tests = new Map((await reads.latestSelfTests(ids)).map((t) => [t.endpoint_id, t]));
    const since = new Date((this.#cursor ?? now).getTime() - OVERLAP_MS);
    const changes = await reads.todoChangesSince(ids, since);
    const sessionCounts = await this.deps.sessionCounts(ids);
    if (this.#stopped) return;
    const out: string[] = [];
    const send = (event: string, data: unknown) => out.push(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

    for (const c of changes) {
      const key = `${c.id}@${c.updated_at.getTime()}@${c.state}`;
      if (this.#seen.has(key)) continue;
      this.#seen.set(key, c.updated_at.getTime());
      if (!this.#cursor || c.updated_at > this.#cursor) this.#cursor = c.updated_at;
      if (!this.#primed) continue;
      const type = c.state === 'pending' && c.created_at.getTime() === c.updated_at.getTime() ? 'created' : c.state;
      send('todo', { type, id: c.id, endpoint_id: c.endpoint_id, state: c.state });
    }
    // Every change committed from here on carries an updated_at of about now or later.
    if (!this.#cursor || now > this.#cursor) this.#cursor = now;
    const floor = this.#cursor.getTime() - OVERLAP_MS;
    for (const [k, at] of this.#seen) if (at < floor) this.#seen.delete(k);

    const present = new Set<string>();
    for (const e of endpoints) {
      present.add(e.id);
      const eff = effective(inputsOf(e), now);
      const counts = sessionCounts.get(e.id) ?? { sessions: 0, unheard_sessions: 0 };
      const test = tests.get(e.id);
      const presence = { endpoint_id: e.id, presence: eff.presence, source: eff.source, until: untilOnWire(eff.until) };
      const mark: EndpointMark = {
        presence: JSON.stringify(presence),
        rest: {
          seen: String(e.last_seen_at?.getTime() ?? ''),
          sessions: `${counts.sessions}/${counts.unheard_sessions}`,
          self_test: test ? `${test.test_id}/${verdictOf(test, now)}` : '',
          state: e.state,
        },
      };
      const before = this.#endpoints.get(e.id);
      this.#endpoints.set(e.id, mark);
      if (!this.#primed) continue;
      if (!before) {
        send('endpoint', { endpoint_id: e.id, what: 'state' });
        continue;
      }
      if (before.presence !== mark.presence) send('presence', presence);
      for (const what of ['seen', 'sessions', 'self_test', 'state'] as const) {
        if (before.rest[what] !== mark.rest[what]) send('endpoint', { endpoint_id: e.id, what });
      }
    }
    for (const id of this.#endpoints.keys()) if (!present.has(id)) this.#endpoints.delete(id);
    if (!this.#primed) {
      this.#primed = true;
      // Everything from here on is sent as it changes; the page re-reads once to catch up on what
      // changed between its rendering and this first look.
      send('ready', {});
    }
    this.#flush(out);
  }

  get primed(): boolean {
    return this.#primed;
  }

  /** Sends one look's frames to every stream as one write. */
  #flush(frames: string[]): void {
    if (frames.length === 0) return;
    let chunk = frames.join('');
    let bytes = Buffer.byteLength(chunk);
    // A burst bigger than a stream may hold goes as one `ready`: the page re-reads everything anyway.
    if (bytes > MAX_BUFFERED_BYTES) [chunk, bytes] = [READY_FRAME, READY_FRAME.length];
    for (const s of this.subscribers) {
      const { res } = s;
      if (res.destroyed || res.writableEnded) continue;
      if (res.writableLength + bytes > MAX_BUFFERED_BYTES) {
        // Not reading fast enough: drop, and have the page re-read once there is room.
        s.missed = true;
        s.droppedThisLook = true;
        continue;
      }
      res.write(s.missed ? READY_FRAME : chunk);
      s.missed = false;
      s.tookThisLook = true;
    }
  }
}

/** Ends a stream; one with bytes still unsent is destroyed, since its client is not reading. */
function endStream(res: ServerResponse): void {
  if (res.destroyed) return;
  if (res.writableLength > 0) res.destroy();
  else if (!res.writableEnded) res.end();
}

export class BoardEvents {
  readonly #watches = new Map<string, HumanWatch>();
  readonly #perSession = new Map<string, number>();

  constructor(private readonly deps: BoardEventsDeps) {}

  /** Whether this browser session may open one more stream. */
  canOpen(sessionKey: string): boolean {
    return (this.#perSession.get(sessionKey) ?? 0) < STREAMS_PER_SESSION;
  }

  /**
   * Streams events of `humanId` into `res` (headers already written) until it closes, the
   * browser session is signed out, replaced or expired (re-read at each look; `endAt` is its
   * 12 hours), or it stops reading for STALL_LIMIT_MS. `session.key` is the token's hash.
   */
  subscribe(humanId: string, session: { token: string; key: string }, res: ServerResponse, endAt: Date): void {
    const sessionKey = session.key;
    let watch = this.#watches.get(humanId);
    const fresh = !watch;
    watch ??= new HumanWatch(humanId, this.deps);
    this.#watches.set(humanId, watch);
    const sub: Subscriber = { res, sessionKey, token: session.token, missed: false, droppedThisLook: false, tookThisLook: false, stalledSince: null };
    watch.subscribers.add(sub);
    this.#perSession.set(sessionKey, (this.#perSession.get(sessionKey) ?? 0) + 1);
    // The one keepalive (lib/sse.ts): only to an empty buffer, so keepalives never pile up.
    const keepalive = startKeepalive(res, this.deps.keepaliveMs ?? BOARD_KEEPALIVE_MS);
    // Emptied after a write that found it full: the page re-reads at once for whatever was dropped.
    res.on('drain', () => {
      sub.tookThisLook = true;
      if (!sub.missed || res.writableEnded) return;
      sub.missed = false;
      res.write(READY_FRAME);
    });
    // A timer's delay is capped at about 24.8 days; a session lasts 12 hours.
    const expiry = setTimeout(() => endStream(res), Math.max(0, Math.min(endAt.getTime() - this.deps.clock.now().getTime(), 2 ** 31 - 1)));
    expiry.unref();
    res.once('close', () => {
      clearInterval(keepalive);
      clearTimeout(expiry);
      watch.subscribers.delete(sub);
      const n = (this.#perSession.get(sessionKey) ?? 1) - 1;
      if (n <= 0) this.#perSession.delete(sessionKey);
      else this.#perSession.set(sessionKey, n);
      if (watch.subscribers.size === 0 && this.#watches.get(humanId) === watch) {
        watch.stop();
        this.#watches.delete(humanId);
      }
    });
    if (fresh) watch.start();
    // Joining a watch that already took its first look: the baseline is now, so catch up now.
    else if (watch.primed) res.write(READY_FRAME);
  }

  /** Ends the streams of one browser session (it signed out). */
  closeSession(sessionKey: string): void {
    for (const watch of this.#watches.values()) {
      for (const sub of watch.subscribers) if (sub.sessionKey === sessionKey) endStream(sub.res);
    }
  }

  /** Ends every stream (server shutdown). */
  closeAll(): void {
    for (const watch of this.#watches.values()) {
      watch.stop();
      for (const s of watch.subscribers) endStream(s.res);
    }
    this.#watches.clear();
  }
}

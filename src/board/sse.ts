import type { ServerResponse } from 'node:http';
import type { Clock } from '../lib/clock.ts';
import type { BoardReads } from '../services/board-reads.ts';
import type { EndpointService } from '../services/endpoints.ts';
import { inputsOf } from '../services/presence.ts';
import { verdictOf } from '../services/doorbell/self-tests.ts';
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
 * the gap between rendering it and opening the stream), `todo` {type: created|claimed|done|failed|
 * pending, id, endpoint_id, state},
 * `presence` {endpoint_id, presence, source, until}, `endpoint` {endpoint_id, what: seen|sessions|
 * self_test|state}.
 */

export const BOARD_POLL_MS = 2000;
export const BOARD_KEEPALIVE_MS = SSE_KEEPALIVE_MS;
/** Changes committed slightly out of updated_at order are still seen: each look overlaps the last by this much. */
const OVERLAP_MS = 10_000;
/** Open streams one browser session may hold at once (tabs). */
export const STREAMS_PER_SESSION = 8;

export interface BoardEventsDeps {
  endpoints: Pick<EndpointService, 'listOwn'>;
  reads: Pick<BoardReads, 'latestSelfTests' | 'todoChangesSince'>;
  clock: Clock;
  log: Logger;
  /** The cluster's session counts of each endpoint. */
  sessionCounts: (endpointIds: readonly string[]) => Promise<Map<string, { sessions: number; unheard_sessions: number }>>;
  pollMs?: number;
  keepaliveMs?: number;
}

interface Subscriber {
  res: ServerResponse;
  sessionKey: string;
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
      await this.poll();
    } catch (err) {
      this.deps.log.warn({ human_id: this.humanId, err: (err as Error).message }, 'board live updates: poll failed');
    }
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#tick(), this.deps.pollMs ?? BOARD_POLL_MS);
    this.#timer.unref();
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

    for (const c of changes) {
      const key = `${c.id}@${c.updated_at.getTime()}@${c.state}`;
      if (this.#seen.has(key)) continue;
      this.#seen.set(key, c.updated_at.getTime());
      if (!this.#cursor || c.updated_at > this.#cursor) this.#cursor = c.updated_at;
      if (!this.#primed) continue;
      const type = c.state === 'pending' && c.created_at.getTime() === c.updated_at.getTime() ? 'created' : c.state;
      this.send('todo', { type, id: c.id, endpoint_id: c.endpoint_id, state: c.state });
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
        this.send('endpoint', { endpoint_id: e.id, what: 'state' });
        continue;
      }
      if (before.presence !== mark.presence) this.send('presence', presence);
      for (const what of ['seen', 'sessions', 'self_test', 'state'] as const) {
        if (before.rest[what] !== mark.rest[what]) this.send('endpoint', { endpoint_id: e.id, what });
      }
    }
    for (const id of this.#endpoints.keys()) if (!present.has(id)) this.#endpoints.delete(id);
    if (!this.#primed) {
      this.#primed = true;
      // Everything from here on is sent as it changes; the page re-reads once to catch up on what
      // changed between its rendering and this first look.
      this.send('ready', {});
    }
  }

  get primed(): boolean {
    return this.#primed;
  }

  send(event: string, data: unknown): void {
    const frame = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const s of this.subscribers) {
      if (!s.res.destroyed && !s.res.writableEnded) s.res.write(frame);
    }
  }
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
   * browser session signs out, or the session reaches `endAt` (its 12 hours).
   */
  subscribe(humanId: string, sessionKey: string, res: ServerResponse, endAt: Date): void {
    let watch = this.#watches.get(humanId);
    const fresh = !watch;
    watch ??= new HumanWatch(humanId, this.deps);
    this.#watches.set(humanId, watch);
    const sub: Subscriber = { res, sessionKey };
    watch.subscribers.add(sub);
    this.#perSession.set(sessionKey, (this.#perSession.get(sessionKey) ?? 0) + 1);
    const keepalive = startKeepalive(res, this.deps.keepaliveMs ?? BOARD_KEEPALIVE_MS);
    // A timer's delay is capped at about 24.8 days; a session lasts 12 hours.
    const expiry = setTimeout(() => res.end(), Math.max(0, Math.min(endAt.getTime() - this.deps.clock.now().getTime(), 2 ** 31 - 1)));
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
    else if (watch.primed) res.write('event: ready\ndata: {}\n\n');
  }

  /** Ends the streams of one browser session (it signed out). */
  closeSession(sessionKey: string): void {
    for (const watch of this.#watches.values()) {
      for (const sub of watch.subscribers) if (sub.sessionKey === sessionKey && !sub.res.writableEnded) sub.res.end();
    }
  }

  /** Ends every stream (server shutdown). */
  closeAll(): void {
    for (const watch of this.#watches.values()) {
      watch.stop();
      for (const s of watch.subscribers) if (!s.res.writableEnded) s.res.end();
    }
    this.#watches.clear();
  }
}

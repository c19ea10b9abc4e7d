import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { until } from '../../test/support/agents.ts';
import { humanWithToken, startTestApp } from '../../test/support/app.ts';
import { app, browser, db, signedIn, useBoardSuite } from '../../test/support/board.ts';
import { keepChurning, manyEndpoints, readStream, stalledStream } from '../../test/support/board-events.ts';
import { createLogger } from '../lib/log.ts';
import { ManualClock } from '../lib/clock.ts';
import { hashSecret } from '../lib/secrets.ts';
import { writeEventStreamHead } from '../lib/sse.ts';
import { BoardReads } from '../services/board-reads.ts';
import { EndpointService } from '../services/endpoints.ts';
import { Humans } from '../services/humans.ts';
import { consumeLoginLink, createLoginLink, WEB_SESSION_TTL_MS } from '../store/web-sessions.ts';
import { BOARD_POLL_MS, BoardEvents, MAX_BUFFERED_BYTES, STALL_LIMIT_MS } from './sse.ts';

// The board's live-update stream (/events) ends with its session, and never buffers without bound
// for a browser that stops reading.

useBoardSuite();

/** Resolves with how long `p` took, or throws after `ms`. */
async function within(p: Promise<unknown>, ms: number, what: string): Promise<number> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]);
  clearTimeout(timer);
  return Date.now() - t0;
}

const ready = (s: { events: { event: string }[] }) => s.events.some((e) => e.event === 'ready');
/** One look of the poller plus room for a loaded machine. */
const NEXT_LOOK_MS = BOARD_POLL_MS + 4000;

describe('a live-update stream ends with its board session', () => {
  it('sign-out ends it at once on this instance and at the next look on another', async () => {
    const h = await humanWithToken(db.sql);
    const b = await signedIn(h);
    const cookie = b.cookie;
    const other = await startTestApp(db.url, app.clock);
    try {
      const here = await readStream(app.url, cookie);
      const there = await readStream(other.url, cookie);
      await until(() => ready(here) && ready(there), 'both streams ready', 12_000);
      expect((await b.post('/logout', { csrf_token: b.csrfToken })).status).toBe(303);
      await within(here.ended, 1000, 'the stream on the signing-out instance');
      await within(there.ended, NEXT_LOOK_MS, 'the stream on the other instance');
      // The browser's reconnect is refused, so EventSource gives up.
      expect((await fetch(`${app.url}/events`, { headers: { cookie } })).status).toBe(401);
    } finally {
      await other.stop();
    }
  }, 30_000);

  it('signing in again ends the replaced session’s streams; the new session streams', async () => {
    const h = await humanWithToken(db.sql);
    const b = await signedIn(h);
    const old = b.cookie;
    const other = await startTestApp(db.url, app.clock);
    try {
      const here = await readStream(app.url, old);
      const there = await readStream(other.url, old);
      await until(() => ready(here) && ready(there), 'both streams ready', 12_000);
      const { token } = await createLoginLink(db.sql, h.handle, app.clock.now());
      expect((await b.post(`/login/${token}`)).status).toBe(303);
      expect(b.cookie).not.toBe(old);
      await within(here.ended, 1000, 'the replaced session’s stream here');
      await within(there.ended, NEXT_LOOK_MS, 'the replaced session’s stream on the other instance');
      const fresh = await readStream(app.url, b.cookie);
      await until(() => ready(fresh), 'the new session’s stream ready', 12_000);
      fresh.close();
    } finally {
      await other.stop();
    }
  }, 30_000);

  it('a session that expires ends its stream once the clock passes its end', async () => {
    const h = await humanWithToken(db.sql);
    const b = await signedIn(h);
    const s = await readStream(app.url, b.cookie);
    await until(() => ready(s), 'ready', 12_000);
    // Still live one minute before the end.
    app.clock.advance(WEB_SESSION_TTL_MS - 60_000);
    await new Promise((r) => setTimeout(r, BOARD_POLL_MS * 2));
    expect(await Promise.race([s.ended.then(() => 'ended'), Promise.resolve('open')])).toBe('open');
    app.clock.advance(60_001);
    await within(s.ended, NEXT_LOOK_MS, 'the expired session’s stream');
    expect((await browser().request('GET', '/events', undefined, { cookie: b.cookie })).status).toBe(401);
  }, 30_000);
});

/**
 * BoardEvents over a real HTTP server and the real services, looking every `pollMs` (the board
 * looks every 2 s, too slow to fill a socket's kernel buffers within a test).
 */
async function eventsServer(pollMs: number) {
  const clock = new ManualClock(app.clock.now());
  const lines: Record<string, any>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.includes('board live updates')) lines.push(JSON.parse(l));
      done();
    },
  });
  const log = createLogger('info', sink);
  const base = { sql: db.sql, clock, log };
  const humans = new Humans(base);
  const events = new BoardEvents({
    endpoints: new EndpointService(base),
    reads: new BoardReads(base),
    clock,
    log,
    sessions: humans,
    sessionCounts: async () => new Map(),
    pollMs,
  });
  const server = createServer((req, res) => {
    const token = /sb_session=([^;]+)/.exec(req.headers.cookie ?? '')?.[1] ?? '';
    void humans.findWebSession(token).then((found) => {
      if (!found) return void res.writeHead(401).end();
      writeEventStreamHead(res);
      events.subscribe(found.human.id, { token, key: hashSecret(token) }, res, found.expiresAt);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const signIn = async (humanHandle: string) => {
    const { token } = await createLoginLink(db.sql, humanHandle, clock.now());
    return `sb_session=${(await consumeLoginLink(db.sql, token, clock.now()))!.sessionToken}`;
  };
  const stop = async () => {
    events.closeAll();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  return { url, clock, lines, signIn, stop };
}

describe('a live-update stream that stops reading', () => {
  it('holds at most MAX_BUFFERED_BYTES unsent, re-reads once it reads again, and is closed after dropping frames for STALL_LIMIT_MS', async () => {
    const srv = await eventsServer(50);
    const h = await humanWithToken(db.sql);
    // Each look then sends two frames per endpoint, about 54 KB: under the bound, so they are sent as frames.
    await manyEndpoints(db.sql, h.id, 250);
    const cookie = await srv.signIn(h.handle);
    const churn = keepChurning(db.sql, h.id, 40);
    try {
      const stuck = await stalledStream(srv.url, cookie);
      const recovering = await stalledStream(srv.url, cookie);
      const dropping = () => srv.lines.filter((l) => l.msg.includes('dropping frames'));
      // The kernel takes megabytes first; then the process holds a look's frames and drops the rest.
      await until(() => dropping().length >= 2, 'both streams dropping frames', 60_000);
      for (const l of dropping()) expect(l.unsent_bytes).toBeLessThanOrEqual(MAX_BUFFERED_BYTES);

      // Reading again: once there is room it gets one `ready` (the baseline's was the first).
      recovering.resume();
      await until(() => recovering.readies >= 2, 'a ready once reading again', 30_000);

      // The other stays stalled, even through looks with nothing to send (the churn stops): once
      // STALL_LIMIT_MS have passed on the clock, the next look closes it.
      await churn.stop();
      expect(srv.lines.some((l) => l.msg.includes('closed'))).toBe(false);
      srv.clock.advance(STALL_LIMIT_MS);
      await until(() => srv.lines.some((l) => l.msg.includes('closed')), 'the stalled stream closed', 30_000);
      const closed = srv.lines.filter((l) => l.msg.includes('closed'));
      expect(closed).toHaveLength(1);
      expect(closed[0]!.unsent_bytes).toBeLessThanOrEqual(MAX_BUFFERED_BYTES);
      stuck.resume();
      await within(stuck.closed, 30_000, 'the stalled socket closed');
      // The reading one is still open and still gets frames.
      const before = recovering.bytes;
      const again = keepChurning(db.sql, h.id, 40);
      try {
        await until(() => recovering.bytes > before + 100_000, 'frames for the reading stream', 10_000);
      } finally {
        await again.stop();
      }
      recovering.socket.destroy();
    } finally {
      await churn.stop();
      await srv.stop();
    }
  }, 120_000);
});

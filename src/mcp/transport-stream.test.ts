import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { SessionRegistry, type Session } from '../sessions/registry.ts';
import {
  app,
  endsWithin,
  expectRpcError,
  initialize,
  mcp,
  mustSession,
  openSse,
  openStream,
  openStreams,
  rawRequest,
  sessionById,
  sleep,
  sql,
  until,
  useTransportSuite,
  vend,
} from '../../test/support/mcp-transport.ts';

// MCP transport conformance: the GET notification stream of a session.

useTransportSuite();

const frame = (msg: unknown) => `event: message\ndata: ${JSON.stringify(msg)}\n\n`;

describe('GET stream', () => {
  it('validates Accept and the session: 406, 400, 404, and another endpoint\'s session 404', async () => {
    const ep = await vend();
    const other = await vend();
    const { sid } = await initialize(ep);
    const { sid: otherSid } = await initialize(other);
    expectRpcError(await mcp(ep, 'GET', { sid, headers: { accept: 'application/json' } }), 406, -32000);
    expectRpcError(await rawRequest(ep.mcp_url, 'GET', { authorization: `Bearer ${ep.token}`, 'mcp-session-id': sid }), 406, -32000);
    expectRpcError(await mcp(ep, 'GET', {}), 400, -32000);
    expectRpcError(await mcp(ep, 'GET', { sid: 'unknown-session' }), 404, -32001);
    expectRpcError(await mcp(ep, 'GET', { sid: otherSid }), 404, -32001);
    expect(mustSession(sid).stream).toBeNull();
    expect(mustSession(otherSid).stream).toBeNull();
    expect(app.services.sessions.hasOpenStream(ep.id)).toBe(false);
  });

  it('opens an SSE stream that carries written messages; no_stream before it opens and after the client aborts', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const session = mustSession(sid);
    expect(app.services.sessions.write(session, { jsonrpc: '2.0', method: 'early' })).toBe('no_stream');

    const stream = await openStream(ep, sid);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(stream.headers['cache-control']).toMatch(/^no-cache/);
    expect(stream.headers['x-content-type-options']).toBe('nosniff');
    expect(stream.headers['x-accel-buffering']).toBe('no');
    expect(stream.headers['mcp-session-id']).toBe(sid);
    expect(app.services.sessions.hasOpenStream(ep.id)).toBe(true);

    const msg = { jsonrpc: '2.0', method: 'notifications/claude/channel', params: { content: 'ding', meta: { todo_id: 'td_x' } } };
    expect(app.services.sessions.write(session, msg)).toBe('written');
    await stream.waitFor((t) => t.includes(frame(msg)), 'the message frame');
    const second = { jsonrpc: '2.0', method: 'notifications/claude/channel', params: { content: 'dong' } };
    expect(app.services.sessions.write(session, second)).toBe('written');
    const text = await stream.waitFor((t) => t.includes(frame(second)), 'the second frame');
    expect(text.indexOf(frame(msg))).toBeLessThan(text.indexOf(frame(second)));
    // Nothing was written before the stream opened.
    expect(text).not.toContain('early');

    stream.abort();
    await until(() => session.stream === null, 'the server to observe the close');
    expect(app.services.sessions.write(session, msg)).toBe('no_stream');
    expect(app.services.sessions.hasOpenStream(ep.id)).toBe(false);
    // The session itself survives a dropped stream: the client may reconnect.
    expect(sessionById(sid)).toBe(session);
    const again = await openStream(ep, sid);
    expect(app.services.sessions.write(session, second)).toBe('written');
    await again.waitFor((t) => t.includes(frame(second)), 'the frame on the reopened stream');
  });

  it('a GET whose client went away before the stream was attached leaves no open stream behind', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const session = mustSession(sid);
    // Past the credential cache and the last_seen_at throttle, so the GET's authentication updates the
    // endpoint row; a row lock held here then parks the request between arrival and handler.
    app.clock.advance(5 * 60_000);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = sql.begin(async (tx) => {
      await tx`select id from endpoints where id = ${ep.id} for update`;
      locked();
      await gate;
    });
    try {
      await isLocked;
      const req = http.request(ep.mcp_url, {
        method: 'GET',
        agent: false,
        headers: { authorization: `Bearer ${ep.token}`, accept: 'text/event-stream', 'mcp-session-id': sid },
      });
      req.on('error', () => undefined);
      req.end();
      const waiting = async () =>
        (await sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)[0]!.n;
      const deadline = Date.now() + 3000;
      while ((await waiting()) === 0) {
        if (Date.now() > deadline) throw new Error('the GET never reached the database');
        await sleep(10);
      }
      req.destroy(); // the client gives up while the server is still authenticating
      await sleep(100);
    } finally {
      release();
      await holder;
    }
    // The handler now runs for a response whose connection is gone: it must not count as a stream.
    // Wait for the authentication's stamp to land, then for the handler to have run.
    const stampedAt = app.clock.now().toISOString();
    const seen = async () => (await sql<{ t: Date | null }[]>`select last_seen_at as t from endpoints where id = ${ep.id}`)[0]!.t?.toISOString();
    const stampDeadline = Date.now() + 3000;
    while ((await seen()) !== stampedAt) {
      if (Date.now() > stampDeadline) throw new Error('the parked GET never finished authenticating');
      await sleep(10);
    }
    await sleep(150);
    expect(session.stream).toBeNull();
    expect(app.services.sessions.hasOpenStream(ep.id)).toBe(false);
    expect(app.services.sessions.write(session, { jsonrpc: '2.0', method: 'x' })).toBe('no_stream');
    // A real reconnect afterwards works as usual.
    const live = await openStream(ep, sid);
    const msg = { jsonrpc: '2.0', method: 'notifications/message', params: { after: 'race' } };
    expect(app.services.sessions.write(session, msg)).toBe('written');
    await live.waitFor((t) => t.includes(frame(msg)), 'the frame on the reconnected stream');
    live.abort();
    await until(() => session.stream === null, 'the reconnected stream to close');
    // ...and with no stream the idle janitor can still retire the session.
    app.clock.advance(31 * 60_000);
    await app.services.directory.expireIdle();
    expect(sessionById(sid)).toBeUndefined();
    expect(await app.services.directory.sessionsOf(ep.id)).toEqual([]);
  });

  it('newest GET wins: a second GET on the session ends the first, and writes go to the second', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const session = mustSession(sid);
    const first = await openStream(ep, sid);
    const second = await openStream(ep, sid);
    expect(await endsWithin(first, 3000)).toBe(true);
    expect(second.isEnded()).toBe(false);

    const msg = { jsonrpc: '2.0', method: 'notifications/message', params: { n: 1 } };
    expect(app.services.sessions.write(session, msg)).toBe('written');
    await second.waitFor((t) => t.includes(frame(msg)), 'the frame on the newest stream');
    expect(first.received()).not.toContain(JSON.stringify(msg));
    expect(app.services.sessions.hasOpenStream(ep.id)).toBe(true);
  });

  it('fires endpointStreamAttached on the endpoint\'s 0→1 open stream only', async () => {
    const ep = await vend();
    const { sid: a } = await initialize(ep);
    const { sid: b } = await initialize(ep);
    const fired: string[] = [];
    const opened: string[] = [];
    const onAttached = (endpointId: string, s: Session) => {
      if (endpointId === ep.id) fired.push(s.id);
    };
    const onOpened = (s: Session) => {
      if (s.endpoint.id === ep.id) opened.push(s.id);
    };
    app.services.sessions.on('endpointStreamAttached', onAttached);
    app.services.sessions.on('streamOpened', onOpened);
    try {
      const sa = await openStream(ep, a);
      expect(fired).toEqual([a]);
      const sb = await openStream(ep, b); // a second concurrent session's stream: 1 → 2
      expect(fired).toEqual([a]);
      expect(opened).toEqual([a, b]);

      sa.abort(); // 2 → 1: b still holds the endpoint open
      await until(() => mustSession(a).stream === null, 'a closed');
      await openStream(ep, a); // 1 → 2
      expect(fired).toEqual([a]);

      for (const s of openStreams) s.abort();
      await until(() => !app.services.sessions.hasOpenStream(ep.id), 'every stream of the endpoint closed');
      expect(sb.isEnded() || mustSession(b).stream === null).toBe(true);
      await openStream(ep, b); // 0 → 1 again
      expect(fired).toEqual([a, b]);
    } finally {
      app.services.sessions.off('endpointStreamAttached', onAttached);
      app.services.sessions.off('streamOpened', onOpened);
    }
  });

  it('sends a keepalive comment at the registry\'s interval', async () => {
    const registry = new SessionRegistry(new ManualClock(), { keepaliveMs: 50 });
    const session = registry.create({ id: 'ep-keepalive', slug: 'keepalive', agentId: 'agent', queues: ['q'], verbs: [], webhookMax: 1 }, {
      protocolVersion: '2025-11-25',
      clientInfo: { name: 'test', version: '1' },
    });
    const server = http.createServer((_req, res) => registry.attachStream(session, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const stream = await openSse(`http://127.0.0.1:${port}/`, { accept: 'text/event-stream' });
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
      // Two of them: it repeats, not just once.
      const text = await stream.waitFor((t) => t.split(': keepalive\n\n').length > 2, 'two keepalive comments', 2000);
      expect(text.startsWith(': keepalive\n\n')).toBe(true);
      expect(text.replaceAll(': keepalive\n\n', '')).toBe('');
      // Closing the session ends the stream and stops the timer.
      registry.close(session, 'test over');
      expect(await endsWithin(stream, 2000)).toBe(true);
      expect(session.stream).toBeNull();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
import { describe, expect, it } from 'vitest';
import { startTestApp } from '../../test/support/app.ts';
import { revokeOwnEndpoint } from '../store/endpoints.ts';
import {
  app,
  db,
  endsWithin,
  expectRpcError,
  expectUnauthorized,
  initialize,
  initParams,
  mcp,
  openStream,
  operatorId,
  request,
  revokeEndpoint,
  rpc,
  sessionById,
  sleep,
  sql,
  until,
  useTransportSuite,
  vend,
  type Vended,
} from '../../test/support/mcp-transport.ts';

// MCP transport conformance: how a session ends (DELETE, idle expiry, revocation, shutdown).

useTransportSuite();

describe('DELETE and other methods', () => {
  it('DELETE ends the session (204) and its stream; later requests with the id get 404', async () => {
    const ep = await vend();
    const other = await vend();
    const { sid } = await initialize(ep);
    const stream = await openStream(ep, sid);

    // Another endpoint cannot delete it.
    expectRpcError(await mcp(other, 'DELETE', { sid }), 404, -32001);
    expect(sessionById(sid)).toBeDefined();

    const res = await mcp(ep, 'DELETE', { sid });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(sessionById(sid)).toBeUndefined();
    expect(await endsWithin(stream, 3000)).toBe(true);
    expect(app.services.sessions.hasOpenStream(ep.id)).toBe(false);

    expectRpcError(await mcp(ep, 'POST', { body: request('ping'), sid }), 404, -32001);
    expectRpcError(await mcp(ep, 'GET', { sid }), 404, -32001);
    expectRpcError(await mcp(ep, 'DELETE', { sid }), 404, -32001);
    expectRpcError(await mcp(ep, 'DELETE', {}), 400, -32000);
  });

  it('answers PUT and PATCH with 405 and Allow', async () => {
    const ep = await vend();
    for (const method of ['PUT', 'PATCH']) {
      const res = await mcp(ep, method, { body: request('ping'), headers: { 'content-type': 'application/json' } });
      expectRpcError(res, 405, -32000);
      const allow = (res.headers.get('allow') ?? '').split(',').map((m) => m.trim()).sort();
      expect(allow, method).toEqual(['DELETE', 'GET', 'POST']);
    }
  });
});

describe('idle expiry', () => {
  it('ends a session with no stream and no call for 5 minutes across the cluster, streamed once or not; not one with an open stream or one used 4 minutes ago', async () => {
    const ep = await vend();
    const { sid: idle } = await initialize(ep);
    const { sid: streaming } = await initialize(ep);
    const { sid: recent } = await initialize(ep);
    await openStream(ep, streaming);
    // `idle` had a stream once (it closed, as when a proxy or an inspector exits without DELETE).
    const once = await openStream(ep, idle);
    await until(async () => (await app.services.directory.sessionsOf(ep.id)).some((s) => s.id === idle && s.stream_instance !== null), 'its stream named');
    once.abort();
    await until(async () => (await app.services.directory.sessionsOf(ep.id)).some((s) => s.id === idle && s.stream_instance === null), 'its stream gone');
    await app.services.directory.flush();

    app.clock.advance(60_000);
    expect((await rpc(ep, recent, 'ping')).result).toEqual({}); // touched at t+1 min
    app.clock.advance(4 * 60_000); // idle: 5 min; recent: 4 min; streaming: open
    await app.services.directory.flush();

    // Dead before the janitor runs: no longer counted or listed as live.
    const live = async () => (await app.services.directory.sessionsOf(ep.id)).map((s) => s.id);
    expect(await live()).toEqual(expect.arrayContaining([streaming, recent]));
    expect(await live()).not.toContain(idle);
    expect((await app.services.directory.countsOf([ep.id])).get(ep.id)).toMatchObject({ sessions: 2, streams: 1, idleEnded: 0 });

    expect(await app.services.directory.expireIdle()).toBe(1);
    expect(sessionById(idle)).toBeUndefined();
    expect((await db.sql`select 1 from mcp_sessions where id = ${idle}`).length).toBe(0);
    expectRpcError(await mcp(ep, 'POST', { body: request('ping'), sid: idle }), 404, -32001);
    expect((await app.services.directory.countsOf([ep.id])).get(ep.id)).toMatchObject({ sessions: 2, idleEnded: 1 });

    // That 404 is no request on any live session; a minute later the recent one has idled out too.
    app.clock.advance(60_000);
    await app.services.directory.expireIdle();
    expect(await live()).toEqual([streaming]);
    expect(sessionById(recent)).toBeUndefined();
    expect((await rpc(ep, streaming, 'ping')).result).toEqual({});
    expect((await app.services.directory.countsOf([ep.id])).get(ep.id)).toMatchObject({ sessions: 1, streams: 1, idleEnded: 2 });
  });

  it('ends a session that never opened a stream after 5 idle minutes, but not one used 4 minutes ago', async () => {
    const ep = await vend();
    const { sid: never } = await initialize(ep);
    const { sid: used } = await initialize(ep);
    app.clock.advance(60_000);
    expect((await rpc(ep, used, 'ping')).result).toEqual({});
    app.clock.advance(4 * 60_000);
    const live = async () => (await app.services.directory.sessionsOf(ep.id)).map((s) => s.id);
    await app.services.directory.expireIdle();
    expect(await live()).toEqual([used]);
    expectRpcError(await mcp(ep, 'POST', { body: request('ping'), sid: never }), 404, -32001);
    app.clock.advance(60_000);
    await app.services.directory.expireIdle();
    expect(await live()).toEqual([]);
  });
});

describe('revocation', () => {
  it('ends open streams and sessions promptly, and the credential is refused afterwards', async () => {
    const ep = await vend();
    const bystander = await vend();
    const { sid } = await initialize(ep);
    const { sid: quiet } = await initialize(ep);
    const { sid: otherSid } = await initialize(bystander);
    const stream = await openStream(ep, sid);
    const otherStream = await openStream(bystander, otherSid);

    await revokeEndpoint(ep);
    expect(await endsWithin(stream, 3000)).toBe(true);
    await until(() => app.services.sessions.sessionsOf(ep.id).length === 0, 'the sessions to be closed');
    expect(sessionById(quiet)).toBeUndefined();
    expect(app.services.sessions.hasOpenStream(ep.id)).toBe(false);

    expectUnauthorized(await mcp(ep, 'POST', { body: request('ping'), sid }));
    expectUnauthorized(await mcp(ep, 'POST', { body: request('initialize', initParams()) }));
    expectUnauthorized(await mcp(ep, 'GET', { sid }));

    // Another endpoint is not affected.
    expect(otherStream.isEnded()).toBe(false);
    expect((await rpc(bystander, otherSid, 'ping')).result).toEqual({});
  });

  it('reacts to a revocation committed elsewhere (another instance) through LISTEN endpoint_revoked alone', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const stream = await openStream(ep, sid);
    expect((await rpc(ep, sid, 'ping')).result).toEqual({});

    // Straight through the store, as another instance would: this app's API never sees it.
    await revokeOwnEndpoint(sql, operatorId, ep.slug, app.clock.now());
    expect(await endsWithin(stream, 3000)).toBe(true);
    await until(() => app.services.sessions.sessionsOf(ep.id).length === 0, 'the sessions to be closed');
    // No cached credential outlives the revocation.
    expectUnauthorized(await mcp(ep, 'POST', { body: request('ping'), sid }));
    expectUnauthorized(await mcp(ep, 'POST', { body: request('initialize', initParams()) }));
  });
});

describe('shutdown', () => {
  it('app.stop() ends open streams and closes every session', async () => {
    const second = await startTestApp(db.url);
    let stopped = false;
    try {
      const ep = await vend();
      const onSecond: Vended = { ...ep, mcp_url: `${second.url}/mcp/${ep.slug}` };
      const { sid } = await initialize(onSecond);
      expect(second.services.sessions.size).toBe(1);
      const stream = await openStream(onSecond, sid);
      expect(second.services.sessions.hasOpenStream(ep.id)).toBe(true);

      const stopping = second.stop().then(() => (stopped = true));
      expect(await endsWithin(stream, 3000)).toBe(true);
      await Promise.race([stopping, sleep(5000)]);
      expect(stopped).toBe(true);
      expect(second.services.sessions.size).toBe(0);
      // The main app was never involved.
      expect(app.services.sessions.sessionsOf(ep.id)).toEqual([]);
    } finally {
      if (!stopped) await second.stop();
    }
  });
});
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { humanWithToken } from '../../test/support/app.ts';
import {
  ACCEPT_BOTH,
  app,
  expectRpcError,
  expectUnauthorized,
  initialize,
  initParams,
  mcp,
  mustSession,
  rawRequest,
  request,
  revokeEndpoint,
  rpc,
  sql,
  useTransportSuite,
  vend,
} from '../../test/support/mcp-transport.ts';

// MCP transport conformance: who may reach /mcp/{slug} (bearer, host guard, rate limit).

useTransportSuite();

describe('authentication', () => {
  it('refuses every bad credential with 401, the realm and a JSON-RPC error, and creates no session', async () => {
    const ep = await vend();
    const other = await vend();
    const human = await humanWithToken(sql);
    const revoked = await vend();
    // The revoked credential worked before the revocation, so its 401 is the revocation's doing.
    await initialize(revoked);
    await revokeEndpoint(revoked);
    // Likewise the other endpoint's credential is good on its own URL.
    await initialize(other);
    const before = app.services.sessions.size;

    const attempts: [string, string | null][] = [
      ['no bearer', null],
      ['an unknown sbk_ credential', `sbk_${randomBytes(32).toString('base64url')}`],
      ["a human's sbp_ token", human.token],
      ["a revoked endpoint's credential", revoked.token],
      ["another endpoint's valid credential", other.token],
    ];
    const bodies = new Set<string>();
    for (const [label, token] of attempts) {
      const res = await mcp(ep, 'POST', { body: request('initialize', initParams()), token });
      expect(res.status, label).toBe(401);
      expectUnauthorized(res);
      expect(res.headers.get('mcp-session-id'), label).toBeNull();
      bodies.add(res.text);
    }
    // The revoked endpoint's own URL refuses it too.
    expectUnauthorized(await mcp(revoked, 'POST', { body: request('initialize', initParams()) }));
    // Other methods are guarded the same way.
    expectUnauthorized(await mcp(ep, 'GET', { token: null }));
    expectUnauthorized(await mcp(ep, 'DELETE', { token: other.token, sid: 'x' }));
    // One answer whatever the reason.
    expect(bodies.size).toBe(1);
    expect(app.services.sessions.size).toBe(before);
    expect(app.services.sessions.sessionsOf(ep.id)).toEqual([]);
  });

  it('stamps last_seen_at on a successful request, not on a refused one', async () => {
    const ep = await vend();
    expect(ep.last_seen_at).toBeNull();
    const seen = async () => (await sql<{ last_seen_at: Date | null }[]>`select last_seen_at from endpoints where id = ${ep.id}`)[0]!.last_seen_at;

    expectUnauthorized(await mcp(ep, 'POST', { body: request('initialize', initParams()), token: null }));
    expect(await seen()).toBeNull();

    await initialize(ep);
    expect((await seen())?.toISOString()).toBe(app.clock.now().toISOString());
  });
});

describe('rate limit', () => {
  it('allows 40 requests per endpoint with the clock frozen, then 429 with Retry-After; another endpoint is unaffected', async () => {
    const ep = await vend();
    const other = await vend();
    const { sid } = await initialize(ep); // 1
    for (let i = 2; i <= 40; i++) {
      const res = await mcp(ep, 'POST', { body: request('ping'), sid });
      expect(res.status, `request ${i}`).toBe(200);
    }
    const limited = await mcp(ep, 'POST', { body: request('ping'), sid });
    expectRpcError(limited, 429, -32000);
    const retryAfter = limited.headers.get('retry-after');
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    // Stream (re)establishment draws on the same bucket.
    expectRpcError(await mcp(ep, 'GET', { sid }), 429, -32000);
    expect(mustSession(sid).stream).toBeNull();

    const { sid: otherSid } = await initialize(other);
    expect((await rpc(other, otherSid, 'ping')).result).toEqual({});

    // After Retry-After seconds the endpoint may go on.
    app.clock.advance(Number(retryAfter) * 1000);
    expect((await rpc(ep, sid, 'ping')).result).toEqual({});
  });
});

describe('host guard', () => {
  it('refuses a foreign Host on the loopback-bound server with 403, and accepts loopback names', async () => {
    const ep = await vend();
    const port = new URL(app.url).port;
    const body = JSON.stringify(request('initialize', initParams()));
    const headers = {
      authorization: `Bearer ${ep.token}`,
      'content-type': 'application/json',
      accept: ACCEPT_BOTH,
    };
    const before = app.services.sessions.size;
    for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1.evil.example:${port}`]) {
      const res = await rawRequest(ep.mcp_url, 'POST', { ...headers, host }, body);
      expect(res.status, host).toBe(403);
      expectRpcError(res, 403, -32000);
      expect(res.headers.get('mcp-session-id')).toBeNull();
    }
    expect(app.services.sessions.size).toBe(before);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      const res = await rawRequest(ep.mcp_url, 'POST', { ...headers, host }, body);
      expect(res.status, host).toBe(200);
      expect(res.headers.get('mcp-session-id')).toBeTruthy();
    }
  });
});
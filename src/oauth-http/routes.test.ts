import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { alice, app, bob, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';
import { createLoginLink } from '../store/web-sessions.ts';

// The OAuth routes of issue 38 over real HTTP, driven by hand (the SDK and oauth4webapi drive them
// in test/oauth-*.test.ts): metadata, registration's refusals, the consent page and the exchange.

useBoardSuite();

const REDIRECT = 'http://127.0.0.1:9/callback';

async function post(path: string, body: string, type: string) {
  const res = await fetch(`${app.url}${path}`, { method: 'POST', headers: { 'content-type': type }, body });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, unknown> };
}
const register = (meta: Record<string, unknown>) => post('/oauth/register', JSON.stringify(meta), 'application/json');
const token = (form: Record<string, string>) => post('/oauth/token', new URLSearchParams(form).toString(), 'application/x-www-form-urlencoded');

function pkce() {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

describe('OAuth metadata', () => {
  it('advertises the authorization server and each protected resource', async () => {
    const as = (await (await fetch(`${app.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(as).toMatchObject({
      issuer: app.baseUrl,
      authorization_endpoint: `${app.baseUrl}/oauth/authorize`,
      token_endpoint: `${app.baseUrl}/oauth/token`,
      registration_endpoint: `${app.baseUrl}/oauth/register`,
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
    });
    expect(await (await fetch(`${app.url}/.well-known/oauth-protected-resource/mcp/some-slug`)).json()).toMatchObject({
      resource: `${app.baseUrl}/mcp/some-slug`,
      authorization_servers: [app.baseUrl],
    });
    expect(await (await fetch(`${app.url}/.well-known/oauth-protected-resource/api`)).json()).toMatchObject({ resource: `${app.baseUrl}/api` });
    expect((await fetch(`${app.url}/.well-known/oauth-protected-resource/mcp/Not_A_Slug`)).status).toBe(404);
  });
});

describe('POST /oauth/register', () => {
  it.each([
    [{ redirect_uris: ['http://example.com/cb'] }, 'invalid_redirect_uri', /loopback/],
    [{ redirect_uris: ['https://example.com/cb#x'] }, 'invalid_redirect_uri', /fragment/],
    [{ redirect_uris: [] }, 'invalid_redirect_uri', /at least one/],
    [{ redirect_uris: ['myapp:/cb'] }, 'invalid_redirect_uri', /reverse domain/],
    [{ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata', /public clients/],
    [{ redirect_uris: [REDIRECT], grant_types: ['client_credentials'] }, 'invalid_client_metadata', /grant_types/],
  ])('refuses %j with %s', async (meta, error, why) => {
    const res = await register(meta);
    expect(res.status).toBe(400);
    expect(res.json.error).toBe(error);
    expect(res.json.error_description).toMatch(why);
  });

  it('registers a public client with loopback, https and private-use redirects', async () => {
    const res = await register({ client_name: 'tester', redirect_uris: [REDIRECT, 'https://app.example/cb', 'com.example.app:/cb'] });
    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.json).toMatchObject({ client_id: expect.stringMatching(/^[0-9a-f]{32}$/), token_endpoint_auth_method: 'none', client_name: 'tester' });
  });
});

describe('limits on the public OAuth routes', () => {
  it('registration and the token endpoint share a per-address budget of 20, then 429 with Retry-After; a body over 64 KiB is 413', async () => {
    const big = await register({ client_name: 'x'.repeat(70 * 1024), redirect_uris: [REDIRECT] });
    expect(big.status).toBe(413);
    expect(big.json.error).toBe('invalid_request');
    const answers: number[] = [];
    for (let i = 0; i < 12; i++) answers.push((await register({ redirect_uris: [REDIRECT] })).status);
    for (let i = 0; i < 12; i++) answers.push((await token({ grant_type: 'refresh_token', refresh_token: 'sbr_x', client_id: 'c' })).status);
    // The clock is frozen within a test: the burst is all there is.
    expect(answers.slice(0, 20).every((s) => s !== 429)).toBe(true);
    expect(answers.slice(20)).toEqual([429, 429, 429, 429]);
    const refused = await token({ grant_type: 'refresh_token', refresh_token: 'sbr_x', client_id: 'c' });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('authorize, consent and token', () => {
  it('an endpoint grant: consent names the endpoint, the code buys a token that opens only that MCP URL', async () => {
    const ep = await vend(alice, 'oauth-agent', ['reviews']);
    const other = await vend(alice, 'other-agent', ['reviews']);
    const { json: client } = await register({ client_name: 'by-url', redirect_uris: [REDIRECT] });
    const { verifier, challenge } = pkce();
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id as string,
      redirect_uri: REDIRECT,
      state: 'st-1',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: `${app.baseUrl}/mcp/${ep.slug}`,
    });
    // Anonymous: sent to sign in, then brought back to the consent page.
    const anon = await fetch(`${app.url}/oauth/authorize?${query}`, { redirect: 'manual' });
    expect(anon.status).toBe(303);
    expect(anon.headers.get('location')).toBe('/login');
    expect(anon.headers.get('set-cookie')).toContain(`sb_return_to=${encodeURIComponent(`/oauth/authorize?${query}`)}`);

    const b = await signedIn(alice);
    const page = await b.get(`/oauth/authorize?${query}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('by-url');
    expect(page.text).toContain(ep.slug);
    expect(page.text).not.toContain('clock_in');
    expect(page.headers.get('content-security-policy')).toContain("form-action 'self' http://127.0.0.1:9");
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.text)![1]!;

    const approved = await b.post('/oauth/authorize', { ...Object.fromEntries(query), csrf_token: csrf, decision: 'approve' });
    expect(approved.status).toBe(303);
    const back = new URL(approved.headers.get('location')!);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(back.searchParams.get('state')).toBe('st-1');
    expect(back.searchParams.get('iss')).toBe(app.baseUrl);
    const code = back.searchParams.get('code')!;

    const issued = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id as string, redirect_uri: REDIRECT });
    expect(issued.status).toBe(200);
    expect(issued.headers.get('cache-control')).toBe('no-store');
    expect(issued.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, access_token: expect.stringMatching(/^sba_/), refresh_token: expect.stringMatching(/^sbr_/) });

    const init = (slug: string) =>
      fetch(`${app.url}/mcp/${slug}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${issued.json.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
      });
    expect((await init(ep.slug)).status).toBe(200);
    const elsewhere = await init(other.slug);
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.headers.get('www-authenticate')).toBe(`Bearer realm="switchboard", resource_metadata="${app.baseUrl}/.well-known/oauth-protected-resource/mcp/${other.slug}"`);
    const api = await fetch(`${app.url}/api/v1/me`, { headers: { authorization: `Bearer ${issued.json.access_token}` } });
    expect(api.status).toBe(401);

    // The grant is listed on the endpoint, and a reused code revokes it.
    const listed = await fetch(`${app.url}/api/v1/endpoints/${ep.slug}/grants`, { headers: { authorization: `Bearer ${alice.token}` } });
    expect(((await listed.json()) as { grants: { client_name: string }[] }).grants.map((g) => g.client_name)).toEqual(['by-url']);
    const again = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id as string });
    expect(again.status).toBe(400);
    expect(again.json.error).toBe('invalid_grant');
    expect((await init(ep.slug)).status).toBe(401);
  });

  it('refuses a grant for another human\'s endpoint by redirecting with invalid_target, and issues no code', async () => {
    const bobs = await vend(bob, 'bobs-agent');
    const { json: client } = await register({ redirect_uris: [REDIRECT] });
    const { challenge } = pkce();
    const b = await signedIn(alice);
    const res = await b.get(
      `/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: client.client_id as string, redirect_uri: REDIRECT, state: 's', code_challenge: challenge, code_challenge_method: 'S256', resource: `${app.baseUrl}/mcp/${bobs.slug}` })}`,
    );
    expect(res.status).toBe(303);
    const back = new URL(res.headers.get('location')!);
    expect(back.searchParams.get('error')).toBe('invalid_target');
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('an API grant acts as the human on /api/v1 and opens no MCP URL', async () => {
    const ep = await vend(alice, 'api-grant-agent');
    const { json: client } = await register({ client_name: 'cli', redirect_uris: [REDIRECT] });
    const { verifier, challenge } = pkce();
    const fields = { response_type: 'code', client_id: client.client_id as string, redirect_uri: REDIRECT, state: 'x', code_challenge: challenge, code_challenge_method: 'S256', resource: `${app.baseUrl}/api` };
    const b = await signedIn(alice);
    const page = await b.get(`/oauth/authorize?${new URLSearchParams(fields)}`);
    expect(page.text).toContain('acts as you');
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.text)![1]!;
    const approved = await b.post('/oauth/authorize', { ...fields, csrf_token: csrf, decision: 'approve' });
    const code = new URL(approved.headers.get('location')!).searchParams.get('code')!;
    const issued = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id as string });
    const me = await fetch(`${app.url}/api/v1/me`, { headers: { authorization: `Bearer ${issued.json.access_token}` } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { handle: string }).handle).toBe(alice.handle);
    const mcp = await fetch(`${app.url}/mcp/${ep.slug}`, { method: 'POST', headers: { authorization: `Bearer ${issued.json.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    expect(mcp.status).toBe(401);
  });
});

describe('consent after sign-in, and grants on the board', () => {
  /** Approves a grant for `slug` as alice through the board; the access token. */
  async function grantFor(slug: string, clientName: string): Promise<string> {
    const { json: client } = await register({ client_name: clientName, redirect_uris: [REDIRECT] });
    const { verifier, challenge } = pkce();
    const fields = { response_type: 'code', client_id: client.client_id as string, redirect_uri: REDIRECT, state: 's', code_challenge: challenge, code_challenge_method: 'S256', resource: `${app.baseUrl}/mcp/${slug}` };
    const b = await signedIn(alice);
    const page = await b.get(`/oauth/authorize?${new URLSearchParams(fields)}`);
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.text)![1]!;
    const approved = await b.post('/oauth/authorize', { ...fields, csrf_token: csrf, decision: 'approve' });
    const code = new URL(approved.headers.get('location')!).searchParams.get('code')!;
    return (await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id as string })).json.access_token as string;
  }

  it('a sign-in by link returns to the consent page it interrupted, not to the front page', async () => {
    const ep = await vend(alice, 'return-agent');
    const { json: client } = await register({ redirect_uris: [REDIRECT] });
    const consent = `/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: client.client_id as string, redirect_uri: REDIRECT, code_challenge: pkce().challenge, code_challenge_method: 'S256', resource: `${app.baseUrl}/mcp/${ep.slug}` })}`;
    const anon = await fetch(`${app.url}${consent}`, { redirect: 'manual' });
    const returnCookie = /sb_return_to=[^;]+/.exec(anon.headers.get('set-cookie') ?? '')![0];
    const { token: link } = await createLoginLink(app.sql, alice.handle, app.clock.now());
    const signedInRes = await fetch(`${app.url}/login/${link}`, { method: 'POST', redirect: 'manual', headers: { cookie: returnCookie, origin: app.url } });
    expect(signedInRes.status).toBe(303);
    expect(signedInRes.headers.get('location')).toBe(consent);
  });

  it('lists each grant on the endpoint\'s card with Revoke; revoking ends its token at once', async () => {
    const ep = await vend(alice, 'grants-agent');
    const access = await grantFor(ep.slug, 'listed-client');
    const b = await signedIn(alice);
    const page = await b.get(`/endpoints/${ep.id}`);
    const grantId = /id="grant-([0-9a-f-]{36})"/.exec(page.text)![1]!;
    expect(page.text).toContain('listed-client');
    const front = await b.get('/');
    expect(front.text).toContain(`id="grant-${grantId}"`);
    const revoked = await b.post(`/endpoints/${ep.id}/grants/${grantId}/revoke`, { csrf_token: b.csrfToken, return: 'card' });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get('location')).toBe(`/endpoints/${ep.id}`);
    expect((await b.get(`/endpoints/${ep.id}`)).text).not.toContain('listed-client');
    const me = await fetch(`${app.url}/mcp/${ep.slug}`, { method: 'POST', headers: { authorization: `Bearer ${access}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    expect(me.status).toBe(401);
  });

  it('revoking the endpoint revokes its grants in the same transaction', async () => {
    const ep = await vend(alice, 'revoked-with-grants');
    await grantFor(ep.slug, 'doomed');
    const revoke = await fetch(`${app.url}/api/v1/endpoints/${ep.slug}/revoke`, { method: 'POST', headers: { authorization: `Bearer ${alice.token}` } });
    expect(revoke.status).toBe(200);
    const [row] = await app.sql`select count(*)::int as live from oauth_grants where endpoint_id = ${ep.id} and revoked_at is null`;
    expect(row!.live).toBe(0);
  });
});

describe('revoking one grant', () => {
  it('ends the open stream of the session its token opened, and leaves an sbk_ session of the same endpoint alone', async () => {
    const ep = await vend(alice, 'stream-grant');
    const access = await accessTokenFor(ep.slug);
    const oauthStream = await openStream(ep.slug, access);
    const keyStream = await openStream(ep.slug, ep.token);
    const grants = (await (await fetch(`${app.url}/api/v1/endpoints/${ep.slug}/grants`, { headers: { authorization: `Bearer ${alice.token}` } })).json()) as { grants: { id: string }[] };
    const del = await fetch(`${app.url}/api/v1/endpoints/${ep.slug}/grants/${grants.grants[0]!.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${alice.token}` } });
    expect(del.status).toBe(200);
    // The OAuth session's stream ends; reading drains any keepalive first.
    for (;;) {
      const { done } = await oauthStream.reader.read();
      if (done) break;
    }
    expect(app.services.sessions.peek(oauthStream.sid)).toBeUndefined();
    expect(app.services.sessions.peek(keyStream.sid)?.stream).not.toBeNull();
    await keyStream.reader.cancel();
  });

  it('a revocation missed while LISTEN was down is caught up after the reconnect: the stream of the revoked grant ends', async () => {
    const ep = await vend(alice, 'missed-revoke');
    const access = await accessTokenFor(ep.slug);
    const stream = await openStream(ep.slug, access);
    // Revoked behind the instance's back: no notification is sent.
    await app.sql`update oauth_grants set revoked_at = now() where endpoint_id = ${ep.id}`;
    expect(app.services.sessions.peek(stream.sid)?.stream).not.toBeNull();
    await app.services.revocations.wakeups().oauth_grant_revoked!.onListen!();
    for (;;) if ((await stream.reader.read()).done) break;
    expect(app.services.sessions.peek(stream.sid)).toBeUndefined();
  });
});

/** Alice approves a grant for her endpoint `slug`; its access token. */
async function accessTokenFor(slug: string): Promise<string> {
  const { json: client } = await register({ client_name: 'helper', redirect_uris: [REDIRECT] });
  const { verifier, challenge } = pkce();
  const fields = { response_type: 'code', client_id: client.client_id as string, redirect_uri: REDIRECT, state: 's', code_challenge: challenge, code_challenge_method: 'S256', resource: `${app.baseUrl}/mcp/${slug}` };
  const b = await signedIn(alice);
  const page = await b.get(`/oauth/authorize?${new URLSearchParams(fields)}`);
  const approved = await b.post('/oauth/authorize', { ...fields, csrf_token: /name="csrf_token" value="([^"]+)"/.exec(page.text)![1]!, decision: 'approve' });
  const code = new URL(approved.headers.get('location')!).searchParams.get('code')!;
  return (await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id as string })).json.access_token as string;
}

/** A session of `slug` opened with `credential`, and its open stream. */
async function openStream(slug: string, credential: string) {
  const headers = { authorization: `Bearer ${credential}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await fetch(`${app.url}/mcp/${slug}`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  });
  await init.text();
  const sid = init.headers.get('mcp-session-id')!;
  const stream = await fetch(`${app.url}/mcp/${slug}`, { headers: { authorization: `Bearer ${credential}`, accept: 'text/event-stream', 'mcp-session-id': sid } });
  expect(stream.status).toBe(200);
  return { sid, reader: stream.body!.getReader() };
}

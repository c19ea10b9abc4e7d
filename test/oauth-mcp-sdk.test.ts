import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { App } from '../src/app.ts';
import { maintenanceLoopsOf } from '../src/compose.ts';
import { settle, until } from './support/agents.ts';
import { apiCaller } from './support/app.ts';
import { alice, app, clients, db, push, signedIn, useBoardSuite, vend } from './support/board.ts';
import { push as pushVia, vend as vendVia } from './support/fixtures.ts';
import { clusterLogs, haproxyInstalled, HAPROXY_BIN, startBalancedCluster, type BalancedCluster } from './support/haproxy.ts';
import { answerConsent, connectByUrl, LOOPBACK_REDIRECT, mcpChallenge, MemoryProvider, pathOf, type Browsing, type OAuthAgent } from './support/oauth.ts';
import { sleep, stopAllServes, waitFor } from './support/processes.ts';

/**
 * Issue 38, "connect with the URL alone", with a client no one here wrote: the official MCP
 * TypeScript SDK's OAuth support (auth() behind StreamableHTTPClientTransport's authProvider) is
 * given nothing but an endpoint's MCP URL. It meets the 401, follows resource_metadata to the
 * authorization server, registers itself (RFC 7591), sends the human to consent (here the test's
 * signed-in human answers the board's form), trades the code with PKCE and the resource indicator,
 * connects, claims a todo and hears its doorbell; it refreshes when the access token expires, and
 * revoking the endpoint ends it. The same runs through three instances behind HAProxy, where every
 * step may land on another instance.
 */

useBoardSuite();

/** Every consent page the test's human answered. */
const consentPages: string[] = [];

/** The human's answer, checked as the client would check its redirect: the code for our state, from our issuer. */
function consentAs(b: Browsing, base: string) {
  return async (url: URL): Promise<string> => {
    const { location, page } = await answerConsent(b, url, base);
    consentPages.push(page);
    expect(`${location.origin}${location.pathname}`).toBe(LOOPBACK_REDIRECT);
    expect(location.searchParams.get('state')).toBe(url.searchParams.get('state'));
    expect(location.searchParams.get('iss')).toBe(base);
    expect(location.searchParams.get('error')).toBeNull();
    return location.searchParams.get('code')!;
  };
}

/** What the SDK asked the human to approve: PKCE S256, our loopback redirect, and the endpoint as the resource. */
function expectAuthorizationRequest(url: URL, base: string, mcpUrl: string, clientId: string): void {
  expect(`${url.origin}${url.pathname}`).toBe(`${base}/oauth/authorize`);
  const q = url.searchParams;
  expect(q.get('response_type')).toBe('code');
  expect(q.get('client_id')).toBe(clientId);
  expect(q.get('redirect_uri')).toBe(LOOPBACK_REDIRECT);
  expect(q.get('code_challenge_method')).toBe('S256');
  expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(q.get('resource')).toBe(mcpUrl);
}

/** The discovery and token steps the SDK took, in order, each with the status it met. */
function oauthSteps(agent: OAuthAgent, base: string): string[] {
  return agent.exchanges.map((x) => `${x.method} ${x.url.startsWith(base) ? x.url.slice(base.length).replace(/\?.*$/, '') : x.url} ${x.status}`);
}

describe('the MCP SDK client connects by URL alone (one instance)', () => {
  let agent: OAuthAgent;
  let provider: MemoryProvider;
  let slug: string;
  let b: Browsing;

  it('meets the 401 challenge, discovers, registers, gets consent, connects, claims a todo and hears its doorbell', async () => {
    const e = await vend(alice, 'oauth-sdk', ['reviews']);
    slug = e.slug;
    expect(e.mcp_url).toBe(`${app.url}/mcp/${e.slug}`);
    // The challenge a client without a token meets, before anything else.
    const bare = await fetch(e.mcp_url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toBe(mcpChallenge(app.url, e.slug));

    b = await signedIn(alice);
    provider = new MemoryProvider(consentAs(b, app.url));
    agent = await connectByUrl(e.mcp_url, provider);
    clients.push(agent.client);

    // One registration and one consent; the registered client is public, with our redirect URI exactly.
    expect(provider.authorizations).toHaveLength(1);
    expect(provider.client).toMatchObject({ client_id: expect.any(String), redirect_uris: [LOOPBACK_REDIRECT], token_endpoint_auth_method: 'none' });
    expectAuthorizationRequest(provider.authorizations[0]!, app.url, e.mcp_url, provider.client!.client_id);
    // The consent page named the client, where the answer goes, and what the grant reaches: the
    // endpoint's queues and verbs, the self verbs not listed.
    const page = consentPages.at(-1)!;
    for (const shown of ['sdk-e2e-client', '127.0.0.1:47913', e.slug, '<li>reviews</li>', '<li>claim_next</li>']) expect(page).toContain(shown);
    for (const self of ['clock_in', 'test_doorbell', 'whoami']) expect(page).not.toContain(`<li>${self}</li>`);
    expect(provider.stored).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), expires_in: expect.any(Number) });
    expect(provider.stored!.token_type.toLowerCase()).toBe('bearer');
    // The SDK's path: the 401, RFC 9728 then RFC 8414 discovery, RFC 7591 registration, consent; then
    // (finishAuth discovers again, holding no discovery cache) the code for tokens, and only then MCP.
    const steps = oauthSteps(agent, app.url);
    expect(steps.slice(0, 4)).toEqual([
      `POST /mcp/${e.slug} 401`,
      `GET /.well-known/oauth-protected-resource/mcp/${e.slug} 200`,
      'GET /.well-known/oauth-authorization-server 200',
      'POST /oauth/register 201',
    ]);
    const tokenAt = steps.indexOf('POST /oauth/token 200');
    expect(tokenAt).toBeGreaterThan(3);
    expect(steps.slice(4, tokenAt).every((x) => x.startsWith('GET /.well-known/') && x.endsWith(' 200')), steps.join('\n')).toBe(true);
    expect(steps[tokenAt + 1]).toBe(`POST /mcp/${e.slug} 200`);
    expect(steps.filter((x) => x.endsWith(' 401'))).toHaveLength(1);

    // An OAuth-connected session is an ordinary agent session: its stream opens, the verbs answer.
    await until(() => app.services.sessions.all().some((s) => s.id === agent.sessionId && s.stream !== null), 'the OAuth session stream to open');
    await app.services.presence.reconnectsSettled();
    const tools = (await agent.client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['claim', 'claim_next', 'complete', 'whoami', 'test_doorbell']));
    expect(await agent.call('whoami')).toMatchObject({ endpoint: { slug: e.slug }, queues: ['reviews'], session: { id: agent.sessionId } });

    const id = await push(alice, e.slug, 'reached by URL alone', { payload: { n: 1 } });
    await until(() => agent.heard.some((n) => n.params.meta.todo_id === id), `the doorbell of ${id}`);
    const ring = agent.heard.find((n) => n.params.meta.todo_id === id)!;
    expect(ring.method).toBe('notifications/claude/channel');
    expect(ring.params.meta).toMatchObject({ todo_id: id, queue: 'reviews' });
    expect(await agent.call('claim_next')).toMatchObject({ empty: false, todo: { id, state: 'claimed' } });
    expect(await agent.call('complete', { id, result: { ok: true } })).toMatchObject({ id, state: 'done' });
    expect(agent.heard.filter((n) => n.params.meta.todo_id === id)).toHaveLength(1);
  });

  it('the grant shows on the endpoint with the client name the SDK registered', async () => {
    const res = await apiCaller(app.url, alice.token)('GET', `/api/v1/endpoints/${slug}/grants`);
    expect(res.status, res.text).toBe(200);
    expect(res.json.grants).toEqual([
      { id: expect.any(String), client_id: provider.client!.client_id, client_name: 'sdk-e2e-client', created_at: expect.any(String), last_used_at: expect.any(String) },
    ]);
  });

  it('refreshes once the access token expires: the next call meets 401, the SDK rotates its tokens and the same session goes on', async () => {
    const before = provider.stored!;
    const exchangesBefore = agent.exchanges.length;
    app.clock.advance((before.expires_in! + 1) * 1000);
    // The expired token is refused with the challenge.
    const stale = await fetch(`${app.url}/mcp/${slug}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${before.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': agent.sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list' }),
    });
    expect(stale.status).toBe(401);
    expect(stale.headers.get('www-authenticate')).toBe(mcpChallenge(app.url, slug));

    expect(await agent.call('whoami')).toMatchObject({ endpoint: { slug }, session: { id: agent.sessionId } });
    expect(provider.saved).toHaveLength(2);
    const after = provider.stored!;
    expect(after.access_token).not.toBe(before.access_token);
    expect(after.refresh_token).toBeTruthy();
    expect(after.refresh_token).not.toBe(before.refresh_token);
    // The SDK refreshed, without a second consent or registration.
    expect(provider.authorizations).toHaveLength(1);
    // The notification stream's GET may be recorded meanwhile; the calls are the POSTs and the token request.
    const steps = oauthSteps(agent, app.url).slice(exchangesBefore).filter((x) => !x.startsWith('GET '));
    expect(steps[0]).toBe(`POST /mcp/${slug} 401`);
    expect(steps).toContain('POST /oauth/token 200');
    expect(steps).not.toContain('POST /oauth/register 201');
    expect(steps.at(-1)).toBe(`POST /mcp/${slug} 200`);

    // And the session still rings: a todo pushed now is heard and claimed over the refreshed token.
    const id = await push(alice, slug, 'after the refresh');
    await until(() => agent.heard.some((n) => n.params.meta.todo_id === id), `the doorbell of ${id}`);
    expect(await agent.call('claim', { id })).toMatchObject({ id, state: 'claimed' });
  });

  it('revoking the endpoint ends the OAuth session on the spot: the stream closes, the refresh is refused, a new consent is invalid_target', async () => {
    const asked: (string | null)[] = [];
    provider.consent = async (url) => {
      const res = await b.request('GET', pathOf(url, app.url));
      expect(res.status).toBe(303);
      asked.push(new URL(res.headers.get('location')!).searchParams.get('error'));
      return undefined;
    };
    const revoked = await apiCaller(app.url, alice.token)('POST', `/api/v1/endpoints/${slug}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    await until(() => !app.services.sessions.all().some((s) => s.id === agent.sessionId), 'the OAuth session to close here');
    await expect(agent.call('whoami')).rejects.toBeInstanceOf(UnauthorizedError);
    // The SDK tried its refresh token (invalid_grant), dropped its tokens and asked the human again.
    expect(provider.invalidated).toContain('tokens');
    expect(asked).toEqual(['invalid_target']);
    expect(provider.stored).toBeUndefined();
  });
});

// A grant revoked on its own (DELETE /api/v1/endpoints/{ref}/grants/{id}, or by a reused code or
// refresh token) must end the session its client holds open, not only refuse its next request: the
// open notification stream would otherwise keep carrying doorbells, with each todo's summary.
describe('revoking one grant while its client is connected', () => {
  it('ends that client\'s session: its stream closes and no later doorbell reaches it', async () => {
    const e = await vend(alice, 'oauth-grant-revoke', ['reviews']);
    const b = await signedIn(alice);
    const provider = new MemoryProvider(consentAs(b, app.url), 'to-be-revoked');
    const agent = await connectByUrl(e.mcp_url, provider);
    clients.push(agent.client);
    await until(() => app.services.sessions.all().some((s) => s.id === agent.sessionId && s.stream !== null), 'the OAuth session stream to open');
    await app.services.presence.reconnectsSettled();
    const api = apiCaller(app.url, alice.token);
    const [grant] = (await api('GET', `/api/v1/endpoints/${e.slug}/grants`)).json.grants;
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/grants/${grant.id}`)).status).toBe(200);
    const id = await push(alice, e.slug, 'pushed after the grant was revoked');
    await settle(1_000);
    expect(agent.heard.filter((n) => n.params.meta.todo_id === id)).toEqual([]);
    expect(app.services.sessions.all().some((s) => s.id === agent.sessionId && s.stream !== null)).toBe(false);
  });
});

// An open notification stream makes no request that would be refused, so a client whose access
// token lapsed would go on hearing doorbells (each with its todo's summary) for as long as the
// socket lives. The session janitor ends such a stream; the SDK reconnects it, meets the 401,
// refreshes, and hears the next doorbell on the new stream.
describe('an idle client whose access token expires', () => {
  it('loses its stream at the next janitor tick, and the SDK reconnects with a refreshed token and hears the next doorbell', async () => {
    const e = await vend(alice, 'oauth-stream-expiry', ['reviews']);
    const b = await signedIn(alice);
    const provider = new MemoryProvider(consentAs(b, app.url), 'stream-expiry');
    const agent = await connectByUrl(e.mcp_url, provider);
    clients.push(agent.client);
    const stream = () => app.services.sessions.all().find((s) => s.id === agent.sessionId)?.stream ?? null;
    await until(() => stream() !== null, 'the OAuth session stream to open');
    await app.services.presence.reconnectsSettled();
    const first = stream()!;
    const janitor = maintenanceLoopsOf(app.services).find((l) => l.name === 'session-janitor')!;

    // Before the expiry the janitor leaves the stream alone.
    expect(await janitor.tick()).toMatchObject({ expiredAccessStreams: 0 });
    expect(stream()).toBe(first);

    const issued = provider.stored!;
    const exchangesBefore = agent.exchanges.length;
    app.clock.advance((issued.expires_in! + 1) * 1000);
    expect(await janitor.tick()).toMatchObject({ idle: 0, expiredAccessStreams: 1 });
    // The session stays; only its stream ended.
    expect(app.services.sessions.all().some((s) => s.id === agent.sessionId)).toBe(true);

    // The server attaches the new stream before the SDK's fetch (which records the exchange) resolves.
    const steps = () => oauthSteps(agent, app.url).slice(exchangesBefore);
    await until(() => stream() !== null && stream() !== first && steps().at(-1) === `GET /mcp/${e.slug} 200`, 'the SDK to reconnect the stream', 15_000);
    const reconnect = steps();
    expect(reconnect[0]).toBe(`GET /mcp/${e.slug} 401`);
    expect(reconnect).toContain('POST /oauth/token 200');
    expect(reconnect.filter((x) => x.startsWith('GET /mcp/'))).toEqual([`GET /mcp/${e.slug} 401`, `GET /mcp/${e.slug} 200`]);
    expect(provider.stored!.access_token).not.toBe(issued.access_token);
    expect(provider.authorizations).toHaveLength(1);

    const id = await push(alice, e.slug, 'after the stream came back');
    await until(() => agent.heard.some((n) => n.params.meta.todo_id === id), `the doorbell of ${id}`);
    // The refreshed token's expiry is the session's now: the janitor leaves the new stream alone.
    expect(await janitor.tick()).toMatchObject({ expiredAccessStreams: 0 });
  });
});

if (!haproxyInstalled()) console.warn(`[oauth-mcp-sdk] balancer case skipped: ${HAPROXY_BIN} is not installed (apt-get install haproxy)`);

describe.skipIf(!haproxyInstalled())('the MCP SDK client connects by URL alone through three instances behind HAProxy', () => {
  let cluster: BalancedCluster;
  let agent: OAuthAgent | undefined;
  let provider: MemoryProvider;
  let e: Awaited<ReturnType<typeof vendVia>>;

  beforeAll(async () => {
    cluster = await startBalancedCluster(db.url, 3);
  }, 90_000);
  beforeEach((ctx) => ctx.onTestFailed(() => console.error(clusterLogs(cluster))));
  afterAll(async () => {
    await agent?.close();
    await cluster?.stop();
    await stopAllServes();
  });

  it('discovers, registers, gets consent and connects whichever instance answers each step; claims a todo and hears its doorbell', async () => {
    const base = cluster.lb.url;
    const api = apiCaller(base, alice.token);
    e = await vendVia(api, { name: 'oauth-behind-lb', queues: ['jobs'] });
    expect(e.mcp_url).toBe(`${base}/mcp/${e.slug}`);

    const b = await signedIn(alice, { url: base } as App);
    provider = new MemoryProvider(consentAs(b, base), 'sdk-e2e-balanced');
    agent = await connectByUrl(e.mcp_url, provider);
    expectAuthorizationRequest(provider.authorizations[0]!, base, e.mcp_url, provider.client!.client_id);
    // Round robin without affinity: the OAuth steps were answered by more than one instance.
    const oauthServers = new Set(agent.exchanges.slice(0, 5).map((x) => x.servedBy));
    expect(oauthServers.size).toBeGreaterThanOrEqual(2);

    const tools = (await agent.client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['claim', 'claim_next', 'complete']));
    await waitFor(
      async () => (await db.sql`select stream_instance from mcp_sessions where id = ${agent!.sessionId} and stream_instance is not null`).length > 0,
      'the directory to name the OAuth session stream holder',
    );

    const pushed = await pushVia(api, e, { title: 'by URL alone, through the balancer', payload: { n: 1 } });
    await waitFor(() => agent!.heard.some((n) => n.params.meta.todo_id === pushed.id), `the doorbell of ${pushed.id}`);
    const ring = agent.heard.find((n) => n.params.meta.todo_id === pushed.id)!;
    expect(ring.method).toBe('notifications/claude/channel');
    expect(ring.params.meta).toMatchObject({ todo_id: pushed.id, queue: 'jobs' });
    expect(await agent.call('claim_next')).toMatchObject({ empty: false, todo: { id: pushed.id, state: 'claimed' } });
    expect(await agent.call('complete', { id: pushed.id, result: { ok: true } })).toMatchObject({ id: pushed.id, state: 'done' });

    // Every MCP POST after the token answered, whichever instance took it.
    const posts = agent.exchanges.filter((x) => x.method === 'POST' && x.url === e.mcp_url).slice(1);
    expect(posts.length).toBeGreaterThanOrEqual(3);
    expect(posts.every((x) => x.status === 200 || x.status === 202), JSON.stringify(posts)).toBe(true);
    expect(new Set(posts.map((x) => x.servedBy)).size).toBeGreaterThanOrEqual(2);
  });

  it('revoking its grant on an instance that does not hold the stream ends the session there too: no later doorbell reaches it', async () => {
    const a = agent!;
    const holder = a.exchanges.filter((x) => x.method === 'GET' && x.url === e.mcp_url && x.status === 200).at(-1)!.servedBy!;
    const other = cluster.serves.find((_s, i) => `s${i}` !== holder)!;
    // The human does not approve again when the SDK comes back for a new consent.
    const asked: string[] = [];
    provider.consent = async (url) => void asked.push(url.href);
    const api = apiCaller(other.url, alice.token);
    const [grant] = (await api('GET', `/api/v1/endpoints/${e.slug}/grants`)).json.grants;
    const before = a.exchanges.length;
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/grants/${grant.id}`)).status).toBe(200);
    await waitFor(
      () => a.exchanges.slice(before).some((x) => x.method === 'GET' && x.url === e.mcp_url && x.status === 401),
      `the stream on ${holder} to end and the SDK's reconnect to be refused`,
    );
    const pushed = await pushVia(api, e, { title: 'pushed after the grant was revoked' });
    await sleep(1_000);
    expect(a.heard.filter((n) => n.params.meta.todo_id === pushed.id)).toEqual([]);
    expect(asked.length).toBeGreaterThanOrEqual(1);
  });
});

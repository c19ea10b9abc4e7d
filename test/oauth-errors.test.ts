import * as oauth from 'oauth4webapi';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiCaller } from './support/app.ts';
import { createLoginLink } from '../src/store/web-sessions.ts';
import { alice, app, bob, db, signedIn, useBoardSuite, vend } from './support/board.ts';
import { answerConsent, apiChallenge, consentForm, LOOPBACK_REDIRECT, mcpChallenge } from './support/oauth.ts';
import { approvedCode, authorizationUrl, discover, expectTokenError, insecure, onApi, onMcp, redeem, refresh, register, tokensFor } from './support/oauth-rfc-client.ts';

/**
 * Switchboard's authorization server against an independent RFC client, oauth4webapi (panva):
 * discovery (RFC 8414, RFC 9728), registration (RFC 7591), the code flow with PKCE and the RFC 9207
 * `iss`, and every refusal of issue 38 with its status and error code: a wrong PKCE verifier, a
 * reused code and a reused refresh token (each revokes the family), a token used on a resource it
 * was not issued for, a redirect URI not registered byte for byte, an `http` redirect off loopback,
 * a grant for another human's endpoint, and a revoked endpoint's tokens.
 */

useBoardSuite();

let as: oauth.AuthorizationServer;
let base: string;
beforeAll(async () => {
  base = app.url;
  as = await discover(base);
});

const grantCount = async (endpointId: string) => Number((await db.sql`select count(*)::int as n from oauth_grants where endpoint_id = ${endpointId}`)[0]!.n);

describe('discovery and registration', () => {
  it('RFC 8414 metadata names this server as issuer, its three endpoints and S256 only', async () => {
    expect(as).toMatchObject({
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      registration_endpoint: `${base}/oauth/register`,
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      authorization_response_iss_parameter_supported: true,
    });
  });

  it('RFC 9728 metadata per endpoint and for the API; a slug outside the alphabet is 404; the 401s point at it', async () => {
    const e = await vend(alice, 'prm');
    const mcpUrl = new URL(`${base}/mcp/${e.slug}`);
    const prm = await oauth.processResourceDiscoveryResponse(mcpUrl, await oauth.resourceDiscoveryRequest(mcpUrl, insecure));
    expect(prm).toMatchObject({ resource: mcpUrl.href, authorization_servers: [base], bearer_methods_supported: ['header'], resource_name: expect.any(String) });
    const apiUrl = new URL(`${base}/api`);
    const api = await oauth.processResourceDiscoveryResponse(apiUrl, await oauth.resourceDiscoveryRequest(apiUrl, insecure));
    expect(api).toMatchObject({ resource: `${base}/api`, authorization_servers: [base], bearer_methods_supported: ['header'], scopes_supported: ['operator'] });
    expect((await fetch(`${base}/.well-known/oauth-protected-resource/mcp/Not_A_Slug!`)).status).toBe(404);

    expect(await onMcp(e.slug, 'sba_not-a-token')).toEqual({ status: 401, challenge: mcpChallenge(base, e.slug) });
    // A path no endpoint could have: still 401, and no metadata to point at (it would be a 404).
    const malformed = await fetch(`${base}/mcp/Not_A_Slug`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    expect(malformed.status).toBe(401);
    expect(malformed.headers.get('www-authenticate')).toBe('Bearer realm="switchboard"');
    const bareApi = await fetch(`${base}/api/v1/me`);
    expect(bareApi.status).toBe(401);
    expect(bareApi.headers.get('www-authenticate')).toBe(apiChallenge(base));
  });

  it('registers a public client with its redirect URIs exactly as given', async () => {
    const uris = [LOOPBACK_REDIRECT, 'http://localhost:8123/cb?x=1', 'http://[::1]:9/cb', 'https://client.example/callback', 'com.example.agent:/oauth'];
    const client = await register(uris, 'every kind of redirect');
    expect(client).toMatchObject({
      client_id: expect.any(String),
      client_name: 'every kind of redirect',
      redirect_uris: uris,
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_id_issued_at: expect.any(Number),
    });
    expect(client.client_secret).toBeUndefined();
  });

  it('an http redirect off loopback is refused: 400 invalid_redirect_uri', async () => {
    for (const uri of ['http://client.example/cb', 'http://127.0.0.1.nip.io/cb', 'http://10.0.0.5:8080/cb']) {
      const res = await oauth.dynamicClientRegistrationRequest(as, { client_name: 'off loopback', redirect_uris: [LOOPBACK_REDIRECT, uri] }, insecure);
      expect(res.status, uri).toBe(400);
      await expectTokenError(oauth.processDynamicClientRegistrationResponse(res), 400, 'invalid_redirect_uri', false);
    }
    // Raw, to pin the body too.
    const raw = await apiCaller(base)('POST', '/oauth/register', { redirect_uris: ['http://client.example/cb'] });
    expect(raw.status).toBe(400);
    expect(raw.json).toEqual({ error: 'invalid_redirect_uri', error_description: expect.any(String) });
    const noUris = await apiCaller(base)('POST', '/oauth/register', { client_name: 'x' });
    expect(noUris.status).toBe(400);
    expect(noUris.json.error).toBe('invalid_redirect_uri');
    const confidential = await apiCaller(base)('POST', '/oauth/register', { redirect_uris: [LOOPBACK_REDIRECT], token_endpoint_auth_method: 'client_secret_basic' });
    expect(confidential.status).toBe(400);
    expect(confidential.json.error).toBe('invalid_client_metadata');
  });
});

describe('the code flow and its refusals', () => {
  it('a full grant: consent, code with state and iss, tokens that open the endpoint and nothing else', async () => {
    const e = await vend(alice, 'flow');
    const other = await vend(alice, 'flow-other');
    const client = await register();
    const b = await signedIn(alice);
    const resource = `${base}/mcp/${e.slug}`;
    const tokens = await tokensFor(b, client, resource);
    expect(tokens).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), expires_in: expect.any(Number) });
    expect(tokens.token_type).toBe('bearer');
    expect(await onMcp(e.slug, tokens.access_token)).toMatchObject({ status: 200 });
    // Token for endpoint A used on B, even B of the same human: 401 with B's challenge.
    expect(await onMcp(other.slug, tokens.access_token)).toEqual({ status: 401, challenge: mcpChallenge(base, other.slug) });
    // An endpoint token never opens /api/v1.
    expect(await onApi(tokens.access_token)).toMatchObject({ status: 401, challenge: apiChallenge(base) });
  });

  it('an API grant acts as the human on /api/v1 and never opens an MCP URL', async () => {
    const e = await vend(alice, 'api-grant-target');
    const client = await register();
    const b = await signedIn(alice);
    const a = await authorizationUrl(client, `${base}/api`);
    const { location, page } = await answerConsent(b, a.url, base);
    expect(page).toMatch(/acts as you/i);
    const callback = oauth.validateAuthResponse(as, client, location, a.state);
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, await redeem(client, { callback, verifier: a.verifier }, `${base}/api`));
    expect(tokens.scope).toBe('operator');
    const me = await onApi(tokens.access_token);
    expect(me.status).toBe(200);
    expect(me.json).toMatchObject({ handle: alice.handle });
    expect(await onMcp(e.slug, tokens.access_token)).toEqual({ status: 401, challenge: mcpChallenge(base, e.slug) });
  });

  it('a wrong PKCE verifier: 400 invalid_grant, no tokens', async () => {
    const e = await vend(alice, 'pkce');
    const client = await register();
    const resource = `${base}/mcp/${e.slug}`;
    const a = await approvedCode(await signedIn(alice), client, resource);
    await expectTokenError(oauth.processAuthorizationCodeResponse(as, client, await redeem(client, a, resource, oauth.generateRandomCodeVerifier())), 400, 'invalid_grant');
  });

  it('a reused code: 400 invalid_grant, and the tokens of its first exchange stop working', async () => {
    const e = await vend(alice, 'reused-code');
    const client = await register();
    const resource = `${base}/mcp/${e.slug}`;
    const a = await approvedCode(await signedIn(alice), client, resource);
    const first = await oauth.processAuthorizationCodeResponse(as, client, await redeem(client, a, resource));
    expect(await onMcp(e.slug, first.access_token)).toMatchObject({ status: 200 });
    await expectTokenError(oauth.processAuthorizationCodeResponse(as, client, await redeem(client, a, resource)), 400, 'invalid_grant');
    expect(await onMcp(e.slug, first.access_token)).toEqual({ status: 401, challenge: mcpChallenge(base, e.slug) });
    await expectTokenError(refresh(client, first.refresh_token!), 400, 'invalid_grant');
  });

  it('a reused refresh token: 400 invalid_grant, and the whole family is revoked (the newest access token too)', async () => {
    const e = await vend(alice, 'reused-refresh');
    const client = await register();
    const first = await tokensFor(await signedIn(alice), client, `${base}/mcp/${e.slug}`);
    const second = await refresh(client, first.refresh_token!);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(await onMcp(e.slug, second.access_token)).toMatchObject({ status: 200 });
    // The rotation ended the older access token.
    expect(await onMcp(e.slug, first.access_token)).toEqual({ status: 401, challenge: mcpChallenge(base, e.slug) });
    await expectTokenError(refresh(client, first.refresh_token!), 400, 'invalid_grant');
    expect(await onMcp(e.slug, second.access_token)).toEqual({ status: 401, challenge: mcpChallenge(base, e.slug) });
    await expectTokenError(refresh(client, second.refresh_token!), 400, 'invalid_grant');
  });

  it('a code is bound to its client and lives a minute: another client, or a late exchange, is invalid_grant', async () => {
    const e = await vend(alice, 'code-binding');
    const [client, thief] = [await register(), await register()];
    const resource = `${base}/mcp/${e.slug}`;
    const b = await signedIn(alice);
    const stolen = await approvedCode(b, client, resource);
    await expectTokenError(oauth.processAuthorizationCodeResponse(as, thief, await redeem(thief, stolen, resource)), 400, 'invalid_grant');
    const late = await approvedCode(b, client, resource);
    app.clock.advance(61_000);
    await expectTokenError(oauth.processAuthorizationCodeResponse(as, client, await redeem(client, late, resource)), 400, 'invalid_grant');
    expect(await db.sql`select 1 from oauth_tokens t join oauth_grants g on g.id = t.grant_id where g.endpoint_id = ${e.id}`).toHaveLength(0);
  });

  it('the consent page shows a hostile client name as text', async () => {
    const e = await vend(alice, 'hostile-name');
    const client = await register([LOOPBACK_REDIRECT], '<script>alert(1)</script><img src=x onerror=alert(2)>');
    const { page } = await answerConsent(await signedIn(alice), (await authorizationUrl(client, `${base}/mcp/${e.slug}`)).url, base, 'deny');
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page).not.toMatch(/<script>alert|<img src=x/);
    expect(page).toContain('127.0.0.1:47913');
  });

  it('the token endpoint names other refusals by their codes', async () => {
    const e = await vend(alice, 'token-codes');
    const client = await register();
    const resource = `${base}/mcp/${e.slug}`;
    const b = await signedIn(alice);
    const post = (form: Record<string, string>) => apiCaller(base)('POST', '/oauth/token', new URLSearchParams(form).toString(), { 'content-type': 'application/x-www-form-urlencoded' });
    const unsupported = await post({ grant_type: 'password', client_id: client.client_id, username: 'a', password: 'b' });
    expect([unsupported.status, unsupported.json?.error]).toEqual([400, 'unsupported_grant_type']);
    expect(unsupported.headers.get('cache-control')).toBe('no-store');
    // A resource other than the grant's at the token endpoint: invalid_target.
    const a = await approvedCode(b, client, resource);
    await expectTokenError(oauth.processAuthorizationCodeResponse(as, client, await redeem(client, a, `${base}/api`)), 400, 'invalid_target');
  });

  it('the authorization endpoint sends other errors back to the registered redirect with state and iss', async () => {
    const e = await vend(alice, 'authorize-errors');
    const client = await register();
    const b = await signedIn(alice);
    const cases: [Record<string, string | null>, string][] = [
      [{ code_challenge: null, code_challenge_method: null }, 'invalid_request'],
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ resource: 'https://elsewhere.example/mcp/x' }, 'invalid_target'],
      [{ resource: `${base}/mcp/no-such-endpoint-here` }, 'invalid_target'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
    ];
    for (const [over, error] of cases) {
      const a = await authorizationUrl(client, `${base}/mcp/${e.slug}`, over);
      const res = await b.request('GET', `${a.url.pathname}${a.url.search}`);
      expect(res.status, JSON.stringify(over)).toBe(303);
      const location = new URL(res.headers.get('location')!);
      expect(`${location.origin}${location.pathname}`).toBe(LOOPBACK_REDIRECT);
      expect(location.searchParams.get('code')).toBeNull();
      expect(() => oauth.validateAuthResponse(as, client, location, a.state)).toThrow(expect.objectContaining({ error }));
      expect(location.searchParams.get('iss')).toBe(base);
      expect(location.searchParams.get('state')).toBe(a.state);
    }
  });

  it('a redirect URI not registered byte for byte, or an unknown client: an error page, never a redirect', async () => {
    const e = await vend(alice, 'exact-redirect');
    const client = await register();
    const b = await signedIn(alice);
    const resource = `${base}/mcp/${e.slug}`;
    const variants = [`${LOOPBACK_REDIRECT}/`, `${LOOPBACK_REDIRECT}?x=1`, LOOPBACK_REDIRECT.replace('/oauth/callback', '/OAuth/callback'), LOOPBACK_REDIRECT.replace('127.0.0.1', 'localhost'), 'https://attacker.example/cb'];
    const refusals = [...variants.map((redirect_uri) => ({ redirect_uri })), { client_id: 'no-such-client' }];
    for (const over of refusals) {
      const a = await authorizationUrl(client, resource, over);
      const res = await b.request('GET', `${a.url.pathname}${a.url.search}`);
      expect(res.status, JSON.stringify(over)).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.text).not.toContain('<form method="post" action="/oauth/authorize"');
    }
    // Nor does a forged approval with such a redirect produce a code.
    const a = await authorizationUrl(client, resource);
    const { form } = await answerConsent(b, a.url, base, 'deny');
    const forged = await b.request('POST', '/oauth/authorize', { ...form.hidden, redirect_uri: variants[0]!, decision: 'approve' });
    expect(forged.status).toBe(400);
    expect(forged.headers.get('location')).toBeNull();
    expect(await grantCount(e.id)).toBe(0);
  });

  it('deny: access_denied with state and iss, and no grant', async () => {
    const e = await vend(alice, 'deny');
    const client = await register();
    const a = await authorizationUrl(client, `${base}/mcp/${e.slug}`);
    const { location } = await answerConsent(await signedIn(alice), a.url, base, 'deny');
    expect(location.searchParams.get('code')).toBeNull();
    expect(() => oauth.validateAuthResponse(as, client, location, a.state)).toThrow(expect.objectContaining({ error: 'access_denied' }));
    expect(await grantCount(e.id)).toBe(0);
  });

  it('consent needs the board CSRF token: a post without it is 403 and grants nothing', async () => {
    const e = await vend(alice, 'csrf');
    const client = await register();
    const b = await signedIn(alice);
    const a = await authorizationUrl(client, `${base}/mcp/${e.slug}`);
    const page = await b.request('GET', `${a.url.pathname}${a.url.search}`);
    const { csrf_token: _dropped, ...rest } = consentForm(page.text).hidden;
    const res = await b.request('POST', '/oauth/authorize', { ...rest, decision: 'approve' });
    expect(res.status).toBe(403);
    expect(res.headers.get('location')).toBeNull();
    expect(await grantCount(e.id)).toBe(0);
  });

  it('a grant for another human\'s endpoint: invalid_target to the redirect, no code, no grant', async () => {
    const bobs = await vend(bob, 'bobs-endpoint');
    const client = await register();
    const a = await authorizationUrl(client, `${base}/mcp/${bobs.slug}`);
    const res = await (await signedIn(alice)).request('GET', `${a.url.pathname}${a.url.search}`);
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get('location')!);
    expect(location.searchParams.get('code')).toBeNull();
    expect(() => oauth.validateAuthResponse(as, client, location, a.state)).toThrow(expect.objectContaining({ error: 'invalid_target' }));
    // Nor does Alice's approval of her own endpoint, its form altered to name Bob's.
    const alices = await vend(alice, 'alices-endpoint');
    const b = await signedIn(alice);
    const { form } = await answerConsent(b, (await authorizationUrl(client, `${base}/mcp/${alices.slug}`)).url, base, 'deny');
    const forged = await b.request('POST', '/oauth/authorize', { ...form.hidden, resource: `${base}/mcp/${bobs.slug}`, decision: 'approve' });
    expect(forged.status).toBe(303);
    expect(new URL(forged.headers.get('location')!).searchParams.get('error')).toBe('invalid_target');
    expect(new URL(forged.headers.get('location')!).searchParams.get('code')).toBeNull();
    expect(await grantCount(bobs.id)).toBe(0);
  });

  it('not signed in: 303 to sign-in, and the sign-in returns the human to the consent page, not the front page', async () => {
    const e = await vend(alice, 'return-to-consent');
    const client = await register();
    const a = await authorizationUrl(client, `${base}/mcp/${e.slug}`);
    const consentPath = `${a.url.pathname}${a.url.search}`;
    // A browser's cookie jar, all of it: the place to return to is whatever the server keeps.
    const jar = new Map<string, string>();
    const send = async (method: string, path: string) => {
      const res = await fetch(`${base}${path}`, { method, redirect: 'manual', headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const eq = pair!.indexOf('=');
        const [k, v] = [pair!.slice(0, eq), pair!.slice(eq + 1)];
        if (v === '' || /max-age=0/i.test(c)) jar.delete(k);
        else jar.set(k, v);
      }
      return { status: res.status, location: res.headers.get('location'), text: await res.text() };
    };
    const anonymous = await send('GET', consentPath);
    expect(anonymous.status).toBe(303);
    expect(anonymous.location).toBe('/login');
    expect(await grantCount(e.id)).toBe(0);
    const { token } = await createLoginLink(db.sql, alice.handle, app.clock.now());
    const signIn = await send('POST', `/login/${token}`);
    expect(signIn.status).toBe(303);
    expect(signIn.location).toBe(consentPath);
    const consent = await send('GET', signIn.location!);
    expect(consent.status).toBe(200);
    expect(consentForm(consent.text).hidden).toMatchObject({ client_id: client.client_id, redirect_uri: LOOPBACK_REDIRECT, state: a.state, resource: `${base}/mcp/${e.slug}` });
    // Returned once: the next sign-in goes to the front page again.
    const { token: again } = await createLoginLink(db.sql, alice.handle, app.clock.now());
    expect((await send('POST', `/login/${again}`)).location).toBe('/');
  });
});

describe('revocation', () => {
  it("a revoked endpoint's tokens: 401, refresh is invalid_grant, and its unspent codes die", async () => {
    const e = await vend(alice, 'to-revoke');
    const client = await register();
    const b = await signedIn(alice);
    const tokens = await tokensFor(b, client, `${base}/mcp/${e.slug}`);
    const unspent = await approvedCode(b, client, `${base}/mcp/${e.slug}`);
    expect(await onMcp(e.slug, tokens.access_token)).toMatchObject({ status: 200 });
    const revoked = await apiCaller(base, alice.token)('POST', `/api/v1/endpoints/${e.slug}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    expect(await onMcp(e.slug, tokens.access_token)).toEqual({ status: 401, challenge: mcpChallenge(base, e.slug) });
    await expectTokenError(refresh(client, tokens.refresh_token!), 400, 'invalid_grant');
    await expectTokenError(oauth.processAuthorizationCodeResponse(as, client, await redeem(client, unspent, `${base}/mcp/${e.slug}`)), 400, 'invalid_grant');
  });

  it('one grant revoked from the endpoint: its tokens 401, the other grant keeps working', async () => {
    const e = await vend(alice, 'grant-revoke');
    const api = apiCaller(base, alice.token);
    const b = await signedIn(alice);
    const one = await register([LOOPBACK_REDIRECT], 'client one');
    const two = await register([LOOPBACK_REDIRECT], 'client two');
    const t1 = await tokensFor(b, one, `${base}/mcp/${e.slug}`);
    const t2 = await tokensFor(b, two, `${base}/mcp/${e.slug}`);
    const listed = await api('GET', `/api/v1/endpoints/${e.slug}/grants`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.json.grants.map((g: { client_name: string }) => g.client_name).sort()).toEqual(['client one', 'client two']);
    const g1 = listed.json.grants.find((g: { client_id: string }) => g.client_id === one.client_id);
    expect(g1).toEqual({ id: expect.any(String), client_id: one.client_id, client_name: 'client one', created_at: expect.any(String), last_used_at: null });
    // Bob can neither list nor revoke Alice's grants.
    expect((await apiCaller(base, bob.token)('GET', `/api/v1/endpoints/${e.slug}/grants`)).status).toBe(404);
    expect((await apiCaller(base, bob.token)('DELETE', `/api/v1/endpoints/${e.slug}/grants/${g1.id}`)).status).toBe(404);
    const del = await api('DELETE', `/api/v1/endpoints/${e.slug}/grants/${g1.id}`);
    expect(del.status, del.text).toBe(200);
    expect(await onMcp(e.slug, t1.access_token)).toEqual({ status: 401, challenge: mcpChallenge(base, e.slug) });
    await expectTokenError(refresh(one, t1.refresh_token!), 400, 'invalid_grant');
    expect(await onMcp(e.slug, t2.access_token)).toMatchObject({ status: 200 });
    expect((await api('GET', `/api/v1/endpoints/${e.slug}/grants`)).json.grants.map((g: { client_id: string }) => g.client_id)).toEqual([two.client_id]);
  });
});

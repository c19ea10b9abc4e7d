// oauth4webapi (panva) as an independent RFC client of Switchboard's authorization server, for
// test/oauth-errors.test.ts: discovery, registration, the code flow with PKCE, refresh, and requests
// to the protected resources, each refusal read the way that library reads it.

import * as oauth from 'oauth4webapi';
import { expect } from 'vitest';
import { answerConsent, LOOPBACK_REDIRECT, type Browsing } from './oauth.ts';

// Every request here goes to http://127.0.0.1: oauth4webapi refuses plain http unless told.
export const insecure = { [oauth.allowInsecureRequests]: true } as const;
let as: oauth.AuthorizationServer;
let base: string;

/** Discovers the authorization server at `baseUrl` (RFC 8414) for the helpers below; answers its metadata. */
export async function discover(baseUrl: string): Promise<oauth.AuthorizationServer> {
  base = baseUrl;
  as = await oauth.processDiscoveryResponse(new URL(base), await oauth.discoveryRequest(new URL(base), { algorithm: 'oauth2', ...insecure }));
  return as;
}

export async function register(redirectUris = [LOOPBACK_REDIRECT], name = 'oauth4webapi'): Promise<oauth.Client> {
  const res = await oauth.dynamicClientRegistrationRequest(
    as,
    { client_name: name, redirect_uris: redirectUris, token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] },
    insecure,
  );
  return oauth.processDynamicClientRegistrationResponse(res);
}

export interface Authorization {
  url: URL;
  state: string;
  verifier: string;
}

export async function authorizationUrl(client: oauth.Client, resource: string, over: Record<string, string | null> = {}): Promise<Authorization> {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(as.authorization_endpoint!);
  const params: Record<string, string | null> = {
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: LOOPBACK_REDIRECT,
    state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    resource,
    ...over,
  };
  for (const [k, v] of Object.entries(params)) if (v !== null) url.searchParams.set(k, v);
  return { url, state, verifier };
}

/** Consent approved and the code checked as oauth4webapi checks a callback (state, iss). */
export async function approvedCode(b: Browsing, client: oauth.Client, resource: string): Promise<Authorization & { callback: URLSearchParams }> {
  const a = await authorizationUrl(client, resource);
  const { location } = await answerConsent(b, a.url, base);
  return { ...a, callback: oauth.validateAuthResponse(as, client, location, a.state) };
}

export const redeem = (client: oauth.Client, a: { callback: URLSearchParams; verifier: string }, resource: string, verifier = a.verifier) =>
  oauth.authorizationCodeGrantRequest(as, client, oauth.None(), a.callback, LOOPBACK_REDIRECT, verifier, { additionalParameters: { resource }, ...insecure });

/** The whole flow: a grant's first tokens, with the raw response's headers. */
export async function tokensFor(b: Browsing, client: oauth.Client, resource: string): Promise<oauth.TokenEndpointResponse> {
  const res = await redeem(client, await approvedCode(b, client, resource), resource);
  expect(res.headers.get('cache-control')).toBe('no-store');
  return oauth.processAuthorizationCodeResponse(as, client, res);
}

export const refresh = async (client: oauth.Client, refreshToken: string) =>
  oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), refreshToken, insecure));

/** A refusal as oauth4webapi reads it: ResponseBodyError with this status and code; from the token endpoint, uncacheable. */
export async function expectTokenError(p: Promise<unknown>, status: number, error: string, noStore = true): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected ${error}`).toBeInstanceOf(oauth.ResponseBodyError);
  const e = err as oauth.ResponseBodyError;
  expect({ status: e.status, error: e.error }).toEqual({ status, error });
  expect(e.error_description).toEqual(expect.any(String));
  if (noStore) expect(e.response.headers.get('cache-control')).toBe('no-store');
}

/** An MCP initialize with the token, through oauth4webapi's resource request: the status and, on 401, the challenge. */
export async function onMcp(slug: string, token: string): Promise<{ status: number; challenge: string | null }> {
  const headers = new Headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'oauth4webapi', version: '3' } } });
  return resourceOutcome(() => oauth.protectedResourceRequest(token, 'POST', new URL(`${base}/mcp/${slug}`), headers, body, insecure));
}

export async function onApi(token: string, path = '/api/v1/me'): Promise<{ status: number; challenge: string | null; json?: any }> {
  return resourceOutcome(() => oauth.protectedResourceRequest(token, 'GET', new URL(`${base}${path}`), new Headers(), null, insecure));
}

export async function resourceOutcome(send: () => Promise<Response>): Promise<{ status: number; challenge: string | null; json?: any }> {
  try {
    const res = await send();
    const text = await res.text();
    return { status: res.status, challenge: res.headers.get('www-authenticate'), json: text.startsWith('{') ? JSON.parse(text) : undefined };
  } catch (e) {
    if (!(e instanceof oauth.WWWAuthenticateChallengeError)) throw e;
    await e.response.body?.cancel();
    expect(e.cause[0]).toMatchObject({ scheme: 'bearer', parameters: { realm: expect.any(String), resource_metadata: expect.any(String) } });
    return { status: e.status, challenge: e.response.headers.get('www-authenticate') };
  }
}


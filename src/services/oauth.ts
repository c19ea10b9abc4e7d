import { randomBytes } from 'node:crypto';
import type { Human } from '../store/humans.ts';
import { getHumanById } from '../store/humans.ts';
import { activeEndpointAtUnscoped, resolveOwnEndpoint, type Endpoint } from '../store/endpoints.ts';
import {
  AUTHORIZATION_CODE_PREFIX,
  apiGrantsOf,
  createGrantWithCode,
  endpointGrants,
  endpointGrantsOfEach,
  exchangeCode,
  findClient,
  registerClient,
  resolveAccessTokenUnscoped,
  revokeGrant,
  rotateRefreshToken,
  type IssuedTokens,
  type OAuthClient,
  type OAuthGrant,
} from '../store/oauth/index.ts';
import { checkRegistration } from '../domain/oauth/client-metadata.ts';
import { OAuthError } from '../domain/oauth/errors.ts';
import { checkCodeChallenge, verifierMatches } from '../domain/oauth/pkce.ts';
import { apiResource, mcpResource, parseResource, protectedResourceMetadataUrl, type OAuthResource } from '../domain/oauth/resource.ts';
import { notFound } from '../domain/errors.ts';
import { audit } from '../lib/audit.ts';
import { operatorActor } from '../domain/actor.ts';
import type { ServiceBase } from './base.ts';

/** Access tokens live an hour (OAuth 2.1 short-lived bearer tokens); a refresh token 30 days, rotated on each use. */
export type { OAuthGrant };

export const ACCESS_TOKEN_SECONDS = 3600;
export const REFRESH_TOKEN_SECONDS = 30 * 86_400;
/** An authorization code is spent within a minute of the approval, once. */
export const CODE_TTL_MS = 60_000;
/** Token request parameters longer than this are refused before any lookup. */
export const MAX_PARAM_LENGTH = 512;

/** A checked authorization request: what the consent page shows and the approval binds. */
export interface AuthorizationRequest {
  client: OAuthClient;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  resource: OAuthResource;
  /** The endpoint an endpoint grant opens (owned by the signed-in human). */
  endpoint: Endpoint | null;
}

/**
 * Where an authorization request failed: `redirect` is false when the client or its redirect URI
 * cannot be trusted, so the error is shown to the human instead of sent to the URI (RFC 6749 §4.1.2.1).
 */
export class AuthorizeRefusal extends Error {
  constructor(
    readonly error: OAuthError,
    readonly redirect: { uri: string; state: string | undefined } | null,
  ) {
    super(error.description);
  }
}

type Params = Record<string, string | undefined>;

/**
 * Switchboard's own OAuth 2.1 authorization server (issue 38; docs/oauth.md): public clients
 * register themselves, a human approves a grant on the board, and the grant's tokens open exactly
 * one resource (an endpoint's MCP URL, or /api/v1 acting as the human). Codes and tokens are
 * opaque, stored hashed, and a reused code or refresh token revokes the grant they came from.
 */
export class OAuthServer {
  constructor(
    private readonly base: ServiceBase,
    private readonly baseUrl: () => string,
  ) {}

  /** RFC 8414 authorization server metadata. */
  metadata(): Record<string, unknown> {
    const base = this.baseUrl();
    return {
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
      scopes_supported: ['mcp', 'operator'],
      service_documentation: `${base}/docs/connect`,
    };
  }

  /** RFC 9728 protected resource metadata: `slug` null for the API. Static, no lookup. */
  resourceMetadata(slug: string | null): Record<string, unknown> {
    const base = this.baseUrl();
    return slug === null
      ? { resource: apiResource(base), authorization_servers: [base], bearer_methods_supported: ['header'], resource_name: 'Switchboard operator API', scopes_supported: ['operator'] }
      : { resource: mcpResource(base, slug), authorization_servers: [base], bearer_methods_supported: ['header'], resource_name: `Switchboard endpoint ${slug}`, scopes_supported: ['mcp'] };
  }

  /** The `resource_metadata` URL a 401 at `path` (`/api` or `/mcp/<slug>`) points to. */
  resourceMetadataUrl(path: string): string {
    return protectedResourceMetadataUrl(this.baseUrl(), path);
  }

  async register(body: unknown): Promise<Record<string, unknown>> {
    const client = await registerClient(this.base.sql, checkRegistration(body), this.base.clock.now());
    this.base.log.info({ client_id: client.client_id, client_name: client.client_name }, 'oauth client registered');
    return {
      client_id: client.client_id,
      client_id_issued_at: Math.floor(client.created_at.getTime() / 1000),
      client_name: client.client_name,
      redirect_uris: client.redirect_uris,
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    };
  }

  /**
   * Checks an authorization request for `human`. The client and the redirect URI (byte for byte
   * one it registered) are checked first: until both hold, nothing is sent to the URI.
   */
  async checkAuthorization(q: Params, human: Human): Promise<AuthorizationRequest> {
    const client = q.client_id ? await findClient(this.base.sql, q.client_id) : null;
    if (!client) throw new AuthorizeRefusal(new OAuthError('invalid_client', 'client_id names no registered client'), null);
    const redirectUri = q.redirect_uri ?? (client.redirect_uris.length === 1 ? client.redirect_uris[0] : undefined);
    if (!redirectUri || !client.redirect_uris.includes(redirectUri)) {
      throw new AuthorizeRefusal(new OAuthError('invalid_request', 'redirect_uri is not one this client registered (it must match byte for byte)'), null);
    }
    const back = { uri: redirectUri, state: q.state };
    try {
      if (q.response_type !== 'code') throw new OAuthError('unsupported_response_type', 'response_type must be code');
      const codeChallenge = checkCodeChallenge(q.code_challenge, q.code_challenge_method);
      const resource = parseResource(q.resource, this.baseUrl());
      let endpoint: Endpoint | null = null;
      if (resource.kind === 'endpoint') {
        endpoint = await resolveOwnEndpoint(this.base.sql, human.id, resource.slug).catch(() => null);
        if (!endpoint || endpoint.state !== 'active') throw new OAuthError('invalid_target', `you have no active endpoint at ${resource.uri}; a grant can reach only an endpoint you own`);
      }
      return { client, redirectUri, state: q.state, codeChallenge, resource, endpoint };
    } catch (err) {
      if (err instanceof OAuthError) throw new AuthorizeRefusal(err, back);
      throw err;
    }
  }

  /** The human approved: a grant and its single-use code, and where the browser goes with it. */
  async approve(req: AuthorizationRequest, human: Human): Promise<string> {
    const code = AUTHORIZATION_CODE_PREFIX + randomBytes(32).toString('base64url');
    const now = this.base.clock.now();
    const grantId = await createGrantWithCode(
      this.base.sql,
      {
        clientId: req.client.client_id,
        humanId: human.id,
        endpointId: req.endpoint?.id ?? null,
        resource: req.resource.uri,
        code: { plaintext: code, redirectUri: req.redirectUri, challenge: req.codeChallenge, expiresAt: new Date(now.getTime() + CODE_TTL_MS) },
      },
      now,
    );
    audit(this.base.log, 'oauth.grant', operatorActor(human.id), { grant_id: grantId, client_id: req.client.client_id, endpoint_id: req.endpoint?.id ?? null, resource: req.resource.kind });
    return this.redirectWith(req.redirectUri, { code, state: req.state });
  }

  /** The redirect URI with the response parameters and the issuer (RFC 9207). */
  redirectWith(uri: string, params: Record<string, string | undefined>): string {
    const url = new URL(uri);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
    url.searchParams.set('iss', this.baseUrl());
    return url.toString();
  }

  /** The token endpoint: authorization_code or refresh_token. Throws OAuthError. */
  async token(p: Params): Promise<IssuedTokens & { token_type: 'Bearer'; scope: string }> {
    for (const [k, v] of Object.entries(p)) if (typeof v === 'string' && v.length > MAX_PARAM_LENGTH) throw new OAuthError('invalid_request', `${k} is longer than ${MAX_PARAM_LENGTH} characters`);
    if (!p.client_id) throw new OAuthError('invalid_request', 'client_id is required (public clients identify themselves)');
    const life = { accessSeconds: ACCESS_TOKEN_SECONDS, refreshSeconds: REFRESH_TOKEN_SECONDS };
    const now = this.base.clock.now();
    if (p.grant_type === 'authorization_code') {
      if (!p.code) throw new OAuthError('invalid_request', 'code is required');
      if (!p.code_verifier) throw new OAuthError('invalid_request', 'code_verifier is required (PKCE)');
      const out = await exchangeCode(
        this.base.sql,
        { code: p.code, clientId: p.client_id, redirectUri: p.redirect_uri, resource: p.resource, proves: (challenge) => verifierMatches(p.code_verifier, challenge) },
        life,
        now,
      );
      if (!out.ok) {
        if (out.why === 'reused') this.base.log.warn({ client_id: p.client_id }, 'oauth code reused: its grant is revoked');
        throw CODE_REFUSALS[out.why];
      }
      return { ...out.tokens, token_type: 'Bearer', scope: scopeOf(out.grant.resource, this.baseUrl()) };
    }
    if (p.grant_type === 'refresh_token') {
      if (!p.refresh_token) throw new OAuthError('invalid_request', 'refresh_token is required');
      const out = await rotateRefreshToken(this.base.sql, p.refresh_token, p.client_id, p.resource, life, now);
      if (!out.ok) {
        if (out.why === 'reused') this.base.log.warn({ client_id: p.client_id }, 'oauth refresh token reused: its grant is revoked');
        throw REFRESH_REFUSALS[out.why];
      }
      return { ...out.tokens, token_type: 'Bearer', scope: '' };
    }
    throw new OAuthError('unsupported_grant_type', `grant_type must be authorization_code or refresh_token${p.grant_type ? `, not ${JSON.stringify(p.grant_type.slice(0, 40))}` : ''}`);
  }

  /** The endpoint an access token opens at /mcp/<slug>, with the grant it belongs to; null when it opens anything else. */
  async endpointFor(token: string, slug: string): Promise<(Endpoint & { oauth_grant_id: string; oauth_expires_at: Date }) | null> {
    const access = await resolveAccessTokenUnscoped(this.base.sql, token, this.base.clock.now());
    if (!access?.endpoint_id || access.resource !== mcpResource(this.baseUrl(), slug)) return null;
    const endpoint = await activeEndpointAtUnscoped(this.base.sql, access.endpoint_id, slug);
    return endpoint && { ...endpoint, oauth_grant_id: access.grant_id, oauth_expires_at: access.expires_at };
  }

  /** The human an API-grant access token acts as, with its grant id (the per-grant rate limit's key). */
  async humanFor(token: string): Promise<{ human: Human; tokenId: string } | null> {
    const access = await resolveAccessTokenUnscoped(this.base.sql, token, this.base.clock.now());
    if (!access || access.endpoint_id !== null || access.resource !== apiResource(this.baseUrl())) return null;
    const human = await getHumanById(this.base.sql, access.human_id);
    return human ? { human, tokenId: `oauth:${access.grant_id}` } : null;
  }

  /** The live grants of an endpoint the human owns. */
  async grants(humanId: string, ref: string): Promise<OAuthGrant[]> {
    const endpoint = await resolveOwnEndpoint(this.base.sql, humanId, ref);
    return endpointGrants(this.base.sql, endpoint.id);
  }

  /** The human's live API grants: the CLI's browser logins and any client acting as them. */
  apiGrants(humanId: string): Promise<OAuthGrant[]> {
    return apiGrantsOf(this.base.sql, humanId);
  }

  /** Revokes one of the human's API grants (a CLI login elsewhere, say). */
  async revokeApiGrant(humanId: string, grantId: string): Promise<OAuthGrant> {
    const grant = (await apiGrantsOf(this.base.sql, humanId)).find((g) => g.id === grantId);
    if (!grant) throw notFound(`you have no live API grant ${grantId}`);
    return this.#revokeByItsHuman(humanId, grant);
  }

  /** The live grants of each of the human's endpoints (the board's cards). */
  grantsOfEach(humanId: string, endpointIds: readonly string[]): Promise<Map<string, OAuthGrant[]>> {
    return endpointGrantsOfEach(this.base.sql, humanId, endpointIds);
  }

  /** Revokes one grant of an endpoint the human owns; its tokens stop working at once. */
  async revokeGrant(humanId: string, ref: string, grantId: string): Promise<OAuthGrant> {
    const endpoint = await resolveOwnEndpoint(this.base.sql, humanId, ref);
    const grant = (await endpointGrants(this.base.sql, endpoint.id)).find((g) => g.id === grantId);
    if (!grant) throw notFound(`endpoint ${endpoint.slug} has no live grant ${grantId}`);
    return this.#revokeByItsHuman(humanId, grant);
  }

  /** One revocation by the human who holds the grant, with its audit line. */
  async #revokeByItsHuman(humanId: string, grant: OAuthGrant): Promise<OAuthGrant> {
    await revokeGrant(this.base.sql, grant.id, 'revoked by its human', this.base.clock.now());
    audit(this.base.log, 'oauth.revoke_grant', operatorActor(humanId), { grant_id: grant.id, endpoint_id: grant.endpoint_id });
    return grant;
  }
}

const scopeOf = (resource: string, base: string): string => (resource === apiResource(base) ? 'operator' : 'mcp');

const invalidGrant = (why: string) => new OAuthError('invalid_grant', why);
const CODE_REFUSALS = {
  unknown: invalidGrant('the authorization code is unknown'),
  expired: invalidGrant('the authorization code expired; authorize again'),
  reused: invalidGrant('the authorization code was already used; every token issued from it is revoked'),
  revoked: invalidGrant('the grant of this authorization code was revoked'),
  client: invalidGrant('the authorization code was issued to another client'),
  redirect_uri: invalidGrant('redirect_uri does not match the one the code was issued for'),
  verifier: invalidGrant('code_verifier does not match the code_challenge (PKCE)'),
  resource: new OAuthError('invalid_target', 'resource does not match the one the code was issued for'),
} as const;
const REFRESH_REFUSALS = {
  unknown: invalidGrant('the refresh token is unknown'),
  expired: invalidGrant('the refresh token expired; authorize again'),
  reused: invalidGrant('the refresh token was already used; the grant is revoked, authorize again'),
  revoked: invalidGrant('the grant was revoked (or its endpoint was); authorize again'),
  client: invalidGrant('the refresh token was issued to another client'),
  resource: new OAuthError('invalid_target', 'resource does not match the grant'),
} as const;

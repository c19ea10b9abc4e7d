import * as client from 'openid-client';
import { issuerAllowsHttp, type OidcSettings } from '../config.ts';
import type { Logger } from '../lib/log.ts';
import type { OidcIdentityInput as OidcIdentity } from '../services/humans.ts';

/**
 * Board sign-in through an OpenID Connect provider: authorization code flow with PKCE (S256), a
 * nonce and a state, the three kept in a short-lived HttpOnly cookie between /auth/login and
 * /auth/callback. openid-client verifies the ID token (signature, issuer, audience, expiry, nonce).
 *
 * SECURITY: no `amr`/`acr` check is made — whoever the issuer vouches for signs in. Switchboard
 * was designed around a passkey-only IdP; pointing SWITCHBOARD_OIDC_ISSUER at a provider that
 * accepts weaker factors makes board actions (vend, revoke) only as strong as that provider's
 * weakest login. Restrict who may sign in at the provider: humans are created on first sign-in.
 */

export const OIDC_STATE_COOKIE = 'sb_oidc_state';
/** How long a started sign-in may take at the provider. */
export const OIDC_STATE_TTL_MS = 10 * 60_000;
const SCOPES = 'openid profile email';

/** The refusal families of a callback: the browser's request was wrong (400) or the provider failed us (502). */
export class OidcError extends Error {
  constructor(
    readonly status: 400 | 502,
    message: string,
  ) {
    super(message);
    this.name = 'OidcError';
  }
}

interface PendingLogin {
  state: string;
  nonce: string;
  verifier: string;
  /** Epoch ms after which the cookie is worthless, whatever the browser kept. */
  exp: number;
}

export class OidcLogin {
  private config: Promise<client.Configuration> | null = null;

  constructor(
    private readonly settings: OidcSettings,
    private readonly baseUrl: () => string,
    private readonly log: Logger,
  ) {}

  get issuer(): string {
    return this.settings.issuer;
  }

  redirectUrl(): string {
    return this.settings.redirectUrl ?? `${this.baseUrl()}/auth/callback`;
  }

  /**
   * The provider's metadata, fetched once. A failed discovery is not kept, so the next sign-in
   * tries again: a provider that was down at startup does not need a restart of Switchboard.
   */
  discover(): Promise<client.Configuration> {
    if (!this.config) {
      const { issuer, clientId, clientSecret } = this.settings;
      const auth = clientSecret === undefined ? client.None() : client.ClientSecretBasic(clientSecret);
      // OIDC lets a client skip the ID token's signature when it came straight from the token
      // endpoint over TLS; we check it anyway (JWKS), so a spoofed or plain-http token endpoint
      // cannot mint identities.
      const execute = [client.enableNonRepudiationChecks, ...(issuerAllowsHttp(issuer) ? [client.allowInsecureRequests] : [])];
      this.config = client.discovery(new URL(issuer), clientId, undefined, auth, { execute }).catch((err: unknown) => {
        this.config = null;
        throw err;
      });
    }
    return this.config;
  }

  /** Starts a sign-in: the provider URL to send the browser to, and the cookie value that must come back. */
  async start(now: Date): Promise<{ url: string; cookie: string }> {
    let config: client.Configuration;
    try {
      config = await this.discover();
    } catch (err) {
      this.log.error({ err: errorText(err), issuer: this.settings.issuer }, 'oidc: discovery failed');
      throw new OidcError(502, `The identity provider ${this.settings.issuer} could not be reached. Try again shortly.`);
    }
    const pending: PendingLogin = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier: client.randomPKCECodeVerifier(),
      exp: now.getTime() + OIDC_STATE_TTL_MS,
    };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUrl(),
      scope: SCOPES,
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(pending.verifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    return { url: url.href, cookie: Buffer.from(JSON.stringify(pending)).toString('base64url') };
  }

  /**
   * Finishes a sign-in from the callback's query and the state cookie: checks state, exchanges the
   * code with the PKCE verifier and verifies the ID token and its nonce.
   */
  async finish(query: URLSearchParams, cookie: string | undefined, now: Date): Promise<OidcIdentity> {
    const pending = parsePending(cookie);
    if (!pending || pending.exp <= now.getTime()) {
      throw new OidcError(400, 'This sign-in was not started here or took longer than 10 minutes. Start again.');
    }
    const providerError = query.get('error');
    if (providerError !== null) {
      const description = query.get('error_description');
      throw new OidcError(400, `The identity provider refused the sign-in: ${providerError}${description ? ` (${description})` : ''}.`);
    }
    if (query.get('state') !== pending.state) {
      throw new OidcError(400, 'The sign-in answer does not match the sign-in this browser started (state mismatch). Start again.');
    }
    if (!query.get('code')) throw new OidcError(400, 'The identity provider sent no authorization code. Start again.');

    let claims: client.IDToken | undefined;
    try {
      const config = await this.discover();
      const current = new URL(this.redirectUrl());
      current.search = query.toString();
      const tokens = await client.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: pending.verifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
      claims = tokens.claims();
    } catch (err) {
      this.log.warn({ err: errorText(err), issuer: this.settings.issuer }, 'oidc: code exchange or ID token verification failed');
      throw new OidcError(502, 'The identity provider’s answer could not be verified, so you were not signed in. Try again; if it persists, tell the operator.');
    }
    if (!claims || typeof claims.sub !== 'string' || claims.sub === '') {
      throw new OidcError(502, 'The identity provider sent an ID token without a subject.');
    }
    const text = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
    return {
      issuer: claims.iss,
      subject: claims.sub,
      name: text(claims.name),
      email: text(claims.email),
      emailVerified: claims.email_verified === true,
      preferredUsername: text(claims.preferred_username),
    };
  }
}

function parsePending(cookie: string | undefined): PendingLogin | null {
  if (!cookie || cookie.length > 2048) return null;
  try {
    const v = JSON.parse(Buffer.from(cookie, 'base64url').toString('utf8')) as Partial<PendingLogin>;
    if (typeof v.state !== 'string' || typeof v.nonce !== 'string' || typeof v.verifier !== 'string' || typeof v.exp !== 'number') return null;
    return { state: v.state, nonce: v.nonce, verifier: v.verifier, exp: v.exp };
  } catch {
    return null;
  }
}

/** Provider errors are logged by message and code only: a response body could echo a code or token. */
function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

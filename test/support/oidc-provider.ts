import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';

/**
 * A small OpenID Connect provider over real HTTP for the board's sign-in tests: discovery, JWKS,
 * an authorization endpoint that approves at once as the configured user (no login screen), and a
 * token endpoint that checks the client secret, the redirect URI and the PKCE verifier before it
 * signs an RS256 ID token. `misbehave` makes it answer the way a broken or hostile provider would.
 */
export type Misbehaviour = 'none' | 'wrong-nonce' | 'wrong-audience' | 'foreign-key' | 'expired' | 'deny' | 'token-error';

export interface ProviderUser {
  sub: string;
  name?: string;
  email?: string;
  email_verified?: boolean;
  preferred_username?: string;
}

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  user: ProviderUser;
  misbehave: Misbehaviour;
  /** What the token endpoint was last asked, for assertions on PKCE and client auth. */
  tokenRequests: { codeVerifier: string | null; clientAuth: 'basic' | 'post' | 'none'; ok: boolean }[];
  /** The query of the last authorization request. */
  lastAuthorize: URLSearchParams | null;
  close(): Promise<void>;
}

interface IssuedCode {
  clientId: string;
  redirectUri: string;
  challenge: string;
  nonce: string | null;
  user: ProviderUser;
}

export async function startOidcProvider(opts: { clientId?: string; clientSecret?: string; user?: ProviderUser } = {}): Promise<TestOidcProvider> {
  const keys = await generateKeyPair('RS256');
  const foreign = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const codes = new Map<string, IssuedCode>();

  const provider: TestOidcProvider = {
    issuer: '',
    clientId: opts.clientId ?? 'switchboard-test',
    clientSecret: opts.clientSecret ?? randomBytes(16).toString('hex'),
    user: opts.user ?? { sub: 'subject-1', name: 'Ada Lovelace', email: 'ada@example.test', email_verified: true, preferred_username: 'ada' },
    misbehave: 'none',
    tokenRequests: [],
    lastAuthorize: null,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body));
  };

  async function idToken(code: IssuedCode): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const m = provider.misbehave;
    const claims: Record<string, unknown> = { ...code.user };
    if (code.nonce !== null) claims.nonce = m === 'wrong-nonce' ? 'not-the-nonce' : code.nonce;
    const key: CryptoKey = m === 'foreign-key' ? foreign.privateKey : keys.privateKey;
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(provider.issuer)
      .setAudience(m === 'wrong-audience' ? 'someone-else' : code.clientId)
      .setSubject(code.user.sub)
      .setIssuedAt(m === 'expired' ? now - 7200 : now)
      .setExpirationTime(m === 'expired' ? now - 3600 : now + 300)
      .sign(key);
  }

  function authorize(url: URL, res: ServerResponse) {
    const q = url.searchParams;
    provider.lastAuthorize = q;
    const redirectUri = q.get('redirect_uri');
    if (q.get('client_id') !== provider.clientId || !redirectUri) return json(res, 400, { error: 'invalid_request' });
    const back = new URL(redirectUri);
    const state = q.get('state');
    if (state !== null) back.searchParams.set('state', state);
    if (provider.misbehave === 'deny') {
      back.searchParams.set('error', 'access_denied');
      back.searchParams.set('error_description', 'the user said no');
    } else {
      if (q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge')) {
        return json(res, 400, { error: 'invalid_request', error_description: 'code flow with S256 PKCE only' });
      }
      const code = randomBytes(16).toString('base64url');
      codes.set(code, { clientId: provider.clientId, redirectUri, challenge: q.get('code_challenge')!, nonce: q.get('nonce'), user: { ...provider.user } });
      back.searchParams.set('code', code);
    }
    res.writeHead(302, { location: back.href });
    res.end();
  }

  async function token(req: IncomingMessage, res: ServerResponse) {
    let body = '';
    for await (const chunk of req) body += chunk;
    const form = new URLSearchParams(body);
    let clientId = form.get('client_id');
    let secret = form.get('client_secret');
    let clientAuth: 'basic' | 'post' | 'none' = secret === null ? 'none' : 'post';
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
    if (basic) {
      const [id, s] = Buffer.from(basic[1]!, 'base64').toString().split(':').map((p) => decodeURIComponent(p));
      clientId = id ?? null;
      secret = s ?? null;
      clientAuth = 'basic';
    }
    const verifier = form.get('code_verifier');
    const record = { codeVerifier: verifier, clientAuth, ok: false };
    provider.tokenRequests.push(record);
    if (clientId !== provider.clientId || secret !== provider.clientSecret) return json(res, 401, { error: 'invalid_client' });
    const code = codes.get(form.get('code') ?? '');
    codes.delete(form.get('code') ?? '');
    if (!code || form.get('grant_type') !== 'authorization_code' || form.get('redirect_uri') !== code.redirectUri) {
      return json(res, 400, { error: 'invalid_grant' });
    }
    if (!verifier || createHash('sha256').update(verifier).digest('base64url') !== code.challenge) {
      return json(res, 400, { error: 'invalid_grant', error_description: 'PKCE verification failed' });
    }
    if (provider.misbehave === 'token-error') return json(res, 500, { error: 'server_error' });
    record.ok = true;
    json(res, 200, { access_token: randomBytes(16).toString('hex'), token_type: 'Bearer', expires_in: 300, id_token: await idToken(code) });
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', provider.issuer || 'http://127.0.0.1');
    const route = `${req.method} ${url.pathname}`;
    if (route === 'GET /.well-known/openid-configuration') {
      return json(res, 200, {
        issuer: provider.issuer,
        authorization_endpoint: `${provider.issuer}/authorize`,
        token_endpoint: `${provider.issuer}/token`,
        jwks_uri: `${provider.issuer}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
        scopes_supported: ['openid', 'profile', 'email'],
      });
    }
    if (route === 'GET /jwks') return json(res, 200, { keys: [jwk] });
    if (route === 'GET /authorize') return authorize(url, res);
    if (route === 'POST /token') {
      token(req, res).catch(() => json(res, 500, { error: 'server_error' }));
      return;
    }
    json(res, 404, { error: 'not_found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  provider.issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return provider;
}

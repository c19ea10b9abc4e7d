import { createHash, randomBytes } from 'node:crypto';
import { VERSION } from '../lib/version.ts';
import { CliError } from './output.ts';

// The CLI as an OAuth 2.1 public client of the server it logs in to: discovery (RFC 9728, then
// RFC 8414), dynamic registration (RFC 7591), the authorization code with PKCE S256 (RFC 7636) for
// the resource `<base>/api` (RFC 8707), and rotating refresh tokens. No secret is ever kept but
// the tokens themselves.

const TIMEOUT_MS = 30_000;
const UNRESERVED = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~';

/** What discovery found: the three endpoints the login needs, and who the issuer is. */
export interface ServerMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  registration_endpoint: string;
  /** RFC 9207: the authorization response then carries `iss`, and the CLI insists on it. */
  authorization_response_iss_parameter_supported?: boolean;
}

/** A token endpoint's success answer, checked. `expires_in` is seconds, when the server said. */
export interface TokenSet {
  access_token: string;
  refresh_token?: string;
  expires_in?: number;
}

/** The token endpoint said no (RFC 6749 §5.2): `invalid_grant` when a refresh token is spent or revoked. */
export class OAuthRefused extends CliError {
  constructor(
    message: string,
    readonly error: string,
    /** The server's `error_description`, or the error code when it gave none. */
    readonly reason: string = error,
  ) {
    super(message);
    this.name = 'OAuthRefused';
  }
}

/** The server could not be reached (or did not answer in time): not a refusal. */
export class OAuthUnreachable extends CliError {
  override name = 'OAuthUnreachable';
}

/** `n` characters drawn uniformly from the unreserved alphabet (RFC 7636 §4.1): 66 symbols, no modulo bias. */
export function randomUnreserved(n: number): string {
  let out = '';
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < 198 && out.length < n) out += UNRESERVED[b % 66];
    }
  }
  return out;
}

/** A PKCE pair: a 96-character verifier and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomUnreserved(96);
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** The `state` the loopback listener waits for: 32 unreserved characters. */
export const newState = (): string => randomUnreserved(32);

/** The resource the CLI asks for: the operator API, acting as the human who approves. */
export const apiResource = (base: string): string => `${base}/api`;

export interface AuthorizeParams {
  clientId: string;
  redirectUri: string;
  state: string;
  challenge: string;
  resource: string;
}

/** The URL the browser opens: the authorization endpoint with the request in its query (its own query kept). */
export function authorizeUrl(endpoint: string, p: AuthorizeParams): string {
  const url = new URL(endpoint);
  const q = url.searchParams;
  q.set('response_type', 'code');
  q.set('client_id', p.clientId);
  q.set('redirect_uri', p.redirectUri);
  q.set('state', p.state);
  q.set('code_challenge', p.challenge);
  q.set('code_challenge_method', 'S256');
  q.set('resource', p.resource);
  return url.toString();
}

const headers = { 'user-agent': `switchboard-cli/${VERSION}`, accept: 'application/json' };

/** One HTTP exchange with the server's OAuth side; an unreachable server or a non-JSON answer is a CliError naming the URL. */
async function call(url: string, init: RequestInit = {}): Promise<{ status: number; json: Record<string, unknown> | null }> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, redirect: 'error', headers: { ...headers, ...init.headers }, signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (e) {
    const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
    if (err.name === 'TimeoutError') throw new OAuthUnreachable(`cannot reach ${url}: no answer within ${TIMEOUT_MS / 1000} s`);
    throw new OAuthUnreachable(`cannot reach ${url}: ${err.cause?.code ?? err.cause?.message ?? err.message}`);
  }
  const text = await res.text();
  try {
    const json = JSON.parse(text) as unknown;
    return { status: res.status, json: json && typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : null };
  } catch {
    return { status: res.status, json: null };
  }
}

const isHttpUrl = (v: unknown): v is string => typeof v === 'string' && /^https?:\/\//i.test(v) && URL.canParse(v);

/**
 * Protected-resource metadata for `<base>/api`, then its first authorization server's metadata.
 * The resource and issuer must be the ones asked for (RFC 9728 §3.3, RFC 8414 §3.3), and none of
 * the endpoints may drop from https to http.
 */
export async function discover(base: string): Promise<ServerMetadata> {
  const prmUrl = `${base}/.well-known/oauth-protected-resource/api`;
  const prm = await call(prmUrl);
  const withToken = `log in with a personal access token instead: switchboard login --url ${base} --with-token`;
  if (prm.status !== 200 || !prm.json) {
    throw new CliError(`${base} does not offer a browser login (GET ${prmUrl} answered HTTP ${prm.status}${prm.json ? '' : ' without JSON'}); ${withToken}`);
  }
  if (prm.json.resource !== apiResource(base)) {
    throw new CliError(`${prmUrl} names the resource ${JSON.stringify(prm.json.resource)}, not ${apiResource(base)}; is --url the server's base URL?`);
  }
  const servers = prm.json.authorization_servers;
  const issuer = Array.isArray(servers) ? servers[0] : undefined;
  if (!isHttpUrl(issuer)) throw new CliError(`${prmUrl} names no authorization server; ${withToken}`);
  const asUrl = `${issuer.replace(/\/+$/, '')}/.well-known/oauth-authorization-server`;
  const as = await call(asUrl);
  if (as.status !== 200 || !as.json) throw new CliError(`the authorization server's metadata (GET ${asUrl}) answered HTTP ${as.status}${as.json ? '' : ' without JSON'}`);
  const m = as.json;
  if (m.issuer !== issuer) throw new CliError(`${asUrl} says its issuer is ${JSON.stringify(m.issuer)}, not ${issuer}; refusing to log in there`);
  const missing = (['authorization_endpoint', 'token_endpoint', 'registration_endpoint'] as const).filter((k) => !isHttpUrl(m[k]));
  if (missing.length) throw new CliError(`${asUrl} gives no ${missing.join(', ')}, which the browser login needs; ${withToken}`);
  const meta = m as unknown as ServerMetadata;
  if (/^https:/i.test(base)) {
    const plain = (['authorization_endpoint', 'token_endpoint', 'registration_endpoint'] as const).filter((k) => !/^https:/i.test(meta[k]));
    if (plain.length) throw new CliError(`${asUrl} sends the login to plain http (${plain.join(', ')}) although ${base} is https; refusing`);
  }
  return {
    issuer,
    authorization_endpoint: meta.authorization_endpoint,
    token_endpoint: meta.token_endpoint,
    registration_endpoint: meta.registration_endpoint,
    authorization_response_iss_parameter_supported: m.authorization_response_iss_parameter_supported === true,
  };
}

/** The server's `{error, error_description}` in one line. */
function oauthError(json: Record<string, unknown> | null, status: number): { error: string; desc: string; text: string } {
  const error = typeof json?.error === 'string' ? json.error.slice(0, 100) : `http_${status}`;
  const desc = typeof json?.error_description === 'string' ? json.error_description.slice(0, 300) : '';
  return { error, desc, text: desc ? `${desc} (${error})` : `HTTP ${status} (${error})` };
}

/** Registers this CLI run as a public client whose one redirect URI is the loopback listener's. */
export async function registerClient(meta: ServerMetadata, redirectUri: string): Promise<string> {
  const r = await call(meta.registration_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'switchboard CLI',
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    }),
  });
  if (r.status !== 201 && r.status !== 200) throw new CliError(`registering the CLI with ${meta.registration_endpoint} failed: ${oauthError(r.json, r.status).text}`);
  const clientId = r.json?.client_id;
  if (typeof clientId !== 'string' || clientId === '') throw new CliError(`${meta.registration_endpoint} registered the CLI but gave no client_id`);
  return clientId;
}

/** POST to the token endpoint, form-encoded; a 4xx with an OAuth error is OAuthRefused. */
async function tokenRequest(tokenEndpoint: string, form: Record<string, string>): Promise<TokenSet> {
  const r = await call(tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  if (r.status !== 200) {
    const { error, desc, text } = oauthError(r.json, r.status);
    if (r.status >= 400 && r.status < 500 && typeof r.json?.error === 'string') throw new OAuthRefused(`${tokenEndpoint} refused: ${text}`, error, desc || error);
    throw new CliError(`${tokenEndpoint} failed: ${text}`);
  }
  const j = r.json ?? {};
  if (typeof j.access_token !== 'string' || j.access_token === '') throw new CliError(`${tokenEndpoint} answered without an access_token`);
  if (typeof j.token_type !== 'string' || j.token_type.toLowerCase() !== 'bearer') throw new CliError(`${tokenEndpoint} answered token_type ${JSON.stringify(j.token_type)}; the CLI speaks Bearer only`);
  return {
    access_token: j.access_token,
    refresh_token: typeof j.refresh_token === 'string' && j.refresh_token !== '' ? j.refresh_token : undefined,
    expires_in: typeof j.expires_in === 'number' && Number.isFinite(j.expires_in) && j.expires_in > 0 ? j.expires_in : undefined,
  };
}

export function exchangeCode(meta: ServerMetadata, p: { code: string; verifier: string; clientId: string; redirectUri: string; resource: string }): Promise<TokenSet> {
  return tokenRequest(meta.token_endpoint, {
    grant_type: 'authorization_code',
    code: p.code,
    code_verifier: p.verifier,
    client_id: p.clientId,
    redirect_uri: p.redirectUri,
    resource: p.resource,
  });
}

export function refreshGrant(tokenEndpoint: string, p: { refreshToken: string; clientId: string }): Promise<TokenSet> {
  return tokenRequest(tokenEndpoint, { grant_type: 'refresh_token', refresh_token: p.refreshToken, client_id: p.clientId });
}

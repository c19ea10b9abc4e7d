import { OAUTH_ACCESS_TOKEN_PREFIX } from '../lib/secrets.ts';
import { VERSION } from '../lib/version.ts';
import type { EndpointView, ErrorEnvelope } from '../api/wire.ts';
import type { Credentials, LoadedCredentials } from './credentials.ts';
import { suggestEndpoints } from './did-you-mean.ts';
import { OAuthRefused, OAuthUnreachable } from './oauth.ts';
import { CliError, EXIT_FAILURE, EXIT_USAGE } from './output.ts';
import { isDue, logInAgain, refreshSavedLogin } from './refresh.ts';

/**
 * What went wrong, in the words doctor and `auth status` report: the server could not be reached,
 * or it refused the token (and why), or it answered something else.
 */
export type ApiProblem = 'unreachable' | 'not_switchboard' | 'unknown_token' | 'revoked_token' | 'endpoint_credential' | 'login_expired' | 'refused';

/** A failed /api/v1 call: one line for people, the server's code and the problem for code. */
export class ApiError extends CliError {
  constructor(
    message: string,
    readonly problem: ApiProblem,
    readonly code: string,
    readonly field?: string,
  ) {
    // Whoever found it, a wrong argument is a usage error (exit 2); any other refusal exits 1.
    super(message, code === 'invalid_argument' || code === 'payload_too_large' ? EXIT_USAGE : EXIT_FAILURE);
    this.name = 'ApiError';
  }
}

export interface ApiClientOptions {
  timeoutMs?: number;
  /** The command's flag (or argument) for each API field, so an invalid_argument names what the user typed. */
  flags?: Record<string, string>;
  /** The endpoint slug or id the command was given: a not_found then suggests the caller's slugs. */
  endpointRef?: string;
}

/** Why fetch failed, for a person: the cause's code made into words. */
function unreachable(url: string, from: string | undefined, e: unknown): string {
  const where = from ? `${url} (from ${from})` : url;
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError') return `cannot reach ${where}: no answer within the timeout`;
  const code = err.cause?.code ?? '';
  const host = new URL(url).hostname;
  if (code === 'ECONNREFUSED') return `cannot reach ${where}: connection refused (ECONNREFUSED); is the server running there?`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME' || code === 'EAI_FAIL') return `cannot reach ${where}: no such host ${host} (DNS lookup failed, ${code})`;
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'EPROTO') return `cannot reach ${where}: TLS failed (${code}); does the server speak plain http://?`;
  if (/CERT|SELF_SIGNED/.test(code)) return `cannot reach ${where}: its TLS certificate was refused (${code})`;
  return `cannot reach ${where}: ${code || err.cause?.message || err.message}`;
}

/** A 401 in words: the guard's `reason` when it gives one, else what the token's own prefix says. */
function refusedToken(creds: Partial<LoadedCredentials> & Credentials, reason: unknown): { message: string; problem: ApiProblem } {
  const token = `the token${creds.tokenFrom ? ` from ${creds.tokenFrom}` : ''}`;
  if (reason === 'endpoint_credential' || creds.token.startsWith('sbk_')) {
    return {
      problem: 'endpoint_credential',
      message: `${token} is an endpoint credential (sbk_...), which only an agent's MCP connection takes; the CLI needs a personal access token (sbp_...) from \`switchboard admin token create HANDLE\``,
    };
  }
  if (creds.token.startsWith(OAUTH_ACCESS_TOKEN_PREFIX)) {
    return {
      problem: 'login_expired',
      message: `${token} is a browser login's access token that ${creds.url} no longer accepts (it lasts an hour, and a revoked grant ends it sooner); ${logInAgain(creds.url)}`,
    };
  }
  if (reason === 'revoked') {
    return { problem: 'revoked_token', message: `${token} was revoked; mint a new one with \`switchboard admin token create HANDLE\`` };
  }
  return {
    problem: 'unknown_token',
    message: `${creds.url} does not accept ${token}: it is mistyped or from another server`,
  };
}

/**
 * A thin /api/v1 client. Failures become a one-line ApiError carrying the server's code. A browser
 * login's access token is refreshed silently: before a request when it expires within 30 s, and
 * once after a 401, then the request is sent again.
 */
export class ApiClient {
  private readonly creds: Credentials & Partial<LoadedCredentials>;

  constructor(
    creds: Credentials & Partial<LoadedCredentials>,
    private readonly options: ApiClientOptions = {},
  ) {
    this.creds = { ...creds };
  }

  get baseUrl(): string {
    return this.creds.url;
  }

  /** The token the next request sends (a refresh replaces a browser login's). */
  get token(): string {
    return this.creds.token;
  }

  /** A browser login's access token expiry, when refreshing is this client's to do. */
  get expiresAt(): string | undefined {
    return this.#refreshable ? this.creds.oauth!.expiresAt : undefined;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    try {
      return await this.#send<T>(method, path, body);
    } catch (e) {
      const ref = this.options.endpointRef;
      if (!(e instanceof ApiError) || e.code !== 'not_found' || ref === undefined) throw e;
      const mine = await this.#send<EndpointView[]>('GET', '/endpoints').then((r) => r.body, () => null);
      // The endpoint exists: what was not found is something under it (a todo, a hook).
      if (mine === null || mine.some((x) => x.slug === ref || x.id === ref)) throw e;
      const close = suggestEndpoints(ref, mine);
      throw new ApiError(`endpoint ${ref} was not found among yours${close.length ? `; did you mean ${close.join(' or ')}?` : ''}`, 'refused', 'not_found');
    }
  }

  /** Whether this client holds a browser login it may refresh (the file's token, not SWITCHBOARD_TOKEN). */
  get #refreshable(): boolean {
    return this.creds.oauth !== undefined && this.creds.file !== undefined;
  }

  async #refresh(): Promise<void> {
    const { oauth, file } = this.creds;
    try {
      const next = await refreshSavedLogin(file!, { url: this.creds.url, token: this.creds.token, oauth: oauth! });
      this.creds.token = next.token;
      this.creds.oauth = next.oauth;
    } catch (e) {
      if (e instanceof OAuthRefused) throw new ApiError(e.message, 'login_expired', e.error);
      if (e instanceof OAuthUnreachable) throw new ApiError(`refreshing the browser login: ${e.message}`, 'unreachable', 'unreachable');
      throw e;
    }
  }

  async #send<T>(method: string, path: string, body?: unknown, retried = false): Promise<{ status: number; body: T }> {
    if (!retried && this.#refreshable && isDue(this.creds.oauth!)) await this.#refresh();
    let res: Response;
    try {
      res = await fetch(`${this.creds.url}/api/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.creds.token}`,
          'user-agent': `switchboard-cli/${VERSION}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 30_000),
      });
    } catch (e) {
      throw new ApiError(unreachable(this.creds.url, this.creds.urlFrom, e), 'unreachable', 'unreachable');
    }
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* keep the text */
    }
    if (res.ok) return { status: res.status, body: parsed as T };
    if (res.status === 401 && this.#refreshable) {
      if (!retried) {
        await this.#refresh();
        return this.#send<T>(method, path, body, true);
      }
      throw new ApiError(`${this.creds.url} refused the browser login saved in ${this.creds.file} even after refreshing it; ${logInAgain(this.creds.url)} (unauthenticated)`, 'login_expired', 'unauthenticated');
    }
    const env = (parsed && typeof parsed === 'object' ? parsed : {}) as Partial<ErrorEnvelope>;
    if (typeof env.code !== 'string') {
      // Not our error envelope: a proxy's page, or a URL that is not a Switchboard server at all.
      const from = this.creds.urlFrom ? ` (URL from ${this.creds.urlFrom})` : '';
      throw new ApiError(`${this.creds.url}/api/v1${path} answered HTTP ${res.status} without a Switchboard error; is ${this.creds.url} a Switchboard server?${from}`, 'not_switchboard', `http_${res.status}`);
    }
    if (env.code === 'unauthenticated') {
      const { message, problem } = refusedToken(this.creds, env.reason);
      throw new ApiError(`${message} (unauthenticated)`, problem, env.code);
    }
    const field = typeof env.field === 'string' ? env.field : undefined;
    throw new ApiError(`${this.#inFlags(env.error ?? `HTTP ${res.status}`, field)} (${env.code})`, 'refused', env.code, field);
  }

  /** `target_queue: ...` becomes `--queue: ...` when the command maps that field to a flag. */
  #inFlags(message: string, field: string | undefined): string {
    if (field === undefined) return message;
    const flag = this.options.flags?.[field] ?? this.options.flags?.[field.split('.')[0]!];
    if (flag === undefined) return message;
    return message.startsWith(`${field}:`) ? `${flag}:${message.slice(field.length + 1)}` : `${flag}: ${message}`;
  }

  async get<T>(path: string): Promise<T> {
    return (await this.request<T>('GET', path)).body;
  }

  async post<T>(path: string, body?: unknown): Promise<T> {
    return (await this.request<T>('POST', path, body ?? {})).body;
  }
}

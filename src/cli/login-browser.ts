import type { CliContext } from './context.ts';
import type { Credentials } from './credentials.ts';
import { openBrowser, startLoopback } from './loopback.ts';
import { apiResource, authorizeUrl, discover, exchangeCode, newState, OAuthRefused, pkcePair, registerClient } from './oauth.ts';
import { CliError } from './output.ts';
import { expiresAtFrom } from './refresh.ts';

/** How long `switchboard login` waits for the browser. */
export const LOGIN_WAIT_MS = 5 * 60_000;

export interface BrowserLoginOptions {
  /** false: only print the URL (`--no-browser`). */
  browser: boolean;
  waitMs?: number;
  tickMs?: number;
}

const minutesLeft = (ms: number): string => {
  const s = Math.ceil(ms / 1000);
  if (s % 60 === 0) return `${s / 60} minute${s === 60 ? '' : 's'}`;
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
};

/**
 * `switchboard login --url URL` without a token: discovery, a loopback listener, dynamic
 * registration, the browser's consent, and the code exchanged with its PKCE verifier. Returns the
 * credentials to save (the access token where a personal token goes, and the refresh token).
 * The URL is printed on stdout whatever happens to the browser; progress goes to stderr.
 */
export async function browserLogin(ctx: CliContext, base: string, opts: BrowserLoginOptions): Promise<Credentials> {
  const meta = await discover(base);
  const loopback = await startLoopback();
  try {
    const clientId = await registerClient(meta, loopback.redirectUri);
    const { verifier, challenge } = pkcePair();
    const state = newState();
    const resource = apiResource(base);
    const url = authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: loopback.redirectUri, state, challenge, resource });

    ctx.io.out(`To log in, open this URL in your browser and approve the CLI (sign in to the board if it asks):\n\n  ${url}\n\n`);
    if (opts.browser) {
      const started = await openBrowser(url, ctx.env);
      ctx.io.err(started ? 'switchboard: asked your browser to open it.\n' : 'switchboard: could not start a browser (set $BROWSER, or open the URL above yourself).\n');
    }
    const waitMs = opts.waitMs ?? LOGIN_WAIT_MS;
    ctx.io.err(`switchboard: waiting for the browser's answer on ${loopback.redirectUri} (up to ${minutesLeft(waitMs)}; Ctrl-C to stop)...\n`);
    const code = await loopback.waitForCode({
      state,
      issuer: meta.issuer,
      issRequired: meta.authorization_response_iss_parameter_supported,
      timeoutMs: waitMs,
      tickMs: opts.tickMs ?? 30_000,
      onTick: (left) => ctx.io.err(`switchboard: still waiting for the browser (${minutesLeft(left)} left)...\n`),
    });
    let tokens;
    try {
      tokens = await exchangeCode(meta, { code, verifier, clientId, redirectUri: loopback.redirectUri, resource });
    } catch (e) {
      if (e instanceof OAuthRefused) throw new CliError(`the server would not exchange the approved code: ${e.reason} (${e.error}); run switchboard login again`);
      throw e;
    }
    if (!tokens.refresh_token) ctx.io.err('switchboard: the server gave no refresh token; this login lasts until the access token expires.\n');
    const creds: Credentials = { url: base, token: tokens.access_token };
    if (tokens.refresh_token) creds.oauth = { clientId, refreshToken: tokens.refresh_token, expiresAt: expiresAtFrom(tokens), tokenEndpoint: meta.token_endpoint };
    return creds;
  } finally {
    await loopback.close();
  }
}

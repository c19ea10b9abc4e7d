import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCredentials, readCredentialsFile, writeCredentialsFile } from './credentials.ts';
import { browserCommand, startLoopback } from './loopback.ts';
import { authorizeUrl, discover, newState, pkcePair, randomUnreserved } from './oauth.ts';
import { isDue, refreshSavedLogin, withFileLock } from './refresh.ts';

// The pieces of the CLI's browser login that need no Switchboard server: PKCE, the authorize URL,
// the browser command, the loopback listener, discovery's checks, the credentials file and the
// locked, rotating refresh. login-browser.test.ts runs the whole flow against the real server.

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A throwaway HTTP server on 127.0.0.1 whose answers the test sets. */
async function fakeServer(): Promise<{ url: string; handle(h: Handler): void; close(): Promise<void> }> {
  let handler: Handler = (_q, res) => void res.writeHead(404).end();
  const srv = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => handler(req, res, body));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`,
    handle: (h) => void (handler = h),
    close: () => new Promise((r) => srv.close(() => r())),
  };
}

/** A promise the test awaits later: marked handled now, so a rejection before then is not "unhandled". */
const later = <T>(p: Promise<T>): Promise<T> => {
  p.catch(() => {});
  return p;
};

const json = (res: ServerResponse, status: number, body: unknown) => void res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));

let dir: string;
let fake: Awaited<ReturnType<typeof fakeServer>>;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sb-oauth-cli-'));
  fake = await fakeServer();
});
afterAll(() => fake.close());

describe('PKCE, state and the authorize URL', () => {
  it('makes a 96-character unreserved verifier with its S256 challenge, and a 32-character state', () => {
    const { verifier, challenge } = pkcePair();
    expect(verifier).toMatch(/^[A-Za-z0-9\-._~]{96}$/);
    expect(challenge).toBe(createHash('sha256').update(verifier).digest('base64url'));
    expect(challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newState()).toMatch(/^[A-Za-z0-9\-._~]{32}$/);
    expect(new Set(Array.from({ length: 50 }, () => pkcePair().verifier)).size).toBe(50);
    // Every symbol of the alphabet turns up: the draw is not stuck on a subset.
    expect(new Set(randomUnreserved(20_000)).size).toBe(66);
  });

  it('carries response_type, client_id, redirect_uri, state, the challenge with S256 and the resource', () => {
    const url = new URL(
      authorizeUrl('https://sb.example/oauth/authorize?tenant=a', { clientId: 'c1', redirectUri: 'http://127.0.0.1:5000/callback', state: 's t', challenge: 'ch', resource: 'https://sb.example/api' }),
    );
    expect(url.origin + url.pathname).toBe('https://sb.example/oauth/authorize');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      tenant: 'a',
      response_type: 'code',
      client_id: 'c1',
      redirect_uri: 'http://127.0.0.1:5000/callback',
      state: 's t',
      code_challenge: 'ch',
      code_challenge_method: 'S256',
      resource: 'https://sb.example/api',
    });
  });
});

describe('opening the browser', () => {
  const url = 'https://sb.example/oauth/authorize?a=1&b=2';
  it('runs $BROWSER (with %s, with arguments, the first of a list) without a shell, else the platform opener', () => {
    expect(browserCommand(url, { BROWSER: 'firefox' })).toEqual(['firefox', [url]]);
    expect(browserCommand(url, { BROWSER: 'chromium --new-window' })).toEqual(['chromium', ['--new-window', url]]);
    expect(browserCommand(url, { BROWSER: 'w3m %s' })).toEqual(['w3m', [url]]);
    expect(browserCommand(url, { BROWSER: ':lynx:links' })).toEqual(['lynx', [url]]);
    expect(browserCommand(url, {}, 'linux')).toEqual(['xdg-open', [url]]);
    expect(browserCommand(url, {}, 'darwin')).toEqual(['open', [url]]);
    expect(browserCommand(url, {}, 'win32')).toEqual(['rundll32', ['url.dll,FileProtocolHandler', url]]);
  });
});

describe('the loopback listener', () => {
  const get = async (u: string) => {
    const r = await fetch(u);
    return { status: r.status, text: await r.text(), headers: r.headers };
  };

  it('listens on 127.0.0.1 at /callback, ignores an answer without our state, and takes the one with it', async () => {
    const lb = await startLoopback();
    try {
      expect(lb.redirectUri).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
      const waiting = lb.waitForCode({ state: 'ours', issuer: 'http://sb', timeoutMs: 10_000 });
      const other = await get(`${lb.redirectUri}?code=evil&state=theirs`);
      expect(other.status).toBe(400);
      expect(other.text).toContain('does not belong to the login');
      expect((await get(`${lb.redirectUri}?code=evil`)).status).toBe(400);
      expect((await get(lb.redirectUri.replace('/callback', '/elsewhere'))).status).toBe(404);
      const ok = await get(`${lb.redirectUri}?code=good&state=ours&iss=http%3A%2F%2Fsb`);
      expect(ok.status).toBe(200);
      expect(ok.text).toContain('You can close this tab');
      expect(ok.headers.get('cache-control')).toBe('no-store');
      expect(ok.headers.get('content-security-policy')).toContain("default-src 'none'");
      await expect(waiting).resolves.toBe('good');
    } finally {
      await lb.close();
    }
  });

  it('turns a denial into a clear error, refuses another issuer, and insists on iss when the server said it sends it', async () => {
    const lb = await startLoopback();
    try {
      const denied = later(lb.waitForCode({ state: 's1', issuer: 'http://sb', timeoutMs: 10_000 }));
      const page = await get(`${lb.redirectUri}?error=access_denied&error_description=${encodeURIComponent('the human said <no>')}&state=s1`);
      expect(page.text).toContain('the human said &#60;no&#62;');
      await expect(denied).rejects.toThrow('the login was denied in the browser: the human said <no> (access_denied)');

      const mixUp = later(lb.waitForCode({ state: 's2', issuer: 'http://sb', timeoutMs: 10_000 }));
      await get(`${lb.redirectUri}?code=c&state=s2&iss=http%3A%2F%2Fevil`);
      await expect(mixUp).rejects.toThrow('names the issuer "http://evil", not http://sb; refusing it');

      const noIss = later(lb.waitForCode({ state: 's3', issuer: 'http://sb', issRequired: true, timeoutMs: 10_000 }));
      await get(`${lb.redirectUri}?code=c&state=s3`);
      await expect(noIss).rejects.toThrow('names the issuer null');

      const other = later(lb.waitForCode({ state: 's4', issuer: 'http://sb', timeoutMs: 10_000 }));
      await get(`${lb.redirectUri}?error=server_error&state=s4`);
      await expect(other).rejects.toThrow('the authorization server refused the login (server_error)');
    } finally {
      await lb.close();
    }
  });

  it('gives up after its time with a clear error, reporting progress meanwhile', async () => {
    const lb = await startLoopback();
    const ticks: number[] = [];
    try {
      await expect(lb.waitForCode({ state: 's', issuer: 'http://sb', timeoutMs: 400, tickMs: 100, onTick: (l) => ticks.push(l) })).rejects.toThrow(
        /^no answer from the browser within 1 s; run switchboard login again/,
      );
      expect(ticks.length).toBeGreaterThanOrEqual(2);
      expect(ticks[1]!).toBeLessThan(ticks[0]!);
    } finally {
      await lb.close();
    }
  });
});

describe('discovery', () => {
  const prm = (base: string) => ({ resource: `${base}/api`, authorization_servers: [base] });
  const as = (base: string) => ({ issuer: base, authorization_endpoint: `${base}/oauth/authorize`, token_endpoint: `${base}/oauth/token`, registration_endpoint: `${base}/oauth/register` });

  it('follows the protected resource to its authorization server and returns the three endpoints', async () => {
    fake.handle((req, res) => {
      if (req.url === '/.well-known/oauth-protected-resource/api') return json(res, 200, prm(fake.url));
      if (req.url === '/.well-known/oauth-authorization-server') return json(res, 200, as(fake.url));
      json(res, 404, {});
    });
    expect(await discover(fake.url)).toEqual({ ...as(fake.url), authorization_response_iss_parameter_supported: false });
  });

  it('says a server without OAuth offers no browser login, and refuses a wrong resource, issuer or a missing endpoint', async () => {
    fake.handle((_q, res) => json(res, 404, { code: 'not_found' }));
    await expect(discover(fake.url)).rejects.toThrow(`${fake.url} does not offer a browser login (GET ${fake.url}/.well-known/oauth-protected-resource/api answered HTTP 404); log in with a personal access token instead: switchboard login --url ${fake.url} --with-token`);

    let asBody: Record<string, unknown> = {};
    let prmBody: Record<string, unknown> = prm(fake.url);
    fake.handle((req, res) => json(res, 200, req.url!.includes('protected') ? prmBody : asBody));
    asBody = { ...as(fake.url), registration_endpoint: undefined };
    await expect(discover(fake.url)).rejects.toThrow('gives no registration_endpoint, which the browser login needs');
    asBody = { ...as(fake.url), issuer: 'http://elsewhere' };
    await expect(discover(fake.url)).rejects.toThrow('says its issuer is "http://elsewhere"');
    prmBody = { ...prm(fake.url), resource: 'http://elsewhere/api' };
    await expect(discover(fake.url)).rejects.toThrow(`names the resource "http://elsewhere/api", not ${fake.url}/api`);
  });
});

describe('the credentials file and the silent refresh', () => {
  it('keeps a token login as {url, token} and a browser login with its refresh token, mode 0600', async () => {
    const path = join(dir, 'nested', 'creds.json');
    await writeCredentialsFile(path, { url: 'http://sb', token: 'sbp_x' });
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual({ url: 'http://sb', token: 'sbp_x' });
    const oauth = { clientId: 'c', refreshToken: 'r1', expiresAt: '2030-01-01T00:00:00.000Z', tokenEndpoint: 'http://sb/oauth/token' };
    await writeCredentialsFile(path, { url: 'http://sb', token: 'a1', oauth });
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'nested'))).mode & 0o777).toBe(0o700);
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual({ url: 'http://sb', token: 'a1', client_id: 'c', refresh_token: 'r1', expires_at: oauth.expiresAt, token_endpoint: oauth.tokenEndpoint });
    expect(await readCredentialsFile(path)).toEqual({ url: 'http://sb', token: 'a1', oauth });
    // The file's token refreshes from the file; SWITCHBOARD_TOKEN wins and is used as given.
    expect(await loadCredentials({ SWITCHBOARD_CREDENTIALS: path })).toMatchObject({ token: 'a1', oauth, file: path });
    const fromEnv = await loadCredentials({ SWITCHBOARD_CREDENTIALS: path, SWITCHBOARD_TOKEN: 'sbp_env' });
    expect(fromEnv).toMatchObject({ token: 'sbp_env', tokenFrom: 'SWITCHBOARD_TOKEN' });
    expect(fromEnv.oauth).toBeUndefined();
    expect(isDue(oauth, Date.parse('2029-12-31T23:59:29Z'))).toBe(false);
    expect(isDue(oauth, Date.parse('2029-12-31T23:59:29Z') + 2000)).toBe(true);
  });

  it('spends the refresh token once for two commands refreshing together, saves the rotated pair, and says to log in again when refused', async () => {
    const path = join(dir, 'refresh.json');
    const grants: string[] = [];
    let n = 0;
    let refuse = false;
    fake.handle((req, res, body) => {
      const form = new URLSearchParams(body);
      grants.push(`${form.get('grant_type')} ${form.get('refresh_token')} ${form.get('client_id')}`);
      if (refuse) return json(res, 400, { error: 'invalid_grant', error_description: 'the refresh token was already used' });
      n++;
      setTimeout(() => json(res, 200, { access_token: `a${n + 1}`, token_type: 'Bearer', expires_in: 3600, refresh_token: `r${n + 1}` }), 150);
    });
    const oauth = { clientId: 'cid', refreshToken: 'r1', expiresAt: new Date(Date.now() + 10_000).toISOString(), tokenEndpoint: `${fake.url}/oauth/token` };
    const held = { url: 'http://sb', token: 'a1', oauth };
    await writeCredentialsFile(path, held);
    const [one, two] = await Promise.all([refreshSavedLogin(path, held), refreshSavedLogin(path, held)]);
    expect(grants).toEqual(['refresh_token r1 cid']);
    expect(one).toEqual(two);
    expect(one).toMatchObject({ token: 'a2', oauth: { refreshToken: 'r2', clientId: 'cid' } });
    expect(Date.parse(one.oauth.expiresAt) - Date.now()).toBeGreaterThan(3590_000);
    expect(await readCredentialsFile(path)).toEqual(one);
    expect((await stat(path)).mode & 0o777).toBe(0o600);

    refuse = true;
    await expect(refreshSavedLogin(path, one)).rejects.toThrow(`the browser login saved in ${path} can no longer be refreshed, the server says: the refresh token was already used (invalid_grant); log in again: switchboard login --url http://sb`);
    await expect(stat(`${path}.lock`)).rejects.toThrow(/ENOENT/);
  });

  it('takes over a lock left by a command that died', async () => {
    const path = join(dir, 'stale.json');
    await writeFile(`${path}.lock`, '1\n');
    const { utimes } = await import('node:fs/promises');
    const old = new Date(Date.now() - 120_000);
    await utimes(`${path}.lock`, old, old);
    await expect(withFileLock(path, async () => 'ran')).resolves.toBe('ran');
  });
});

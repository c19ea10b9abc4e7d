import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { alice, app, signedIn, useBoardSuite } from '../../test/support/board.ts';
import { answerConsent } from '../../test/support/oauth.ts';

// `switchboard login --url URL` without a token, as people run it: the real command in its own
// process against a real server, the human approving (or denying) on the board's consent page over
// HTTP with a signed-in session, the browser's redirect delivered to the CLI's loopback listener.
// Then the saved login at work: a command with it, the silent refresh after the server-side access
// token expired (a 401, then a retry) and before it expires (30 s early), and a refused refresh.

vi.setConfig({ testTimeout: 90_000 });
useBoardSuite();

let home: string;
beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'sbcli-browser-'));
});

interface Finished {
  code: number;
  out: string;
  err: string;
}

/** The real command in its own process with only the environment given; its output readable while it runs. */
function startCli(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['bin/switchboard.js', ...args], {
    env: { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), NO_COLOR: '1', ...env },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdin.end();
  const done = new Promise<Finished>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, out, err }));
  });
  let exited = false;
  void done.then(() => (exited = true));
  return {
    done,
    kill: () => child.kill(),
    /** The first match of `re` in stdout, waiting for it (the process ending first is a failure). */
    async waitForOut(re: RegExp, ms = 30_000): Promise<RegExpExecArray> {
      const until = Date.now() + ms;
      for (;;) {
        const m = re.exec(out);
        if (m) return m;
        if (exited || Date.now() > until) throw new Error(`no ${re} in the CLI's stdout:\n${out}\nstderr:\n${err}`);
        await sleep(25);
      }
    },
  };
}

const cli = (args: string[], env: Record<string, string> = {}) => startCli(args, env).done;

const AUTHORIZE_URL = /^ {2}(http:\/\/\S+\/oauth\/authorize\?\S+)$/m;

/** The file as saved: the access token where a personal token goes, and the browser login's fields. */
const saved = async (path: string) => JSON.parse(await readFile(path, 'utf8')) as Record<string, string>;

describe('switchboard login --url URL through the browser', () => {
  let credentials = '';
  /** A refresh token the silent refresh already spent. */
  let spent = '';

  it('prints the URL, ignores a callback without its state, takes the approval, and saves a refreshable login 0600', async () => {
    credentials = join(home, 'browser', 'credentials.json');
    const human = await signedIn(alice);
    const login = startCli(['login', '--url', app.url, '--no-browser'], { SWITCHBOARD_CREDENTIALS: credentials });
    const url = new URL((await login.waitForOut(AUTHORIZE_URL))[1]!);
    expect(Object.fromEntries([...url.searchParams].filter(([k]) => !['client_id', 'redirect_uri', 'state', 'code_challenge'].includes(k)))).toEqual({
      response_type: 'code',
      code_challenge_method: 'S256',
      resource: `${app.url}/api`,
    });
    const redirectUri = url.searchParams.get('redirect_uri')!;
    expect(redirectUri).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    expect(url.searchParams.get('state')).toMatch(/^[A-Za-z0-9\-._~]{32}$/);

    // A forged answer (another state) is turned away and the CLI keeps waiting for its own.
    const forged = await fetch(`${redirectUri}?code=forged&state=not-ours&iss=${encodeURIComponent(app.url)}`);
    expect(forged.status).toBe(400);

    const { location } = await answerConsent(human, url, app.url, 'approve');
    expect(`${location.origin}${location.pathname}`).toBe(redirectUri);
    expect(location.searchParams.get('state')).toBe(url.searchParams.get('state'));
    expect(location.searchParams.get('iss')).toBe(app.url);
    const landed = await fetch(location);
    expect(landed.status).toBe(200);
    expect(await landed.text()).toContain('You can close this tab');

    const done = await login.done;
    expect(done.code, done.err).toBe(0);
    expect(done.out).toContain(`Logged in to ${app.url} as ${alice.handle}; credentials saved in ${credentials}.\n`);
    expect(done.err).toContain(`waiting for the browser's answer on ${redirectUri}`);

    expect((await stat(credentials)).mode & 0o777).toBe(0o600);
    const file = await saved(credentials);
    expect(Object.keys(file).sort()).toEqual(['client_id', 'expires_at', 'refresh_token', 'token', 'token_endpoint', 'url']);
    expect(file).toMatchObject({ url: app.url, client_id: expect.any(String), token_endpoint: `${app.url}/oauth/token` });
    expect(file.token).not.toMatch(/^sb[pk]_/);
    expect(file.refresh_token).not.toBe(file.token);
    const left = Date.parse(file.expires_at!) - Date.now();
    expect(left).toBeGreaterThan(50 * 60_000);
    expect(left).toBeLessThanOrEqual(60 * 60_000);

    const list = await cli(['endpoint', 'list', '--json'], { SWITCHBOARD_CREDENTIALS: credentials });
    expect(list, list.err).toMatchObject({ code: 0, err: '' });
    expect(JSON.parse(list.out)).toEqual(expect.any(Array));
    const status = await cli(['auth', 'status', '--json'], { SWITCHBOARD_CREDENTIALS: credentials });
    expect(JSON.parse(status.out)).toMatchObject({ logged_in: true, login: 'browser', token_from: credentials, human: { handle: alice.handle } });
    expect(status.out).not.toContain(file.token);
  });

  it('refreshes silently once the server-side access token expired (401, refresh, retry), rotating the refresh token in the file', async () => {
    const before = await saved(credentials);
    // By the CLI's clock the token has most of its hour left: only the server's 401 can start this refresh.
    expect(Date.parse(before.expires_at!) - Date.now()).toBeGreaterThan(50 * 60_000);
    app.clock.advance(61 * 60_000);
    const list = await cli(['endpoint', 'list', '--json'], { SWITCHBOARD_CREDENTIALS: credentials });
    expect(list, list.err).toMatchObject({ code: 0, err: '' });
    const after = await saved(credentials);
    expect(after.refresh_token).not.toBe(before.refresh_token);
    spent = before.refresh_token!;
    expect(after.token).not.toBe(before.token);
    expect(after.client_id).toBe(before.client_id);
    expect((await stat(credentials)).mode & 0o777).toBe(0o600);
  });

  it('refreshes before a request when the access token expires within 30 s', async () => {
    const before = await saved(credentials);
    await writeFile(credentials, JSON.stringify({ ...before, expires_at: new Date(Date.now() + 10_000).toISOString() }), { mode: 0o600 });
    const status = await cli(['auth', 'status', '--json'], { SWITCHBOARD_CREDENTIALS: credentials });
    expect(status, status.err).toMatchObject({ code: 0, err: '' });
    const after = await saved(credentials);
    expect(after.refresh_token).not.toBe(before.refresh_token);
    expect(Date.parse(after.expires_at!) - Date.now()).toBeGreaterThan(50 * 60_000);
    expect(JSON.parse(status.out)).toMatchObject({ logged_in: true, login: 'browser', expires_at: after.expires_at });
  });

  it('SWITCHBOARD_TOKEN still wins over the saved browser login, and an expired access token there is not refreshed', async () => {
    const r = await cli(['auth', 'status', '--json'], { SWITCHBOARD_CREDENTIALS: credentials, SWITCHBOARD_TOKEN: alice.token });
    expect(r).toMatchObject({ code: 0 });
    expect(JSON.parse(r.out)).toMatchObject({ token_from: 'SWITCHBOARD_TOKEN', login: 'token', human: { handle: alice.handle } });

    const before = await saved(credentials);
    app.clock.advance(61 * 60_000);
    const expired = await cli(['endpoint', 'list'], { SWITCHBOARD_CREDENTIALS: credentials, SWITCHBOARD_TOKEN: before.token! });
    expect(expired).toMatchObject({ code: 1, out: '' });
    expect(expired.err).toBe(
      `switchboard: the token from SWITCHBOARD_TOKEN is a browser login's access token that ${app.url} no longer accepts (it lasts an hour, and a revoked grant ends it sooner); log in again: switchboard login --url ${app.url} (unauthenticated)\n`,
    );
    expect(await saved(credentials)).toEqual(before);
  });

  it('says to log in again when the refresh is refused (a spent refresh token presented again revokes the grant)', async () => {
    const current = await saved(credentials);
    // A copy of the file from before a rotation: its refresh token is spent, and the server's replay check revokes the grant.
    await writeFile(credentials, JSON.stringify({ ...current, refresh_token: spent, expires_at: new Date(Date.now() - 1000).toISOString() }), { mode: 0o600 });
    const refused = await cli(['endpoint', 'list'], { SWITCHBOARD_CREDENTIALS: credentials });
    expect(refused).toMatchObject({ code: 1, out: '' });
    expect(refused.err).toMatch(new RegExp(`^switchboard: the browser login saved in ${credentials} can no longer be refreshed, the server says: .* \\(invalid_grant\\); log in again: switchboard login --url ${app.url.replace(/\./g, '\\.')}\\n$`));
    expect(refused.err).not.toContain(current.token);
    // The whole grant went with it: the current pair is refused too.
    await writeFile(credentials, JSON.stringify(current), { mode: 0o600 });
    const revoked = await cli(['endpoint', 'list'], { SWITCHBOARD_CREDENTIALS: credentials });
    expect(revoked).toMatchObject({ code: 1, out: '' });
    expect(revoked.err).toContain(`log in again: switchboard login --url ${app.url}`);
  });
});

describe('a browser login that does not complete', () => {
  it('opens $BROWSER with the URL (and prints it), and a denial on the consent page is a clear error', async () => {
    const opened = join(home, 'opened-url');
    const browser = join(home, 'fake-browser.sh');
    await writeFile(browser, `#!/bin/sh\nprintf '%s' "$1" > '${opened}'\n`);
    await chmod(browser, 0o755);
    const credentials = join(home, 'denied.json');
    const human = await signedIn(alice);
    const login = startCli(['login', '--url', app.url], { SWITCHBOARD_CREDENTIALS: credentials, BROWSER: browser });
    const printed = (await login.waitForOut(AUTHORIZE_URL))[1]!;
    let url = '';
    for (let i = 0; i < 200 && !url; i++) url = await readFile(opened, 'utf8').catch(() => sleep(25).then(() => ''));
    expect(url).toBe(printed);

    const { location } = await answerConsent(human, url, app.url, 'deny');
    expect(location.searchParams.get('error')).toBe('access_denied');
    await fetch(location);
    const done = await login.done;
    expect(done).toMatchObject({ code: 1 });
    expect(done.err).toMatch(/switchboard: the login was denied in the browser.*\(access_denied\)\n$/);
    await expect(stat(credentials)).rejects.toThrow(/ENOENT/);
  });

  it('refuses --no-browser beside a token as a usage mistake', async () => {
    const r = await cli(['login', '--url', app.url, '--no-browser', '--token', alice.token], { SWITCHBOARD_CREDENTIALS: join(home, 'unused.json') });
    expect(r).toMatchObject({ code: 2, err: 'switchboard: --no-browser is for the browser login; with a token there is no browser to open\n' });
  });
});

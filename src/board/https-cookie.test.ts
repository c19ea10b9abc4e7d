import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { App } from '../app.ts';
import { createLoginLink } from '../store/web-sessions.ts';

// Issue 17 item 15d: under an https base URL the board's session cookie is `__Host-` prefixed
// and every response carries Strict-Transport-Security; a plain-http base URL gets neither.

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let secure: App;
let plain: App;
let human: { handle: string };

beforeAll(async () => {
  db = await migratedDatabase();
  // The TLS is a balancer's; this instance listens on plain http behind it.
  secure = await startTestApp(db.url, undefined, { env: { SWITCHBOARD_BASE_URL: 'https://switchboard.example' } });
  plain = await startTestApp(db.url);
  human = await humanWithToken(db.sql);
});
afterAll(async () => {
  await secure?.stop();
  await plain?.stop();
  await db?.drop();
});

async function signIn(on: App): Promise<string> {
  const { token } = await createLoginLink(db.sql, human.handle, new Date());
  const r = await fetch(`${on.url}/login/${token}`, { method: 'POST', redirect: 'manual' });
  expect(r.status).toBe(303);
  return r.headers.get('set-cookie')!;
}

const board = (on: App, cookie: string) => fetch(`${on.url}/`, { redirect: 'manual', headers: { cookie } });

describe('under an https base URL', () => {
  it('the session cookie is __Host-sb_session (Secure, Path=/, no Domain), and only that name signs in', async () => {
    const cookie = await signIn(secure);
    expect(cookie).toMatch(/^__Host-sb_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Lax; Secure$/);
    expect(cookie).not.toMatch(/domain=/i);
    const value = /^__Host-sb_session=([^;]+)/.exec(cookie)![1]!;
    const signedIn = await board(secure, `__Host-sb_session=${value}`);
    expect(signedIn.status).toBe(200);
    expect(await signedIn.text()).toContain(human.handle);
    // The unprefixed name (which a subdomain or a plain-http response could set) is not read.
    const shadow = await board(secure, `sb_session=${value}`);
    expect(await shadow.text()).not.toContain(human.handle);
  });

  it('every response carries Strict-Transport-Security, refusals included', async () => {
    // '/%zz' is refused before routing (frameworkErrors), which skips the hooks.
    for (const path of ['/healthz', '/api/v1/endpoints', '/no-such-page', '/webhooks/w/nope', '/%zz']) {
      const r = await fetch(`${secure.url}${path}`, { method: path.startsWith('/webhooks') ? 'POST' : 'GET' });
      expect(r.headers.get('strict-transport-security'), path).toBe('max-age=31536000');
    }
  });
});

describe('under a plain-http base URL', () => {
  it('keeps sb_session without Secure and sends no Strict-Transport-Security', async () => {
    const cookie = await signIn(plain);
    expect(cookie).toMatch(/^sb_session=[^;]+; Path=\/; Max-Age=43200; HttpOnly; SameSite=Lax$/);
    const value = /^sb_session=([^;]+)/.exec(cookie)![1]!;
    const r = await board(plain, `sb_session=${value}`);
    expect(await r.text()).toContain(human.handle);
    expect(r.headers.get('strict-transport-security')).toBeNull();
  });
});

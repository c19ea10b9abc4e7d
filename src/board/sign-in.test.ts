import { describe, expect, it } from 'vitest';
import { humanWithToken, startTestApp } from '../../test/support/app.ts';
import { main } from '../cli/main.ts';
import { createLoginLink, LOGIN_LINK_TTL_MS } from '../store/web-sessions.ts';
import { HTMX_ASSET, UPLOT_ASSET, UPLOT_CSS_ASSET } from './pages.ts';
import { BOARD_CSP } from './plugin.ts';
import {
  alice,
  app,
  bob,
  browser,
  db,
  presenceRow,
  push,
  signedIn,
  useBoardSuite,
  vend,
} from '../../test/support/board.ts';

// The board over real HTTP: sign-in by link, the session cookie, CSRF, tenancy, the
// Content-Security-Policy and escaping of hostile text.

useBoardSuite();

describe('sign-in by link', () => {
  it('switchboard admin login-link prints <base URL>/login/<token>, and the link signs in', async () => {
    const human = await humanWithToken(db.sql);
    let out = '';
    let err = '';
    const code = await main(['node', 'switchboard', 'admin', 'login-link', human.handle], {
      io: { out: (t) => void (out += t), err: (t) => void (err += t) },
      env: { SWITCHBOARD_DATABASE_URL: db.url, SWITCHBOARD_BASE_URL: app.url },
      readStdin: async () => '',
      stdinIsTty: false,
    });
    expect(code).toBe(0);
    const url = out.trim();
    expect(url).toMatch(new RegExp(`^${app.url.replace(/[.]/g, '\\.')}/login/[A-Za-z0-9_-]{43}$`));
    expect(err).toMatch(/works once.*15 minutes/);
    const b = browser();
    const path = new URL(url).pathname;
    expect((await b.get(path)).text).toContain('Sign in to Switchboard');
    expect((await b.post(path)).status).toBe(303);
    expect((await b.get('/')).text).toContain(`signed in as <strong>${human.handle}</strong>`);
  });

  it('an unknown handle is refused with exit code 1', async () => {
    let err = '';
    const code = await main(['node', 'switchboard', 'admin', 'login-link', 'nobody-here'], {
      io: { out: () => {}, err: (t) => void (err += t) },
      env: { SWITCHBOARD_DATABASE_URL: db.url },
      readStdin: async () => '',
      stdinIsTty: false,
    });
    expect(code).toBe(1);
    expect(err).toContain('no human with handle "nobody-here"');
  });

  it('GET shows a confirm button and spends nothing; POST spends it once and sets the session cookie', async () => {
    const { token } = await createLoginLink(db.sql, alice.handle, app.clock.now());
    const b = browser();
    for (let i = 0; i < 2; i++) {
      const confirm = await b.get(`/login/${token}`);
      expect(confirm.status).toBe(200);
      expect(confirm.text).toContain(`<form method="post" action="/login/${token}">`);
      expect(confirm.headers.get('set-cookie')).toBeNull();
    }
    const used = await b.post(`/login/${token}`);
    expect(used.status).toBe(303);
    expect(used.headers.get('location')).toBe('/');
    const cookie = used.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^sb_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Lax$/);
    expect(cookie).not.toContain('Secure');
    // Only the hash is stored.
    const value = /^sb_session=([^;]+)/.exec(cookie)![1]!;
    const rows = await db.sql`select token_hash, expires_at, created_at from web_sessions where human_id = ${alice.id}`;
    expect(rows.some((r) => r.token_hash === value)).toBe(false);
    expect(rows.some((r) => r.expires_at.getTime() - r.created_at.getTime() === 12 * 3_600_000)).toBe(true);
    // Single use: a second POST (any browser) and a second GET find it spent.
    const again = await browser().post(`/login/${token}`);
    expect(again.status).toBe(404);
    expect(again.text).toContain('This sign-in link is not valid');
    expect(again.headers.get('set-cookie')).toBeNull();
    expect((await browser().get(`/login/${token}`)).status).toBe(404);
  });

  it('a link expires after 15 minutes', async () => {
    const early = await createLoginLink(db.sql, alice.handle, app.clock.now());
    const late = await createLoginLink(db.sql, alice.handle, app.clock.now());
    app.clock.advance(LOGIN_LINK_TTL_MS - 1000);
    expect((await browser().post(`/login/${early.token}`)).status).toBe(303);
    app.clock.advance(1000);
    const r = await browser().post(`/login/${late.token}`);
    expect(r.status).toBe(404);
    expect(r.text).toContain('expired (links last 15 minutes)');
  });

  it('a cross-site POST cannot spend a link (login CSRF)', async () => {
    const { token } = await createLoginLink(db.sql, alice.handle, app.clock.now());
    expect((await browser().post(`/login/${token}`, {}, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await browser().post(`/login/${token}`, {}, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await browser().post(`/login/${token}`, {}, { 'sec-fetch-site': 'same-origin' })).status).toBe(303);
  });

  it('the cookie is Secure when the base URL is https', async () => {
    const secureApp = await startTestApp(db.url, app.clock, { env: { SWITCHBOARD_BASE_URL: 'https://board.example.test' } });
    try {
      const { token } = await createLoginLink(db.sql, alice.handle, app.clock.now());
      const r = await browser(secureApp).post(`/login/${token}`);
      expect(r.status).toBe(303);
      expect(r.headers.get('set-cookie')).toMatch(/; HttpOnly; SameSite=Lax; Secure$/);
    } finally {
      await secureApp.stop();
    }
  });

  it('without a token, /login explains how to get a link', async () => {
    const r = await browser().get('/login');
    expect(r.status).toBe(200);
    expect(r.text).toContain('switchboard admin login-link YOUR_HANDLE');
  });

  it('sessions end after 12 hours', async () => {
    const b = await signedIn(alice);
    expect((await b.get('/')).status).toBe(200);
    app.clock.advance(12 * 3_600_000);
    const r = await b.get('/');
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe('/login');
    // The dead cookie is cleared.
    expect(r.headers.get('set-cookie')).toMatch(/^sb_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Lax$/);
  });
});

describe('unauthenticated and signed out', () => {
  it('pages redirect to /login, state changes are 403, the event stream is 401', async () => {
    const b = browser();
    for (const p of ['/', '/todos', '/todos/td_00000000-0000-4000-8000-000000000000', '/endpoints/x']) {
      const r = await b.get(p);
      expect(r.status, p).toBe(303);
      expect(r.headers.get('location'), p).toBe('/login');
    }
    expect((await b.post('/endpoints', { name: 'x' })).status).toBe(403);
    expect((await b.post('/logout')).status).toBe(403);
    expect((await b.get('/events')).status).toBe(401);
    b.cookie = 'sb_session=' + 'A'.repeat(43);
    expect((await b.get('/')).status).toBe(303);
  });

  it('logout (CSRF) deletes the session and clears the cookie', async () => {
    const b = await signedIn(alice);
    const cookie = b.cookie;
    expect((await b.post('/logout')).status).toBe(403);
    expect((await b.get('/')).status).toBe(200);
    const out = await b.post('/logout', { csrf_token: b.csrfToken });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe('/login');
    expect(out.headers.get('set-cookie')).toMatch(/^sb_session=; Path=\/; Max-Age=0/);
    b.cookie = cookie;
    expect((await b.get('/')).status).toBe(303);
  });
});

describe('CSRF', () => {
  it('refuses a state change without the token, with a wrong one, or with another session\u2019s, and changes nothing', async () => {
    const e = await vend(alice);
    const b = await signedIn(alice);
    const other = await signedIn(alice);
    expect(other.csrfToken).not.toBe(b.csrfToken);
    const target = `/endpoints/${e.id}/presence`;
    const forms: Record<string, string>[] = [
      { presence: 'out' },
      { presence: 'out', csrf_token: '0'.repeat(64) },
      { presence: 'out', csrf_token: other.csrfToken },
      { presence: 'out', csrf_token: '' },
    ];
    for (const form of forms) {
      const r = await b.post(target, form);
      expect(r.status, JSON.stringify(form)).toBe(403);
      expect(r.text).toContain('CSRF');
    }
    for (const p of [`/endpoints/${e.id}/shift`, `/endpoints/${e.id}/self-test`, `/endpoints/${e.id}/revoke`, '/endpoints', `/endpoints/${e.id}/presence/clear`]) {
      expect((await b.post(p, { shift: 'Mon 09:00-10:00', name: 'x' })).status, p).toBe(403);
    }
    expect(await presenceRow(e.id)).toMatchObject({ presence_override: null, shift: null, state: 'active' });
    expect(await db.sql`select 1 from endpoints e join agents a on a.id = e.agent_id where a.owner_human_id = ${alice.id} and a.name = 'x'`).toHaveLength(0);
    // The right token (as a field or as the X-CSRF-Token header) works.
    expect((await b.post(target, { presence: 'out', csrf_token: b.csrfToken })).status).toBe(303);
    expect(await presenceRow(e.id)).toMatchObject({ presence_override: 'out', override_by: `operator:${alice.id}` });
    expect((await b.post(target, { presence: 'in' }, { 'x-csrf-token': b.csrfToken })).status).toBe(303);
  });
});

describe('tenancy', () => {
  it("another human's endpoint or todo answers 404, exactly like a missing one, and nothing changes", async () => {
    const theirs = await vend(bob);
    const todo = await push(bob, theirs.slug, 'bob only');
    const b = await signedIn(alice);
    const missing = await b.get('/endpoints/00000000-0000-4000-8000-000000000000');
    expect(missing.status).toBe(404);
    for (const p of [`/endpoints/${theirs.id}`, `/endpoints/${theirs.slug}`, `/endpoints/${theirs.id}/revoke`, `/todos/${todo}`, '/todos/td_00000000-0000-4000-8000-000000000000']) {
      const r = await b.get(p);
      expect(r.status, p).toBe(404);
      expect(r.text, p).toBe(missing.text);
    }
    for (const [p, form] of [
      [`/endpoints/${theirs.id}/presence`, { presence: 'out' }],
      [`/endpoints/${theirs.id}/presence/clear`, {}],
      [`/endpoints/${theirs.id}/shift`, { shift: 'Mon 09:00-10:00' }],
      [`/endpoints/${theirs.id}/self-test`, {}],
      [`/endpoints/${theirs.id}/revoke`, {}],
    ] as const) {
      const r = await b.post(p, { ...form, csrf_token: b.csrfToken });
      expect(r.status, p).toBe(404);
      expect(r.text, p).toBe(missing.text);
    }
    expect(await presenceRow(theirs.id)).toMatchObject({ presence_override: null, shift: null, state: 'active' });
    expect(await db.sql`select 1 from doorbell_tests where endpoint_id = ${theirs.id}`).toHaveLength(0);
    const list = await b.get('/todos');
    expect(list.text).not.toContain('bob only');
    expect((await b.get('/')).text).not.toContain(theirs.slug);
  });
});

describe('security headers and escaping', () => {
  it('board pages carry the board CSP; JSON routes keep the strict one', async () => {
    const b = await signedIn(alice);
    for (const p of ['/', '/todos', '/login', '/static/board.css', '/endpoints/00000000-0000-4000-8000-000000000000']) {
      const r = await b.get(p);
      expect(r.headers.get('content-security-policy'), p).toBe(BOARD_CSP);
      expect(r.headers.get('x-frame-options'), p).toBe('DENY');
      expect(r.headers.get('x-content-type-options'), p).toBe('nosniff');
    }
    expect(BOARD_CSP).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
    const api = await fetch(`${app.url}/api/v1/me`, { headers: { authorization: `Bearer ${alice.token}` } });
    expect(api.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    const page = (await b.get('/')).text;
    // No inline script or style anywhere: the only scripts are same-origin files, htmx vendored
    // (charts.js loads the vendored uPlot itself, only on a page with a chart).
    expect(page.match(/<script/g)).toHaveLength(3);
    expect(page).toContain(`<script src="/static/${HTMX_ASSET}" defer></script>`);
    expect(page).toContain('<script src="/static/board.js" defer></script>');
    expect(page).toContain(`<script src="/static/charts.js" data-uplot-js="/static/${UPLOT_ASSET}" data-uplot-css="/static/${UPLOT_CSS_ASSET}" defer></script>`);
    expect(page).not.toMatch(/<style|style=|\son[a-z]+=|hx-on/i);
    // htmx may not evaluate, inject styles, or keep page snapshots (the vend answer holds a credential).
    const config = JSON.parse(/<meta name="htmx-config" content="([^"]+)">/.exec(page)![1]!.replaceAll('&quot;', '"'));
    expect(config).toMatchObject({ allowEval: false, allowScriptTags: false, includeIndicatorStyles: false, selfRequestsOnly: true, historyCacheSize: 0 });
    const vendored = await fetch(`${app.url}/static/${HTMX_ASSET}`);
    expect(vendored.status).toBe(200);
    expect(vendored.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(vendored.headers.get('cache-control')).toContain('immutable');
    expect(await vendored.text()).toContain('htmx');
  });

  it('escapes a hostile todo title, payload and endpoint name everywhere they appear', async () => {
    const e = await vend(alice, `<b>bold</b>"'`);
    const hostile = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>'];
    const ids = [];
    for (const title of hostile) ids.push(await push(alice, e.slug, title, { payload: { note: '</pre><script>alert(2)</script>', title } }));
    const b = await signedIn(alice);
    const pages = [await b.get('/todos'), await b.get(`/todos/${ids[0]}`), await b.get(`/todos/${ids[1]}`), await b.get('/'), await b.get(`/endpoints/${e.id}`)];
    for (const r of pages) {
      expect(r.status).toBe(200);
      for (const raw of [...hostile, '</pre><script>', '<b>bold</b>', '<img']) expect(r.text).not.toContain(raw);
      expect(r.text.match(/<script/g)).toHaveLength(3);
    }
    const list = pages[0]!.text;
    expect(list).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(list).toContain('&quot;&gt;&lt;img src=x onerror=alert(1)&gt;');
    expect(pages[1]!.text).toContain('&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;');
    expect(pages[3]!.text).toContain('&lt;b&gt;bold&lt;/b&gt;&quot;&#39;');
  });
});
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connectAgent, until, type Vended } from '../../test/support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { App } from '../app.ts';
import { main } from '../cli/main.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLoginLink, LOGIN_LINK_TTL_MS } from '../store/web-sessions.ts';
import { HTMX_ASSET, card, type CardData } from './pages.ts';
import { BOARD_CSP } from './plugin.ts';
import { boardSession } from './auth.ts';

/**
 * The board over real HTTP against a real PostgreSQL: sign-in by link, the session cookie, CSRF,
 * tenancy (another human's ids are 404), the Content-Security-Policy, escaping of hostile text,
 * the presence and shift controls, vend and revoke, and the live-update stream.
 */

type TestApp = App & { clock: ManualClock };

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
const clients: Client[] = [];
let alice: { id: string; handle: string; token: string };
let bob: { id: string; handle: string; token: string };

beforeAll(async () => {
  db = await migratedDatabase();
  // The CLI mints links with the system clock: start the app's clock at the real now.
  app = await startTestApp(db.url, new ManualClock(new Date()), { selfTestRingDelayMs: 100 });
  alice = await humanWithToken(db.sql);
  bob = await humanWithToken(db.sql);
});
// Refills the clock-driven rate limiters.
beforeEach(() => void app.clock.advance(15_000));
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app.stop();
  await db.drop();
});

interface Res {
  status: number;
  headers: Headers;
  text: string;
}

/** A browser without JavaScript: a cookie jar of one cookie, forms sent url-encoded, redirects not followed. */
function browser(on: App = app) {
  let cookie = '';
  const request = async (method: string, path: string, form?: Record<string, string | string[]>, headers: Record<string, string> = {}): Promise<Res> => {
    let body: string | undefined;
    if (form) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(form)) for (const one of Array.isArray(v) ? v : [v]) p.append(k, one);
      body = p.toString();
    }
    const res = await fetch(`${on.url}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        ...(cookie ? { cookie } : {}),
        ...(body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...headers,
      },
      body,
    });
    const set = res.headers.get('set-cookie');
    if (set) {
      const m = /^sb_session=([^;]*)/.exec(set);
      if (m) cookie = m[1] ? `sb_session=${m[1]}` : '';
    }
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  return {
    request,
    get: (path: string) => request('GET', path),
    post: (path: string, form: Record<string, string | string[]> = {}, headers: Record<string, string> = {}) => request('POST', path, form, headers),
    get cookie() {
      return cookie;
    },
    set cookie(v: string) {
      cookie = v;
    },
    /** The CSRF token from a page's hidden field. */
    async csrf(): Promise<string> {
      const page = await request('GET', '/');
      return /name="csrf_token" value="([0-9a-f]{64})"/.exec(page.text)![1]!;
    },
  };
}

async function signedIn(h: { handle: string }, on: App = app) {
  const b = browser(on);
  const { token } = await createLoginLink(db.sql, h.handle, app.clock.now());
  const r = await b.post(`/login/${token}`);
  expect(r.status).toBe(303);
  return Object.assign(b, { csrfToken: await b.csrf() });
}

async function vend(h: { token: string }, name = 'agent', queues = ['reviews']): Promise<Vended> {
  const r = await apiCaller(app.url, h.token)('POST', '/api/v1/endpoints', { name, queues });
  expect(r.status).toBe(201);
  return r.json;
}

async function push(h: { token: string }, slug: string, title: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await apiCaller(app.url, h.token)('POST', `/api/v1/endpoints/${slug}/todos`, { title, ...extra });
  expect(r.status).toBe(201);
  return r.json.id;
}

const presenceRow = async (id: string) => (await db.sql`select presence_override, override_by, shift, state from endpoints where id = ${id}`)[0]!;

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
    // No inline script or style anywhere: the only scripts are same-origin files, htmx vendored.
    expect(page.match(/<script/g)).toHaveLength(2);
    expect(page).toContain(`<script src="/static/${HTMX_ASSET}" defer></script>`);
    expect(page).toContain('<script src="/static/board.js" defer></script>');
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
      expect(r.text.match(/<script/g)).toHaveLength(2);
    }
    const list = pages[0]!.text;
    expect(list).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(list).toContain('&quot;&gt;&lt;img src=x onerror=alert(1)&gt;');
    expect(pages[1]!.text).toContain('&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;');
    expect(pages[3]!.text).toContain('&lt;b&gt;bold&lt;/b&gt;&quot;&#39;');
  });
});

describe('the endpoint card', () => {
  it('clock out shows off shift and held todos; a bad until or shift is shown inline; a valid shift is stored canonically', async () => {
    const e = await vend(alice, 'presence-bot');
    await push(alice, e.slug, 'waits for the agent');
    const b = await signedIn(alice);
    const out = await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: '', csrf_token: b.csrfToken });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe(`/endpoints/${e.id}`);
    const cardPage = await b.get(`/endpoints/${e.id}`);
    expect(cardPage.text).toContain('off shift');
    expect(cardPage.text).toMatch(/out · set by a human · until clocked in/);
    const todos = await b.get('/todos');
    expect(todos.text).toContain('held until clocked in');

    // With an end: "held until <time>".
    expect((await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: '90m', csrf_token: b.csrfToken, return: 'list' })).headers.get('location')).toBe(
      `/#endpoint-${e.id}`,
    );
    const until = new Date(app.clock.now().getTime() + 90 * 60_000).toISOString().slice(0, 16).replace('T', ' ');
    expect((await b.get('/todos')).text).toContain(`held until <time datetime="`);
    expect((await b.get('/todos')).text).toContain(`${until} UTC</time>`);

    const badUntil = await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: 'tomorrow', csrf_token: b.csrfToken });
    expect(badUntil.status).toBe(400);
    expect(badUntil.text).toMatch(/<p class="error" id="until-error-[^"]+" role="alert">until: must be a duration/);

    const bad = await b.post(`/endpoints/${e.id}/shift`, { shift: 'Mon-Fri 25:00-17:00', action: 'save', csrf_token: b.csrfToken });
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/<p class="error" id="shift-error-[^"]+" role="alert">shift: /);
    expect(bad.text).toContain('value="Mon-Fri 25:00-17:00"');
    expect(bad.text).toContain('aria-invalid="true"');
    expect((await presenceRow(e.id)).shift).toBeNull();

    const good = await b.post(`/endpoints/${e.id}/shift`, { shift: 'TZ=Europe/Berlin mon-fri 09:00-17:00', action: 'save', csrf_token: b.csrfToken });
    expect(good.status).toBe(303);
    const stored = (await presenceRow(e.id)).shift;
    expect(stored).toMatch(/^TZ=Europe\/Berlin /);
    expect((await b.get(`/endpoints/${e.id}`)).text).toContain(`<code class="shift-value">${stored}</code>`);
    expect((await b.post(`/endpoints/${e.id}/shift`, { shift: stored, action: 'clear', csrf_token: b.csrfToken })).status).toBe(303);
    expect((await presenceRow(e.id)).shift).toBeNull();
    expect((await b.post(`/endpoints/${e.id}/presence/clear`, { csrf_token: b.csrfToken })).status).toBe(303);
    expect((await presenceRow(e.id)).presence_override).toBeNull();
  });

  it('shows sessions and the unheard label, but neither warning while the endpoint is out', async () => {
    const e = await vend(alice, 'listener');
    const agent = await connectAgent(app, e, { track: clients });
    const b = await signedIn(alice);
    let page = (await b.get(`/endpoints/${e.id}`)).text;
    expect(page).toContain('1 attached');
    expect(page).toContain('claude-code 2.1.0');
    expect(page).not.toContain('rings reach it but nothing acts on them');
    app.sessions.all().find((s) => s.id === agent.sessionId)!.unheard = true;
    page = (await b.get(`/endpoints/${e.id}`)).text;
    expect(page).toContain('1 unheard session: rings reach it but nothing acts on them.');
    expect(page).toContain(`href="/endpoints/${e.id}#report"`);
    await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', csrf_token: b.csrfToken });
    page = (await b.get(`/endpoints/${e.id}`)).text;
    expect(page).toContain('off shift');
    expect(page).not.toContain('rings reach it but nothing acts on them');
  });

  it('renders the deaf-consumer warning only while in', () => {
    const now = app.clock.now();
    const s = boardSession({ id: 'h', handle: 'h', display_name: null, email: null, created_at: now }, 'A'.repeat(43), now);
    const base: CardData = {
      endpoint: {
        id: '00000000-0000-4000-8000-000000000001', agent_id: 'a', agent_name: 'deaf', owner_human_id: 'h', slug: 'deaf-1', credential_prefix: 'sbk_abcdefgh',
        scope_queues: ['inbox'], scope_verbs: ['claim'], state: 'active', created_at: now, revoked_at: null, last_seen_at: null, shift: null,
        presence_override: null, override_until: null, override_set_at: null, override_by: null, webhook_max: 0,
      },
      presence: { presence: 'in', source: 'default', until: null },
      mcpUrl: 'http://x/mcp/deaf-1',
      sessions: [{ id: 's', client: 'c 1', stream: true, unheard: false, deaf: true }],
    };
    expect(card(base, s, now).value).toContain('Deaf consumer: 1 attached session receives nothing');
    expect(card({ ...base, presence: { presence: 'out', source: 'operator', until: null } }, s, now).value).not.toContain('Deaf consumer');
  });

  it('Run self-test redirects to the card report; a second while one runs is refused inline', async () => {
    const e = await vend(alice, 'tested');
    const b = await signedIn(alice);
    const r = await b.post(`/endpoints/${e.id}/self-test`, { csrf_token: b.csrfToken });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe(`/endpoints/${e.id}#report`);
    const report = await b.get(`/endpoints/${e.id}`);
    expect(report.text).toMatch(/Verdict: <strong class="verdict-value">(pending|no_session)<\/strong>/);
    const again = await b.post(`/endpoints/${e.id}/self-test`, { csrf_token: b.csrfToken });
    expect(again.status).toBe(429);
    expect(again.text).toContain('a self-test is already running on this endpoint');
  });

  it('vends with the credential shown once, and revokes through a confirm page', async () => {
    const b = await signedIn(alice);
    const refused = await b.post('/endpoints', { name: 'vended-bot', queues: 'Bad Queue', verbs: ['claim'], csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/<p class="error" id="queues-error" role="alert">queues: /);
    const r = await b.post('/endpoints', { name: 'vended-bot', queues: 'reviews, inbox', verbs: ['claim', 'complete'], csrf_token: b.csrfToken });
    expect(r.status).toBe(201);
    const credential = /<code id="credential" class="secret">(sbk_[A-Za-z0-9_-]{43})<\/code>/.exec(r.text)![1]!;
    expect(r.text).toContain('&quot;Authorization&quot;: &quot;Bearer ' + credential);
    expect(r.text).toContain(`claude mcp add --transport http --scope user switchboard`);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const id = /href="\/endpoints\/([0-9a-f-]{36})"/.exec(r.text)![1]!;
    const cardPage = await b.get(`/endpoints/${id}`);
    expect(cardPage.text).not.toContain(credential);
    expect(cardPage.text).toContain(`${credential.slice(0, 12)}…`);
    expect((await db.sql`select scope_queues, scope_verbs from endpoints where id = ${id}`)[0]).toEqual({ scope_queues: ['reviews', 'inbox'], scope_verbs: ['claim', 'complete'] });

    const confirm = await b.get(`/endpoints/${id}/revoke`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('Revoke vended-bot?');
    expect((await presenceRow(id)).state).toBe('active');
    const revoked = await b.post(`/endpoints/${id}/revoke`, { csrf_token: b.csrfToken });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get('location')).toBe(`/endpoints/${id}`);
    expect((await presenceRow(id)).state).toBe('revoked');
    expect((await b.get(`/endpoints/${id}`)).text).toContain('Endpoint killed');
    expect((await b.post(`/endpoints/${id}/presence`, { presence: 'out', csrf_token: b.csrfToken })).status).toBe(409);
    expect((await b.post(`/endpoints/${id}/revoke`, { csrf_token: b.csrfToken })).status).toBe(409);
  });

  it('a vend form sent twice (a reload of the credential page) vends one endpoint and never shows a credential again', async () => {
    const b = await signedIn(alice);
    const form = await b.get('/');
    const request = /name="vend_request" value="([A-Za-z0-9_-]+)"/.exec(form.text)![1]!;
    // A refused send keeps the form's id, so the corrected form is still the same vend.
    const refused = await b.post('/endpoints', { vend_request: request, name: '', queues: 'reviews', csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain(`name="vend_request" value="${request}"`);
    const sent = { vend_request: request, name: 'once-bot', queues: 'reviews', verbs: ['claim'], csrf_token: b.csrfToken };
    const [first, second] = await Promise.all([b.post('/endpoints', sent), b.post('/endpoints', sent)]);
    expect([first.status, second.status].sort()).toEqual([201, 409]);
    const again = await b.post('/endpoints', sent);
    expect(again.status).toBe(409);
    expect(again.text).toContain('Already vended');
    expect(again.text).not.toMatch(/sbk_[A-Za-z0-9_-]{43}/);
    const rows = await db.sql`select e.id from endpoints e join agents a on a.id = e.agent_id where a.owner_human_id = ${alice.id} and a.name = 'once-bot'`;
    expect(rows).toHaveLength(1);
    expect(again.text).toContain(`href="/endpoints/${rows[0]!.id}"`);
    // Another human replaying the id vends their own endpoint (the id is scoped to its owner's forms).
    const other = await signedIn(bob);
    expect((await other.post('/endpoints', { ...sent, csrf_token: other.csrfToken })).status).toBe(201);
  });
});

describe('todos', () => {
  it('filters by state and queue with counts, and shows one todo with its payload and lifecycle', async () => {
    const h = await humanWithToken(db.sql);
    const e = await vend(h, 'filters', ['alpha', 'beta']);
    const a1 = await push(h, e.slug, 'alpha one', { queue: 'alpha', payload: { n: 1, nested: { ok: true } } });
    await push(h, e.slug, 'alpha two', { queue: 'alpha' });
    await push(h, e.slug, 'beta one', { queue: 'beta' });
    const agent = await connectAgent(app, e, { track: clients });
    expect(await agent.call('claim', { id: a1 })).toMatchObject({ state: 'claimed' });
    const b = await signedIn(h);
    const all = (await b.get('/todos')).text;
    expect(all).toMatch(/all <span class="count">3<\/span>/);
    expect(all).toMatch(/pending <span class="count">2<\/span>/);
    expect(all).toMatch(/claimed <span class="count">1<\/span>/);
    expect(all).toMatch(/alpha <span class="count">2<\/span>/);
    const pendingAlpha = (await b.get('/todos?state=pending&queue=alpha')).text;
    expect(pendingAlpha).toContain('alpha two');
    expect(pendingAlpha).not.toContain('alpha one');
    expect(pendingAlpha).not.toContain('beta one');
    expect(pendingAlpha).toMatch(/alpha <span class="count">1<\/span>/);
    expect((await b.get('/todos?state=sleeping')).status).toBe(400);
    const one = (await b.get(`/todos/${a1}`)).text;
    expect(one).toContain('<pre class="json" id="payload">{\n  &quot;n&quot;: 1,\n  &quot;nested&quot;: {\n    &quot;ok&quot;: true\n  }\n}</pre>');
    expect(one).toContain('<span class="badge state-claimed">claimed</span>');
    expect(one).toMatch(/<dt>Lease expires<\/dt><dd><time/);
    // Self-test todos never show.
    await b.post(`/endpoints/${e.id}/self-test`, { csrf_token: b.csrfToken });
    expect((await b.get('/todos')).text).toMatch(/all <span class="count">3<\/span>/);
  });
});

describe('live updates', () => {
  it('a signed-in page re-reads every data-live region of its own URL in one request, and a POST answer none', async () => {
    const e = await vend(alice, 'live-regions');
    const b = await signedIn(alice);
    const card = (await b.get(`/endpoints/${e.id}`)).text;
    const updater = /<div id="live-updates" hidden hx-get="([^"]+)" hx-trigger="sb-changed from:body" hx-swap="none" hx-select-oob="([^"]+)"/.exec(card)!;
    expect(updater[1]).toBe(`/endpoints/${e.id}`);
    const regions = [...card.matchAll(/id="([^"]+)" data-live/g)].map((m) => `#${m[1]}`);
    expect(regions).toContain(`#status-${e.id}`);
    expect(regions).toContain('#report');
    expect(updater[2]!.split(',')).toEqual(regions);
    const todos = (await b.get('/todos?state=pending')).text;
    expect(todos).toContain('hx-get="/todos?state=pending"');
    // A refused form's answer is not live: a re-read would wipe the inline error.
    const refused = await b.post(`/endpoints/${e.id}/shift`, { shift: 'Mon 25:00-26:00', action: 'save', csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(refused.text).not.toContain('id="live-updates"');
  });

  /** Reads an SSE stream in the background; frames collect in `events`. */
  async function stream(b: ReturnType<typeof browser>) {
    const ac = new AbortController();
    const res = await fetch(`${app.url}/events`, { headers: { cookie: b.cookie }, signal: ac.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const events: { event: string; data: any }[] = [];
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    void (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buf += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const frame = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const ev = /^event: (.+)$/m.exec(frame)?.[1];
            const data = /^data: (.+)$/m.exec(frame)?.[1];
            if (ev && data) events.push({ event: ev, data: JSON.parse(data) });
          }
        }
      } catch {
        /* aborted */
      }
    })();
    return { events, close: () => ac.abort() };
  }

  it("carries only the signed-in human's own events: todo created and claimed, presence changes", async () => {
    const h1 = await humanWithToken(db.sql);
    const h2 = await humanWithToken(db.sql);
    const mine = await vend(h1, 'mine');
    const theirs = await vend(h2, 'theirs');
    const s1 = await stream(await signedIn(h1));
    const s2 = await stream(await signedIn(h2));
    // Each stream says when its baseline is taken.
    await until(() => s1.events.some((e) => e.event === 'ready') && s2.events.some((e) => e.event === 'ready'), 'ready', 12_000);
    const id = await push(h1, mine.slug, 'for h1');
    await push(h1, mine.slug, 'also for h1');
    await until(() => s1.events.some((e) => e.event === 'todo' && e.data.id === id && e.data.type === 'created'), 'the created event', 12_000);
    const agent = await connectAgent(app, mine, { track: clients });
    await agent.call('claim', { id });
    await until(() => s1.events.some((e) => e.event === 'todo' && e.data.id === id && e.data.type === 'claimed'), 'the claimed event', 12_000);
    await apiCaller(app.url, h1.token)('PUT', `/api/v1/endpoints/${mine.slug}/presence`, { presence: 'out', until: null });
    await until(() => s1.events.some((e) => e.event === 'presence' && e.data.endpoint_id === mine.id && e.data.presence === 'out'), 'the presence event', 12_000);
    expect(s1.events.filter((e) => e.event !== 'ready').every((e) => e.data.endpoint_id === mine.id)).toBe(true);
    expect(s2.events.filter((e) => e.event !== 'ready' && e.data.endpoint_id !== theirs.id)).toEqual([]);
    // A second stream of the same human joins the running watch and is told it is ready at once.
    const s3 = await stream(await signedIn(h1));
    await until(() => s3.events.some((e) => e.event === 'ready'), 'ready on the joining stream', 2000);
    s3.close();
    s1.close();
    s2.close();
  }, 60_000);

  it('shutting the server down ends open streams instead of waiting on them', async () => {
    const other = await startTestApp(db.url, app.clock);
    const b = await signedIn(alice, other);
    const res = await fetch(`${other.url}/events`, { headers: { cookie: b.cookie } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('retry: 5000\n\n');
    const t0 = Date.now();
    await other.stop();
    // An open stream would hold the HTTP server open for good; a loaded machine still stops within seconds.
    expect(Date.now() - t0).toBeLessThan(15_000);
    await expect((async () => {
      for (;;) if ((await reader.read()).done) return 'ended';
    })()).resolves.toBe('ended');
  }, 30_000);
});

import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { startOidcProvider, type TestOidcProvider } from '../../test/support/oidc-provider.ts';
import type { App } from '../app.ts';
import { ManualClock } from '../lib/clock.ts';
import { loadConfig, ConfigError } from '../config.ts';
import { createLogger } from '../lib/log.ts';
import { addHuman } from '../store/humans.ts';
import { BOARD_SIGN_IN_LIMIT } from './plugin.ts';

/**
 * Board sign-in through an OpenID Connect provider, against a real provider over HTTP
 * (test/support/oidc-provider.ts) and a real PostgreSQL: the code flow with PKCE, state and nonce,
 * humans keyed on (issuer, subject), and every refusal (400 for the browser's mistakes, 502 for
 * the provider's, 503 when not configured).
 */

type TestApp = App & { clock: ManualClock };

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let idp: TestOidcProvider;
let app: TestApp;
const logLines: string[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  idp = await startOidcProvider();
  const log = createLogger('info', new Writable({ write: (c, _e, done) => void (logLines.push(c.toString()), done()) }));
  app = await startTestApp(db.url, new ManualClock(new Date()), {
    env: { SWITCHBOARD_OIDC_ISSUER: idp.issuer, SWITCHBOARD_OIDC_CLIENT_ID: idp.clientId, SWITCHBOARD_OIDC_CLIENT_SECRET: idp.clientSecret },
    log,
  });
});
beforeEach(() => {
  idp.misbehave = 'none';
  // Refills the per-IP sign-in limiter.
  app.clock.advance(60_000);
});
afterAll(async () => {
  await app?.stop();
  await idp?.close();
  await db?.drop();
});

/** A browser without JavaScript: a cookie jar, redirects followed by hand so each hop is visible. */
function browser(on: App = app) {
  const jar = new Map<string, string>();
  async function request(url: string, init: { method?: string; headers?: Record<string, string> } = {}) {
    const sameOrigin = url.startsWith(on.url);
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { method: init.method ?? 'GET', redirect: 'manual', headers: { ...(sameOrigin && cookie ? { cookie } : {}), ...init.headers } });
    if (sameOrigin) {
      for (const set of res.headers.getSetCookie()) {
        const m = /^([^=]+)=([^;]*)/.exec(set)!;
        if (m[2] === '' || /Max-Age=0\b/.test(set)) jar.delete(m[1]!);
        else jar.set(m[1]!, m[2]!);
      }
    }
    return { status: res.status, location: res.headers.get('location'), headers: res.headers, text: await res.text() };
  }
  return {
    jar,
    request,
    /** /auth/login → the provider → /auth/callback; returns the callback's answer. */
    async signIn() {
      const start = await request(`${on.url}/auth/login`);
      expect(start.status).toBe(302);
      const atProvider = await request(start.location!);
      expect(atProvider.status).toBe(302);
      return request(atProvider.location!);
    },
  };
}

describe('GET /auth/login', () => {
  it('sends the browser to the provider with PKCE S256, a state and a nonce, and keeps them in a 10-minute HttpOnly cookie', async () => {
    const b = browser();
    const start = await b.request(`${app.url}/auth/login`);
    expect(start.status).toBe(302);
    const to = new URL(start.location!);
    expect(`${to.origin}${to.pathname}`).toBe(`${idp.issuer}/authorize`);
    expect(to.searchParams.get('client_id')).toBe(idp.clientId);
    expect(to.searchParams.get('redirect_uri')).toBe(`${app.baseUrl}/auth/callback`);
    expect(to.searchParams.get('scope')).toBe('openid profile email');
    expect(to.searchParams.get('code_challenge_method')).toBe('S256');
    expect(to.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(to.searchParams.get('state')).toBeTruthy();
    expect(to.searchParams.get('nonce')).toBeTruthy();
    const set = start.headers.getSetCookie().find((c) => c.startsWith('sb_oidc_state='))!;
    expect(set).toMatch(/HttpOnly/);
    expect(set).toMatch(/SameSite=Lax/);
    expect(set).toMatch(/Max-Age=600\b/);
    expect(set).toMatch(/Path=\/auth/);
    // The verifier never travels to the provider.
    const pending = JSON.parse(Buffer.from(b.jar.get('sb_oidc_state')!, 'base64url').toString());
    expect(start.location).not.toContain(pending.verifier);
  });

  it('the sign-in page offers the provider beside the one-time link', async () => {
    const page = await browser().request(`${app.url}/login`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('href="/auth/login"');
    expect(page.text).toContain(`Sign in with ${new URL(idp.issuer).host}`);
    expect(page.text).toContain('switchboard admin login-link');
  });
});

describe('GET /auth/callback', () => {
  it('signs a new person in: creates a human keyed on (issuer, subject), opens a 12-hour session, clears the state cookie', async () => {
    idp.user = { sub: 'sub-new-1', name: 'Grace Hopper', email: 'grace@example.test', email_verified: true, preferred_username: 'Grace.Hopper' };
    const b = browser();
    const done = await b.signIn();
    expect(done.status).toBe(302);
    expect(done.location).toBe('/');
    expect(b.jar.has('sb_oidc_state')).toBe(false);
    const session = done.headers.getSetCookie().find((c) => c.startsWith('sb_session='))!;
    expect(session).toMatch(/HttpOnly/);
    expect(session).toMatch(/Max-Age=43200\b/);
    const board = await b.request(`${app.url}/`);
    expect(board.status).toBe(200);
    expect(board.text).toContain('grace.hopper');
    const rows = await db.sql`select handle, display_name, email, oidc_issuer, oidc_subject from humans where oidc_subject = 'sub-new-1'`;
    expect(rows).toEqual([{ handle: 'grace.hopper', display_name: 'Grace Hopper', email: 'grace@example.test', oidc_issuer: idp.issuer, oidc_subject: 'sub-new-1' }]);
    // The exchange carried the PKCE verifier and the client secret (Basic).
    const last = idp.tokenRequests.at(-1)!;
    expect(last.ok).toBe(true);
    expect(last.clientAuth).toBe('basic');
    expect(last.codeVerifier).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    // Nothing secret reached the log.
    expect(logLines.join('\n')).not.toContain(idp.clientSecret);
    expect(logLines.join('\n')).not.toContain(session.slice('sb_session='.length, session.indexOf(';')));
  });

  it('the same subject signing in again is the same human, with name and email refreshed', async () => {
    idp.user = { sub: 'sub-again', name: 'First Name', email: 'again@example.test', preferred_username: 'again' };
    await browser().signIn();
    idp.user = { sub: 'sub-again', name: 'Second Name', email: 'again2@example.test', preferred_username: 'renamed' };
    const done = await browser().signIn();
    expect(done.status).toBe(302);
    const rows = await db.sql`select handle, display_name, email from humans where oidc_subject = 'sub-again'`;
    expect(rows).toEqual([{ handle: 'again', display_name: 'Second Name', email: 'again2@example.test' }]);
  });

  it('the same subject at another issuer is another human', async () => {
    const other = await startOidcProvider({ user: { sub: 'shared-sub', preferred_username: 'shared' } });
    const second = await startTestApp(db.url, new ManualClock(new Date()), {
      env: { SWITCHBOARD_OIDC_ISSUER: other.issuer, SWITCHBOARD_OIDC_CLIENT_ID: other.clientId, SWITCHBOARD_OIDC_CLIENT_SECRET: other.clientSecret },
    });
    try {
      idp.user = { sub: 'shared-sub', preferred_username: 'shared' };
      expect((await browser().signIn()).status).toBe(302);
      expect((await browser(second).signIn()).status).toBe(302);
      const rows = await db.sql`select handle, oidc_issuer from humans where oidc_subject = 'shared-sub' order by handle`;
      expect(rows).toEqual([
        { handle: 'shared', oidc_issuer: idp.issuer },
        { handle: 'shared-2', oidc_issuer: other.issuer },
      ]);
    } finally {
      await second.stop();
      await other.close();
    }
  });

  it('binds a human an operator added with the same verified email, so the board shows their endpoints', async () => {
    const added = await addHuman(db.sql, { handle: 'linda', email: 'Linda@Example.test' });
    idp.user = { sub: 'sub-linda', email: 'linda@example.test', email_verified: true, preferred_username: 'l' };
    const b = browser();
    expect((await b.signIn()).status).toBe(302);
    const [row] = await db.sql`select id, oidc_subject from humans where handle = 'linda'`;
    expect(row).toEqual({ id: added.id, oidc_subject: 'sub-linda' });
    expect((await b.request(`${app.url}/`)).text).toContain('<strong>linda</strong>');
  });

  it('does not bind on an email the provider has not verified', async () => {
    await addHuman(db.sql, { handle: 'victor', email: 'victor@example.test' });
    idp.user = { sub: 'sub-mallory', email: 'victor@example.test', email_verified: false, preferred_username: 'mallory' };
    expect((await browser().signIn()).status).toBe(302);
    const rows = await db.sql`select handle, oidc_subject from humans where handle in ('victor', 'mallory') order by handle`;
    expect(rows).toEqual([
      { handle: 'mallory', oidc_subject: 'sub-mallory' },
      { handle: 'victor', oidc_subject: null },
    ]);
  });

  it('400 when the state does not match the one this browser started, and no session', async () => {
    const b = browser();
    const start = await b.request(`${app.url}/auth/login`);
    const atProvider = await b.request(start.location!);
    const back = new URL(atProvider.location!);
    back.searchParams.set('state', 'forged');
    const res = await b.request(back.href);
    expect(res.status).toBe(400);
    expect(res.text).toContain('state mismatch');
    expect(b.jar.has('sb_session')).toBe(false);
  });

  it('400 without the state cookie (a callback this browser never started, or one past 10 minutes)', async () => {
    const b = browser();
    const start = await b.request(`${app.url}/auth/login`);
    const atProvider = await b.request(start.location!);
    b.jar.delete('sb_oidc_state');
    const res = await b.request(atProvider.location!);
    expect(res.status).toBe(400);
    expect(res.text).toContain('not started here');

    const late = browser();
    const started = await late.request(`${app.url}/auth/login`);
    const answered = await late.request(started.location!);
    app.clock.advance(10 * 60_000 + 1);
    expect((await late.request(answered.location!)).status).toBe(400);
    expect(late.jar.has('sb_session')).toBe(false);
  });

  it('400 naming the provider error when the person declines at the provider', async () => {
    idp.misbehave = 'deny';
    const b = browser();
    const res = await b.signIn();
    expect(res.status).toBe(400);
    expect(res.text).toContain('access_denied');
    expect(b.jar.has('sb_session')).toBe(false);
  });

  for (const mode of ['wrong-nonce', 'wrong-audience', 'foreign-key', 'expired', 'token-error'] as const) {
    it(`502 and no session when the provider's answer fails verification (${mode})`, async () => {
      idp.user = { sub: `sub-${mode}`, preferred_username: `u-${mode}` };
      idp.misbehave = mode;
      const b = browser();
      const res = await b.signIn();
      expect(res.status).toBe(502);
      expect(res.text).toContain('could not be verified');
      expect(b.jar.has('sb_session')).toBe(false);
      expect(await db.sql`select 1 from humans where oidc_subject = ${`sub-${mode}`}`).toHaveLength(0);
    });
  }

  it('a replayed callback URL (code already spent, state cookie gone) signs nobody in', async () => {
    idp.user = { sub: 'sub-replay', preferred_username: 'replay' };
    const b = browser();
    const start = await b.request(`${app.url}/auth/login`);
    const atProvider = await b.request(start.location!);
    expect((await b.request(atProvider.location!)).status).toBe(302);
    const thief = browser();
    const replay = await thief.request(atProvider.location!);
    expect(replay.status).toBe(400);
    expect(thief.jar.has('sb_session')).toBe(false);
  });

  it('limits sign-in attempts per client IP with 429 and Retry-After', async () => {
    const b = browser();
    let last = 0;
    let retryAfter: string | null = null;
    for (let i = 0; i < BOARD_SIGN_IN_LIMIT.burst + 1; i += 1) {
      const res = await b.request(`${app.url}/auth/callback?state=x&code=y`);
      last = res.status;
      retryAfter = res.headers.get('retry-after');
    }
    expect(last).toBe(429);
    expect(Number(retryAfter)).toBeGreaterThan(0);
  });
});

describe('without SWITCHBOARD_OIDC_ISSUER', () => {
  it('/auth/login and /auth/callback answer 503 saying how to configure it, and /login shows only the link', async () => {
    const plain = await startTestApp(db.url);
    try {
      const b = browser(plain);
      for (const path of ['/auth/login', '/auth/callback?code=x&state=y']) {
        const res = await b.request(`${plain.url}${path}`);
        expect(res.status).toBe(503);
        expect(res.text).toContain('OIDC not configured');
      }
      const login = await b.request(`${plain.url}/login`);
      expect(login.text).not.toContain('/auth/login');
    } finally {
      await plain.stop();
    }
  });

  it('a provider that cannot be reached answers 502 at sign-in, and the server still starts', async () => {
    const down = await startTestApp(db.url, new ManualClock(new Date()), {
      env: { SWITCHBOARD_OIDC_ISSUER: 'http://127.0.0.1:9', SWITCHBOARD_OIDC_CLIENT_ID: 'x' },
    });
    try {
      const res = await browser(down).request(`${down.url}/auth/login`);
      expect(res.status).toBe(502);
      expect(res.text).toContain('could not be reached');
    } finally {
      await down.stop();
    }
  });
});

describe('configuration', () => {
  const base = { SWITCHBOARD_DATABASE_URL: 'postgres://localhost/x' };
  it('names the variable at fault', () => {
    const fails = (env: Record<string, string>, variable: string) => {
      let caught: unknown;
      try {
        loadConfig({ ...base, ...env });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConfigError);
      expect((caught as ConfigError).variable).toBe(variable);
    };
    fails({ SWITCHBOARD_OIDC_CLIENT_ID: 'x' }, 'SWITCHBOARD_OIDC_ISSUER');
    fails({ SWITCHBOARD_OIDC_ISSUER: 'https://id.example.com' }, 'SWITCHBOARD_OIDC_CLIENT_ID');
    fails({ SWITCHBOARD_OIDC_ISSUER: 'http://id.example.com', SWITCHBOARD_OIDC_CLIENT_ID: 'x' }, 'SWITCHBOARD_OIDC_ISSUER');
    fails({ SWITCHBOARD_OIDC_ISSUER: 'not a url', SWITCHBOARD_OIDC_CLIENT_ID: 'x' }, 'SWITCHBOARD_OIDC_ISSUER');
    fails({ SWITCHBOARD_OIDC_ISSUER: 'https://id.example.com', SWITCHBOARD_OIDC_CLIENT_ID: 'x', SWITCHBOARD_OIDC_REDIRECT_URL: 'ftp://x' }, 'SWITCHBOARD_OIDC_REDIRECT_URL');
  });
  it('reads a complete setting, the secret optional (a public client)', () => {
    expect(loadConfig({ ...base, SWITCHBOARD_OIDC_ISSUER: 'https://id.example.com/', SWITCHBOARD_OIDC_CLIENT_ID: 'sb' }).oidc).toEqual({
      issuer: 'https://id.example.com/',
      clientId: 'sb',
      clientSecret: undefined,
      redirectUrl: undefined,
    });
    expect(loadConfig(base).oidc).toBeNull();
  });
});

// Shared by the board's end-to-end test files (src/board/*.test.ts): a browser without JavaScript and sign-in.

import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { type Vended } from './agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './app.ts';
import { push as pushVia, vend as vendVia } from './fixtures.ts';
import type { App } from '../../src/app.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { createLoginLink } from '../../src/store/web-sessions.ts';

/**
 * The board over real HTTP against a real PostgreSQL: sign-in by link, the session cookie, CSRF,
 * tenancy (another human's ids are 404), the Content-Security-Policy, escaping of hostile text,
 * the presence and shift controls, vend and revoke, and the live-update stream.
 */

type TestApp = App & { clock: ManualClock };

export let db: Awaited<ReturnType<typeof migratedDatabase>>;
export let app: TestApp;
export const clients: Client[] = [];
export let alice: { id: string; handle: string; token: string };
export let bob: { id: string; handle: string; token: string };

interface Res {
  status: number;
  headers: Headers;
  text: string;
}

/** A browser without JavaScript: a cookie jar of one cookie, forms sent url-encoded, redirects not followed. */
export function browser(on: App = app) {
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

export async function signedIn(h: { handle: string }, on: App = app) {
  const b = browser(on);
  const { token } = await createLoginLink(db.sql, h.handle, app.clock.now());
  const r = await b.post(`/login/${token}`);
  expect(r.status).toBe(303);
  return Object.assign(b, { csrfToken: await b.csrf() });
}

export const vend = (h: { token: string }, name = 'agent', queues = ['reviews']): Promise<Vended> =>
  vendVia(apiCaller(app.url, h.token), { name, queues });

export const push = async (h: { token: string }, slug: string, title: string, extra: Record<string, unknown> = {}): Promise<string> =>
  (await pushVia(apiCaller(app.url, h.token), slug, { title, ...extra })).id;

export const presenceRow = async (id: string) => (await db.sql`select presence_override, override_by, shift, state from endpoints where id = ${id}`)[0]!;

/** A database and app of the calling file's own, with two humans (alice, bob); the rate limiters refill before each test. */
export function useBoardSuite(): void {
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
}

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { vend } from '../../test/support/fixtures.ts';
import type { App } from '../app.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLoginLink } from '../store/web-sessions.ts';

/**
 * Hostile ids on every board route that takes one: a NUL, broken percent-encoding and a
 * 5,000-character id are the caller's fault, so each is a 4xx page, never a 500.
 */

type TestApp = App & { clock: ManualClock };

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let cookie = '';
let csrfToken = '';
let endpointId = '';

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock(new Date()));
  const alice = await humanWithToken(db.sql);
  endpointId = (await vend(apiCaller(app.url, alice.token), { name: 'hostile', queues: ['inbox'] })).id;
  const { token } = await createLoginLink(db.sql, alice.handle, app.clock.now());
  const signIn = await fetch(`${app.url}/login/${token}`, { method: 'POST', redirect: 'manual' });
  cookie = /^sb_session=[^;]*/.exec(signIn.headers.get('set-cookie') ?? '')![0];
  const home = await (await fetch(`${app.url}/`, { headers: { cookie } })).text();
  csrfToken = /name="csrf_token" value="([0-9a-f]{64})"/.exec(home)![1]!;
});
// Refills the clock-driven POST limiter.
beforeEach(() => void app.clock.advance(60_000));
afterAll(async () => {
  await app.stop();
  await db.drop();
});

const HOSTILE_IDS = ['%00', '%E0%A4%A', '%', 'a%00b', 'x'.repeat(5000), '%ED%A0%80', '..%2F..%2Fetc', "1' or '1'='1"];

/** A webhook's and a notify hook's routes under `endpoint` (a hostile id, or a real endpoint of the signed-in human's). */
const integrationRoutes = (endpoint: string, id: string) =>
  ['webhooks', 'hooks'].flatMap((kind) => [`/endpoints/${endpoint}/${kind}/${id}/rotate`, `/endpoints/${endpoint}/${kind}/${id}/delete`]);
/** A webhook's routing rules page and its Try (the page's own POST is the GET's path). */
const rulesRoutes = (endpoint: string, id: string, method: 'GET' | 'POST') => [
  `/endpoints/${endpoint}/webhooks/${id}/rules`,
  ...(method === 'POST' ? [`/endpoints/${endpoint}/webhooks/${id}/rules/test`] : []),
];
const GET_ROUTES = (id: string) => [
  `/endpoints/${id}`,
  `/endpoints/${id}/revoke`,
  `/todos/${id}`,
  `/todos?endpoint=${id}`,
  ...integrationRoutes(id, id),
  ...integrationRoutes(endpointId, id),
  ...rulesRoutes(id, id, 'GET'),
  ...rulesRoutes(endpointId, id, 'GET'),
];
const POST_ROUTES = (id: string) => [
  `/endpoints/${id}/presence`,
  `/endpoints/${id}/presence/clear`,
  `/endpoints/${id}/shift`,
  `/endpoints/${id}/self-test`,
  `/endpoints/${id}/revoke`,
  `/endpoints/${id}/todos`,
  `/endpoints/${id}/webhooks`,
  `/endpoints/${id}/hooks`,
  `/todos/${id}/cancel`,
  `/todos/${id}/retry`,
  ...integrationRoutes(id, id),
  ...integrationRoutes(endpointId, id),
  ...rulesRoutes(id, id, 'POST'),
  ...rulesRoutes(endpointId, id, 'POST'),
];

async function send(method: 'GET' | 'POST', path: string) {
  const body = method === 'POST' ? new URLSearchParams({ csrf_token: csrfToken, presence: 'out', shift: 'mon-fri 09:00-17:00' }).toString() : undefined;
  const res = await fetch(`${app.url}${path}`, {
    method,
    redirect: 'manual',
    headers: { cookie, ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    body,
  });
  return { status: res.status, type: res.headers.get('content-type') ?? '', csp: res.headers.get('content-security-policy') ?? '', frame: res.headers.get('x-frame-options'), text: await res.text() };
}

describe('hostile ids on the board', () => {
  for (const id of HOSTILE_IDS) {
    const label = id.length > 40 ? `${id.length} characters` : JSON.stringify(id);
    it(`GET routes answer ${label} with a 4xx page`, async () => {
      for (const path of GET_ROUTES(id)) {
        const r = await send('GET', path);
        expect(r.status, `GET ${path.slice(0, 60)}`).toBeGreaterThanOrEqual(400);
        expect(r.status, `GET ${path.slice(0, 60)}`).toBeLessThan(500);
        expect(r.type).toMatch(/^text\/html/);
        expect(r.csp).toContain("frame-ancestors 'none'");
        expect(r.frame).toBe('DENY');
      }
    });
    it(`POST routes answer ${label} with a 4xx page`, async () => {
      for (const path of POST_ROUTES(id)) {
        const r = await send('POST', path);
        expect(r.status, `POST ${path.slice(0, 60)}`).toBeGreaterThanOrEqual(400);
        expect(r.status, `POST ${path.slice(0, 60)}`).toBeLessThan(500);
        expect(r.type).toMatch(/^text\/html/);
        expect(r.csp).toContain("frame-ancestors 'none'");
        expect(r.frame).toBe('DENY');
      }
    });
  }
});

describe('a URL fastify cannot decode, outside the board', () => {
  it('the API answers its JSON envelope, MCP a JSON-RPC error, both 400 with the security headers', async () => {
    const api = await fetch(`${app.url}/api/v1/endpoints/%E0%A4%A`);
    expect(api.status).toBe(400);
    expect(api.headers.get('x-frame-options')).toBe('DENY');
    expect(await api.json()).toMatchObject({ code: 'invalid_argument', field: 'path' });
    const mcp = await fetch(`${app.url}/mcp/%E0%A4%A`, { method: 'POST' });
    expect(mcp.status).toBe(400);
    expect(mcp.headers.get('x-frame-options')).toBe('DENY');
    expect(await mcp.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000 } });
  });
});

import { describe, expect, it } from 'vitest';
import { vend, withApp } from '../../test/support/fixtures.ts';
import { createLoginLink, mintWebToken } from '../store/web-sessions.ts';
import { AUTH_FAILURE_LIMIT, AuthFailures, addressKey } from './auth-failures.ts';
import { ManualClock } from '../lib/clock.ts';

/**
 * Failed authentications per client address, across /api/v1, the board and /mcp. The server
 * trusts 127.0.0.1 as a proxy, so X-Forwarded-For gives each request the client address under
 * test: ATTACKER presents bad credentials, BYSTANDER valid ones.
 */
const fixture = withApp({ env: { SWITCHBOARD_TRUSTED_PROXIES: '127.0.0.1' } });
const { burst, rate } = AUTH_FAILURE_LIMIT;
let seq = 0;

/** One request as `client`; gives up after 2 s, so a request stuck behind a table lock fails the test. */
function as(client: string, path: string, init: RequestInit = {}) {
  return fetch(`${fixture.app.url}${path}`, {
    ...init,
    redirect: 'manual',
    signal: AbortSignal.timeout(2000),
    headers: { ...(init.headers as Record<string, string>), 'x-forwarded-for': client },
  });
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const mcpInit = (token: string): RequestInit => ({
  method: 'POST',
  headers: { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
});

/** Holds every credential table locked while `body` runs: a request that looks a credential up cannot answer. */
async function withCredentialTablesLocked(body: () => Promise<void>): Promise<void> {
  let release!: () => void;
  let locked!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const ready = new Promise<void>((r) => (locked = r));
  const tx = fixture.sql.begin(async (t) => {
    await t`lock table human_tokens, web_sessions, endpoints in access exclusive mode`;
    locked();
    await held;
  });
  await ready;
  try {
    await body();
  } finally {
    release();
    await tx;
  }
}

describe('failed authentications per client address', () => {
  it('/api/v1: a burst of bad tokens, then 429 before the lookup; a valid token from another address is unaffected', async () => {
    const attacker = `203.0.113.${++seq}`;
    for (let i = 0; i < burst; i++) expect((await as(attacker, '/api/v1/me', { headers: bearer(`sbp_made_up_${i}`) })).status).toBe(401);
    await withCredentialTablesLocked(async () => {
      const refused = await as(attacker, '/api/v1/me', { headers: bearer('sbp_made_up_again') });
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { code: string }).code).toBe('rate_limited');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    });
    // The address is held back whatever it presents; another address is not.
    expect((await as(attacker, '/api/v1/me', { headers: bearer(fixture.human.token) })).status).toBe(429);
    expect((await as('198.51.100.1', '/api/v1/me', { headers: bearer(fixture.human.token) })).status).toBe(200);
    // Without a credential there is nothing to look up and nothing counted: the plain 401.
    expect((await as('198.51.100.2', '/api/v1/me')).status).toBe(401);
  });

  it('/mcp: bad agent credentials, then 429 before the lookup; an agent with its credential from another address connects', async () => {
    const e = await vend(fixture.api);
    const attacker = `203.0.113.${++seq}`;
    for (let i = 0; i < burst; i++) expect((await as(attacker, `/mcp/${e.slug}`, mcpInit(`sbk_made_up_${i}`))).status).toBe(401);
    await withCredentialTablesLocked(async () => {
      const refused = await as(attacker, `/mcp/${e.slug}`, mcpInit('sbk_made_up_again'));
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    });
    const ok = await as('198.51.100.3', `/mcp/${e.slug}`, mcpInit(e.token));
    expect(ok.status).toBe(200);
    expect(ok.headers.get('mcp-session-id')).toBeTruthy();
  });

  // Well-formed cookies: a malformed one is refused without a query, and counts all the same.
  it('the board: dead session cookies, then 429 before the lookup; a signed-in human elsewhere is unaffected', async () => {
    const { token } = await createLoginLink(fixture.sql, fixture.human.handle, fixture.app.clock.now());
    const signIn = await as('198.51.100.4', `/login/${token}`, { method: 'POST' });
    const cookie = /^sb_session=[^;]*/.exec(signIn.headers.get('set-cookie') ?? '')![0];
    const attacker = `203.0.113.${++seq}`;
    for (let i = 0; i < burst; i++) {
      const r = await as(attacker, '/', { headers: { cookie: `sb_session=${mintWebToken()}` } });
      expect(r.status).toBe(303);
    }
    await withCredentialTablesLocked(async () => {
      const refused = await as(attacker, '/', { headers: { cookie: `sb_session=${mintWebToken()}` } });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      const stream = await as(attacker, '/events', { headers: { cookie: `sb_session=${mintWebToken()}` } });
      expect(stream.status).toBe(429);
    });
    // No cookie, nothing looked up: the sign-in page still opens for the attacker's address.
    expect((await as(attacker, '/login')).status).toBe(200);
    expect((await as('198.51.100.5', '/', { headers: { cookie } })).status).toBe(200);
  });

  it('is one bucket across the three surfaces, and refills at its rate', async () => {
    const e = await vend(fixture.api);
    const attacker = `203.0.113.${++seq}`;
    for (let i = 0; i < burst; i++) {
      const r = await (i % 3 === 0
        ? as(attacker, '/api/v1/me', { headers: bearer('sbp_nope') })
        : i % 3 === 1
          ? as(attacker, `/mcp/${e.slug}`, mcpInit('sbk_nope'))
          : as(attacker, '/', { headers: { cookie: `sb_session=${mintWebToken()}` } }));
      expect(r.status).not.toBe(429);
    }
    expect((await as(attacker, `/mcp/${e.slug}`, mcpInit(e.token))).status).toBe(429);
    fixture.app.clock.advance(Math.ceil(1000 / rate));
    expect((await as(attacker, '/api/v1/me', { headers: bearer(fixture.human.token) })).status).toBe(200);
    expect((await as(attacker, '/api/v1/me', { headers: bearer('sbp_nope') })).status).toBe(401);
    expect((await as(attacker, '/api/v1/me', { headers: bearer(fixture.human.token) })).status).toBe(429);
  });
});

describe('AuthFailures', () => {
  it('lets no more lookups run at once than an address that has failed has tokens left', async () => {
    const failures = new AuthFailures(new ManualClock(), { rate: 1, burst: 3 });
    await failures.attempt('a', async () => null);
    await failures.attempt('a', async () => null);
    // One token left: the first of two concurrent guesses runs, the second waits.
    let release!: () => void;
    const slow = failures.attempt('a', () => new Promise<null>((r) => (release = () => r(null))));
    expect(await failures.attempt('a', async () => 'never')).toEqual({ value: null, retryAfter: 1 });
    release();
    expect(await slow).toEqual({ value: null });
    expect(failures.wait('a')).toBe(1);
    // An address that never failed is never held back, however many lookups it has in flight.
    const many = Array.from({ length: 10 }, () => failures.attempt('b', async () => 'ok'));
    expect((await Promise.all(many)).every((r) => r.value === 'ok')).toBe(true);
  });
});

describe('addressKey', () => {
  it('keys IPv6 by its /64 and everything else as it is', () => {
    expect(addressKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('fe80::')).toBe('fe80:0:0:0::/64');
    expect(addressKey('203.0.113.9')).toBe('203.0.113.9');
    expect(addressKey('::ffff:203.0.113.9')).toBe('::ffff:203.0.113.9');
  });

  it('makes one bucket of a /64: a fresh address per guess does not escape it', async () => {
    const failures = new AuthFailures(new ManualClock(), { rate: 1, burst: 2 });
    await failures.attempt('2001:db8:1:2::a', async () => null);
    await failures.attempt('2001:db8:1:2::b', async () => null);
    expect((await failures.attempt('2001:db8:1:2::c', async () => 'x')).value).toBeNull();
    expect((await failures.attempt('2001:db8:1:3::a', async () => 'x')).value).toBe('x');
  });
});

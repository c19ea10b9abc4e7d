import { describe, expect, it } from 'vitest';
import { withApp } from '../../test/support/fixtures.ts';
import { BOARD_SIGN_IN_LIMIT } from '../board/plugin.ts';

/**
 * Which address the per-address limits key on. The test server listens on 127.0.0.1, so every
 * request's socket peer is 127.0.0.1; X-Forwarded-For names the client a proxy would have seen.
 * The ingest limit is shrunk to a burst of 2 (and the manual clock never refills it).
 */
const ingest = (url: string, forwardedFor: string) =>
  fetch(`${url}/webhooks/w/no-such-token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
    body: '{}',
  }).then((r) => r.status);

const signInPage = (url: string, forwardedFor: string) =>
  fetch(`${url}/login/not-a-link`, { headers: { 'x-forwarded-for': forwardedFor }, redirect: 'manual' }).then((r) => r.status);

describe('no trusted proxy (the default)', () => {
  const fixture = withApp({ ingestLimit: { rate: 0.001, burst: 2 } });

  it('keys ingest on the socket address: a forged X-Forwarded-For per request does not escape the limit', async () => {
    const statuses = [];
    for (const client of ['203.0.113.1', '203.0.113.2', '203.0.113.3', '198.51.100.7']) statuses.push(await ingest(fixture.app.url, client));
    expect(statuses).toEqual([404, 404, 429, 429]);
  });

  it('keys the board sign-in limit on the socket address too', async () => {
    const statuses = [];
    for (let i = 0; i <= BOARD_SIGN_IN_LIMIT.burst; i++) statuses.push(await signInPage(fixture.app.url, `203.0.113.${i + 1}`));
    expect(statuses.slice(0, -1).every((s) => s === 404)).toBe(true);
    expect(statuses.at(-1)).toBe(429);
  });
});

describe('SWITCHBOARD_TRUSTED_PROXIES=127.0.0.1 (behind a proxy on this host)', () => {
  const fixture = withApp({ ingestLimit: { rate: 0.001, burst: 2 }, env: { SWITCHBOARD_TRUSTED_PROXIES: '10.9.9.9,127.0.0.1,fd00::/8' } });

  it("keys ingest on the forwarded client: one client's flood does not 429 another behind the same proxy", async () => {
    const flood = [];
    for (let i = 0; i < 5; i++) flood.push(await ingest(fixture.app.url, '203.0.113.1'));
    expect(flood).toEqual([404, 404, 429, 429, 429]);
    expect(await ingest(fixture.app.url, '203.0.113.2')).toBe(404);
    // The client a chain names is its rightmost untrusted hop: a forged leftmost entry changes nothing.
    expect(await ingest(fixture.app.url, '198.51.100.9, 203.0.113.1')).toBe(429);
    expect(await ingest(fixture.app.url, '203.0.113.2, 10.9.9.9')).toBe(404);
  });

  it('keys the board sign-in limit on the forwarded client', async () => {
    for (let i = 0; i < BOARD_SIGN_IN_LIMIT.burst; i++) expect(await signInPage(fixture.app.url, '192.0.2.1')).toBe(404);
    expect(await signInPage(fixture.app.url, '192.0.2.1')).toBe(429);
    expect(await signInPage(fixture.app.url, '192.0.2.2')).toBe(404);
  });

  it('still keys a request that names no client on its socket address', async () => {
    const direct = [];
    for (let i = 0; i < 3; i++) direct.push(await fetch(`${fixture.app.url}/webhooks/w/x`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).then((r) => r.status));
    expect(direct).toEqual([404, 404, 429]);
  });
});

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { apiCaller } from '../../test/support/app.ts';
import { vendEndpoint } from '../store/endpoints.ts';
import { createToken, revokeToken } from '../store/humans.ts';
import {
  anon,
  app,
  counts,
  expectError,
  operator,
  pushPath,
  type Res,
  sql,
  useOperatorApiSuite,
  vend,
} from '../../test/support/operator-api.ts';

// /api/v1 over real HTTP: the bearer guard, rate limits, headers, /healthz and unknown routes.

useOperatorApiSuite();

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;
/** The realm and, for an OAuth client, where to learn how to get a token (RFC 9728 §5.1). */
const realm = () => `Bearer realm="switchboard-api", resource_metadata="${app.baseUrl}/.well-known/oauth-protected-resource/api"`;

// ---------------------------------------------------------------------------------------------

describe('/api/v1 auth guard (GET /api/v1/me)', () => {
  it('answers a valid personal token with the caller', async () => {
    const op = await operator({ displayName: 'Grace Hopper', email: 'grace@example.test' });
    const res = await op.call('GET', '/api/v1/me');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ id: op.id, handle: op.handle, display_name: 'Grace Hopper', email: 'grace@example.test' });
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  it('accepts the Bearer scheme in any letter case', async () => {
    const op = await operator();
    const res = await anon('GET', '/api/v1/me', undefined, { authorization: `bearer ${op.token}` });
    expect(res.status).toBe(200);
    expect(res.json.id).toBe(op.id);
  });

  it('refuses every kind of bad credential with one 401 and realm; the reason says only what the caller sent or holds', async () => {
    const op = await operator();
    const ep = await vend(op);
    const revoked = await operator();
    expect((await revoked.call('GET', '/api/v1/me')).status).toBe(200);
    await revokeToken(sql, revoked.token.slice(0, 12), app.clock.now());
    const revokedEndpoint = await vend(op);
    await op.call('POST', `/api/v1/endpoints/${revokedEndpoint.slug}/revoke`);

    const attempts: [string, Record<string, string>, string][] = [
      ['no Authorization header', {}, 'missing'],
      ['a Basic header', { authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` }, 'missing'],
      ['a valid token under the wrong scheme', { authorization: `Token ${op.token}` }, 'missing'],
      ['a Bearer header with no token', { authorization: 'Bearer' }, 'missing'],
      ['a Bearer header with two tokens', { authorization: `Bearer ${op.token} ${op.token}` }, 'missing'],
      ['a bare token without a scheme', { authorization: op.token }, 'missing'],
      ['an unknown sbp_ token', { authorization: `Bearer sbp_${randomBytes(32).toString('base64url')}` }, 'unknown'],
      ['a revoked sbp_ token', { authorization: `Bearer ${revoked.token}` }, 'revoked'],
      ['a made-up token', { authorization: 'Bearer hunter2' }, 'unknown'],
      ['an endpoint credential (sbk_)', { authorization: `Bearer ${ep.token}` }, 'endpoint_credential'],
      ['a revoked endpoint credential', { authorization: `Bearer ${revokedEndpoint.token}` }, 'endpoint_credential'],
      ['a made-up sbk_ credential', { authorization: `Bearer sbk_${randomBytes(32).toString('base64url')}` }, 'endpoint_credential'],
    ];
    const bodies = new Map<string, Set<string>>();
    for (const [label, headers, reason] of attempts) {
      const res = await anon('GET', '/api/v1/me', undefined, headers);
      expect(res.status, label).toBe(401);
      expect(res.headers.get('www-authenticate'), label).toBe(realm());
      expect(res.json, label).toEqual({ error: expect.any(String), code: 'unauthenticated', reason });
      bodies.set(reason, (bodies.get(reason) ?? new Set()).add(res.text));
    }
    // Within a reason one answer: a live, a revoked and a made-up sbk_ credential look the same;
    // a revoked sbp_ token is told so (its holder knows it existed), an unknown one is not.
    expect([...bodies.values()].map((b) => b.size)).toEqual([1, 1, 1, 1]);
  });

  it('refuses an endpoint credential on a write too, and writes nothing', async () => {
    const op = await operator();
    const ep = await vend(op);
    const before = await counts();
    const asEndpoint = apiCaller(app.baseUrl, ep.token);
    const res = await asEndpoint('POST', '/api/v1/endpoints', { name: 'escalation' });
    expectError(res, 401, 'unauthenticated', { reason: 'endpoint_credential' });
    expect(res.headers.get('www-authenticate')).toBe(realm());
    const pushed = await asEndpoint('POST', pushPath(ep.slug), { title: 'self-assigned' });
    expectError(pushed, 401, 'unauthenticated', { reason: 'endpoint_credential' });
    expect(await counts()).toEqual(before);
  });

  it('checks the token before the body: an unauthenticated oversized or malformed body is still a 401', async () => {
    const big = await anon('POST', '/api/v1/endpoints', { name: 'x'.repeat(70 * 1024) });
    expectError(big, 401, 'unauthenticated', { reason: 'missing' });
    const malformed = await anon('POST', '/api/v1/endpoints', '{"name":');
    expectError(malformed, 401, 'unauthenticated', { reason: 'missing' });
  });
});

describe('rate limits on /api/v1 (per personal token)', () => {
  it('passes 20 writes on a frozen clock, refuses the 21st with 429 and Retry-After, and refills as time moves', async () => {
    const op = await operator();
    // Vended through the store so the setup spends none of the token's writes.
    const { endpoint } = await vendEndpoint(sql, op.id, { name: 'limited' }, app.clock.now());
    const before = await counts();
    for (let i = 1; i <= 20; i++) {
      const res = await op.call('POST', pushPath(endpoint.slug), { title: `write ${i}` });
      expect(res.status, `write ${i}: ${res.text}`).toBe(201);
    }
    const limited = await op.call('POST', pushPath(endpoint.slug), { title: 'write 21' });
    expectError(limited, 429, 'rate_limited', { retry_after: expect.any(Number) });
    const retryAfter = limited.headers.get('retry-after');
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(limited.json.retry_after).toBe(Number(retryAfter));
    // Any write counts against the same bucket, and a refused write writes nothing.
    expectError(await op.call('POST', '/api/v1/endpoints', { name: 'also refused' }), 429, 'rate_limited', {
      retry_after: expect.any(Number),
    });
    expect((await counts()).todos).toBe(before.todos + 20);
    expect((await counts()).endpoints).toBe(before.endpoints);

    // Reads have their own bucket.
    expect((await op.call('GET', '/api/v1/me')).status).toBe(200);
    // Another token of the same human, and another human, have their own buckets.
    const { token: second } = await createToken(sql, { handle: op.handle, name: 'second' });
    expect((await apiCaller(app.baseUrl, second)('POST', pushPath(endpoint.slug), { title: 'second token' })).status).toBe(201);
    const stranger = await operator();
    expect((await stranger.call('POST', '/api/v1/endpoints', { name: 'unaffected' })).status).toBe(201);
    expect((await op.call('POST', pushPath(endpoint.slug), { title: 'still limited' })).status).toBe(429);

    // One second at 5 writes/s refills five writes, no more.
    app.clock.advance(1_000);
    for (let i = 1; i <= 5; i++) {
      expect((await op.call('POST', pushPath(endpoint.slug), { title: `refilled ${i}` })).status, `refilled ${i}`).toBe(201);
    }
    expect((await op.call('POST', pushPath(endpoint.slug), { title: 'refilled 6' })).status).toBe(429);
    // A long pause refills to the burst, not beyond it.
    app.clock.advance(3_600_000);
    for (let i = 1; i <= 20; i++) {
      expect((await op.call('POST', pushPath(endpoint.slug), { title: `after a pause ${i}` })).status).toBe(201);
    }
    expect((await op.call('POST', pushPath(endpoint.slug), { title: 'after a pause 21' })).status).toBe(429);
  });

  it('passes 40 reads on a frozen clock, refuses the 41st with 429, and leaves writes alone', async () => {
    const op = await operator();
    for (let i = 1; i <= 40; i++) {
      const res = await op.call('GET', '/api/v1/me');
      expect(res.status, `read ${i}`).toBe(200);
    }
    const limited = await op.call('GET', '/api/v1/endpoints');
    expectError(limited, 429, 'rate_limited', { retry_after: expect.any(Number) });
    expect(limited.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(limited.json.retry_after).toBe(Number(limited.headers.get('retry-after')));
    expect((await op.call('POST', '/api/v1/endpoints', { name: 'writes are separate' })).status).toBe(201);
    app.clock.advance(1_000);
    expect((await op.call('GET', '/api/v1/me')).status).toBe(200);
  });
});

describe('security headers on every response', () => {
  const expectSecurityHeaders = (res: Res, label: string) => {
    expect(res.headers.get('x-content-type-options'), label).toBe('nosniff');
    expect(res.headers.get('x-frame-options'), label).toBe('DENY');
    expect(res.headers.get('content-security-policy'), label).toContain("default-src 'none'");
    expect(res.headers.get('content-security-policy'), label).toContain("frame-ancestors 'none'");
    expect(res.headers.get('referrer-policy'), label).toBe('strict-origin-when-cross-origin');
    expect(res.headers.get('cache-control'), label).toBe('no-store');
  };

  it('sets them on a 200, 201, 400, 401, 404, 413 and /healthz', async () => {
    const op = await operator();
    const cases: [string, Res][] = [
      ['200 /api/v1/me', await op.call('GET', '/api/v1/me')],
      ['201 vend', await op.call('POST', '/api/v1/endpoints', { name: 'headers' })],
      ['400 vend', await op.call('POST', '/api/v1/endpoints', {})],
      ['401', await anon('GET', '/api/v1/me')],
      ['404 unknown route', await anon('GET', '/no-such-route')],
      ['404 unknown endpoint', await op.call('GET', '/api/v1/endpoints/no-such-endpoint-00000000')],
      ['413', await op.call('POST', '/api/v1/endpoints', { name: 'x'.repeat(70 * 1024) })],
      ['200 /healthz', await anon('GET', '/healthz')],
    ];
    expect(cases.map(([, r]) => r.status)).toEqual([200, 201, 400, 401, 404, 404, 413, 200]);
    for (const [label, res] of cases) expectSecurityHeaders(res, label);
  });
});

describe('GET /healthz', () => {
  it('answers "ok <version>\\n" as text/plain by default, without auth', async () => {
    const res = await anon('GET', '/healthz');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toBe(`ok ${PACKAGE_VERSION}\n`);
    expect(PACKAGE_VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('answers JSON when Accept prefers it, and text when text ranks higher', async () => {
    const json = await anon('GET', '/healthz', undefined, { accept: 'application/json' });
    expect(json.status).toBe(200);
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(json.json).toEqual({ status: 'ok', version: PACKAGE_VERSION });
    const text = await anon('GET', '/healthz', undefined, { accept: 'text/plain, application/json;q=0.5' });
    expect(text.text).toBe(`ok ${PACKAGE_VERSION}\n`);
    const browser = await anon('GET', '/healthz', undefined, { accept: '*/*' });
    expect(browser.text).toBe(`ok ${PACKAGE_VERSION}\n`);
  });

  it('ignores a bad token: health is public', async () => {
    const res = await anon('GET', '/healthz', undefined, { authorization: 'Bearer sbp_nonsense' });
    expect(res.status).toBe(200);
    expect(res.text).toBe(`ok ${PACKAGE_VERSION}\n`);
  });
});

describe('unknown routes under /api/v1', () => {
  const unknown: [string, string][] = [
    ['GET', '/api/v1/nope'],
    ['GET', '/api/v1'],
    ['POST', '/api/v1/endpoints/some-slug/explode'],
    ['DELETE', '/api/v1/endpoints'],
  ];

  it.each(unknown)('%s %s: 401 without a token (the guard comes first)', async (method, path) => {
    const res = await anon(method, path);
    expectError(res, 401, 'unauthenticated', { reason: 'missing' });
    expect(res.headers.get('www-authenticate')).toBe(realm());
  });

  it.each(unknown)('%s %s: 404 not_found with a token', async (method, path) => {
    const op = await operator();
    const res = await op.call(method, path);
    expectError(res, 404, 'not_found');
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  it('answers an unknown route outside /api/v1 with 404 and no auth', async () => {
    expectError(await anon('GET', '/no-such-route'), 404, 'not_found');
  });
});
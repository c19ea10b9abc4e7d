import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DRAIN_VERBS, WEBHOOK_VERBS } from '../../src/domain/scope.ts';
import { createLoginLink } from '../../src/store/web-sessions.ts';
import {
  anyJson,
  anyString,
  api,
  app,
  contentType,
  db,
  fuzz,
  headerValue,
  human,
  humanToken,
  mostly,
  type Outcome,
  request,
  useHostileInputSuite,
} from '../support/hostile-input.ts';

// Fault: hostile input at the HTTP doors: webhook bodies and headers, API vend and push bodies, and
// random path segments where a slug, a ref, an ingest token or a board id goes.

useHostileInputSuite();

/** A board session of the test's human: its cookie and CSRF token. */
async function boardSignIn(): Promise<{ cookie: string; csrf: string }> {
  const { token } = await createLoginLink(db.sql, human.handle, app.clock.now());
  const signIn = await fetch(`${app.url}/login/${token}`, { method: 'POST', redirect: 'manual' });
  const cookie = /^sb_session=[^;]*/.exec(signIn.headers.get('set-cookie') ?? '')![0];
  const home = await (await fetch(`${app.url}/`, { headers: { cookie } })).text();
  return { cookie, csrf: /name="csrf_token" value="([0-9a-f]{64})"/.exec(home)![1]! };
}
const headerName = fc.oneof(
  fc.stringMatching(/^x-[a-z0-9-]{1,24}$/),
  fc.constantFrom('x-github-event', 'x-github-delivery', 'x-gitea-event', 'x-gitea-delivery', 'x-hub-signature-256', 'x-hub-signature', 'x-gitea-signature', 'x-delivery-id', 'webhook-id', 'user-agent', 'authorization', 'cookie', 'x-forwarded-for'),
);
/** Any string as a URL path segment: every byte of its UTF-8 percent-encoded, or raw oddities. */
const pathSegment = fc.oneof(
  { weight: 4, arbitrary: anyString.filter((s) => s.length > 0).map((s) => [...Buffer.from(s, 'utf8')].map((b) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`)).join('')) },
  { weight: 1, arbitrary: fc.constantFrom('%00', '%ZZ', '%', '%C0%80', '%ED%A0%80', '..', '%2e%2e', 'x%2Fy', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'a'.repeat(5000)) },
);

describe('hostile input', () => {
  it('webhook bodies and headers: signed, wrongly signed and unsigned, to every kind of webhook', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'forge', queues: ['reviews', 'inbox'] });
    expect(r.status).toBe(201);
    const slug = r.json.slug as string;
    const hooks: { url: string; source: string; secret?: string }[] = [];
    for (const source of ['github', 'gitea', 'generic']) {
      const w = await api('POST', `/api/v1/endpoints/${slug}/webhooks`, { source_type: source, target_queue: 'reviews' });
      expect(w.status).toBe(201);
      hooks.push({ url: w.json.ingest_url, source, secret: w.json.signing_secret });
    }

    const payload = fc.oneof(
      { weight: 2, arbitrary: anyJson.map((v) => JSON.stringify(v)) },
      {
        weight: 3,
        arbitrary: fc
          .record(
            {
              action: anyString,
              number: fc.oneof(fc.nat(), anyJson),
              issue: fc.record({ title: anyString, number: fc.nat(), body: anyString }, { requiredKeys: [] }),
              pull_request: fc.record({ title: anyString, body: anyString }, { requiredKeys: [] }),
              repository: fc.record({ full_name: anyString }),
              ref: anyString,
              commits: fc.array(fc.record({ message: anyString }), { maxLength: 3 }),
            },
            { requiredKeys: [] },
          )
          .map((v) => JSON.stringify(v)),
      },
      { weight: 1, arbitrary: anyString },
      { weight: 1, arbitrary: fc.constantFrom('', '{', '[]', 'null', '"\\u0000"', '{"a":"\\ud800"}', '{"\\udfff":1}', `${'['.repeat(200)}${']'.repeat(200)}`, '{"title":"\u0000"}') },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((u) => Buffer.from(u).toString('latin1')) },
    );
    const signature = fc.constantFrom('correct', 'correct', 'correct', 'wrong', 'garbage', 'none', 'unprefixed');
    const extra = fc.dictionary(headerName, headerValue, { maxKeys: 5 });
    const event = fc.oneof(fc.constantFrom('issues', 'pull_request', 'push', 'ping', 'issue_comment', 'release'), headerValue);
    const delivery = fc.oneof(fc.uuid(), headerValue, fc.constant(undefined));

    await fuzz(
      'POST /webhooks/w/{token}',
      fc.tuple(fc.nat({ max: hooks.length - 1 }), payload, fc.boolean(), signature, extra, event, delivery, contentType),
      500,
      async ([which, body, asUtf8, sig, extraHeaders, ev, del, ct]) => {
        const hook = hooks[which]!;
        const raw = Buffer.from(body, asUtf8 ? 'utf8' : 'latin1');
        const hmac = createHmac('sha256', hook.secret ?? 'no secret').update(raw).digest('hex');
        const goodOrWrong = sig === 'wrong' ? createHmac('sha256', 'wrong').update(raw).digest('hex') : hmac;
        const signed: Record<string, string> = {};
        if (sig === 'garbage') Object.assign(signed, { 'x-hub-signature-256': 'sha256=zz', 'x-gitea-signature': 'zz' });
        else if (sig === 'unprefixed') signed['x-hub-signature-256'] = hmac;
        else if (sig !== 'none' && hook.source === 'gitea') signed['x-gitea-signature'] = goodOrWrong;
        else if (sig !== 'none') signed['x-hub-signature-256'] = `sha256=${goodOrWrong}`;
        const headers: Record<string, string> = {
          ...extraHeaders,
          'content-type': ct,
          [hook.source === 'gitea' ? 'x-gitea-event' : 'x-github-event']: ev,
          ...(del !== undefined ? { [hook.source === 'gitea' ? 'x-gitea-delivery' : 'x-github-delivery']: del } : {}),
          ...signed,
        };
        if (!ct) delete headers['content-type'];
        const res = await request(hook.url, { method: 'POST', headers, body: raw });
        if (res.status === 202) expect(res.json).toMatchObject({ todos: [expect.objectContaining({ id: expect.stringMatching(/^td_/) })] });
        return res;
      },
    );
  });

  it('API bodies: vend and push with random JSON, half-valid fields and bytes that are not JSON', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'target', queues: ['reviews', 'inbox'] });
    expect(r.status).toBe(201);
    const slug = r.json.slug as string;
    const rawBody = fc.oneof(anyString, fc.constantFrom('', '{', '{"title":', 'null', '[]', '"x"', '{"title":"a","title":"b"}', '{"title":"\\ud800x","queue":"reviews"}'));
    const asBody = <T>(arb: fc.Arbitrary<T>) =>
      fc.tuple(
        fc.oneof({ weight: 6, arbitrary: arb.map((v) => JSON.stringify(v)) }, { weight: 1, arbitrary: rawBody }),
        fc.oneof({ weight: 10, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: contentType }),
      );
    const vendBody = fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record(
          {
            name: mostly(fc.oneof(fc.stringMatching(/^[a-z][a-z0-9 -]{0,40}$/), fc.string({ unit: 'grapheme', minLength: 1 }))),
            queues: mostly(fc.array(mostly(fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,70}$/)), { maxLength: 4 })),
            verbs: mostly(fc.array(fc.oneof(fc.constantFrom(...DRAIN_VERBS, ...WEBHOOK_VERBS, 'clock_in', 'nope'), anyString), { maxLength: 4 })),
          },
          { requiredKeys: [] },
        ),
      },
      { weight: 1, arbitrary: fc.dictionary(anyString, anyJson, { maxKeys: 4 }) },
      { weight: 1, arbitrary: anyJson },
    );
    const pushBody = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record(
          {
            title: mostly(fc.oneof({ weight: 6, arbitrary: fc.string({ minLength: 1, maxLength: 80 }) }, { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ minLength: 190, maxLength: 260 }) }), 8),
            queue: mostly(fc.constantFrom('reviews', 'inbox', 'reviews', 'inbox', 'elsewhere', '_switchboard', ''), 8),
            kind: mostly(fc.stringMatching(/^[A-Za-z0-9._:-]{1,64}$/), 6),
            payload: anyJson,
            key: mostly(fc.oneof({ weight: 6, arbitrary: fc.string({ minLength: 1, maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ minLength: 250, maxLength: 300 }) }), 6),
          },
          { requiredKeys: ['title', 'queue'] },
        ),
      },
      { weight: 1, arbitrary: fc.dictionary(anyString, anyJson, { maxKeys: 4 }) },
      { weight: 1, arbitrary: anyJson },
    );
    const post = async (path: string, [b, ct]: [string, string]): Promise<Outcome> =>
      request(`${app.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${humanToken}`, ...(ct ? { 'content-type': ct } : {}) }, body: b });
    await fuzz('POST /api/v1/endpoints (vend)', asBody(vendBody), 300, (input) => post('/api/v1/endpoints', input));
    await fuzz('POST /api/v1/endpoints/{ref}/todos (push)', asBody(pushBody), 400, (input) => post(`/api/v1/endpoints/${slug}/todos`, input));

    // The server still does its job.
    const ok = await api('POST', `/api/v1/endpoints/${slug}/todos`, { title: 'after the fuzz', queue: 'reviews' });
    expect(ok.status).toBe(201);
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  });

  it('random path segments where a slug, a ref, an ingest token or a board id goes', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'paths', queues: ['reviews'] });
    expect(r.status).toBe(201);
    const e = r.json as { slug: string; token: string };
    const board = await boardSignIn();
    const door = fc.constantFrom(
      (seg: string) => ({ method: 'GET', path: `/api/v1/endpoints/${seg}` }),
      (seg: string) => ({ method: 'GET', path: `/api/v1/endpoints/${seg}/todos` }),
      (seg: string) => ({ method: 'POST', path: `/api/v1/endpoints/${seg}/todos`, body: { title: 'x' } }),
      (seg: string) => ({ method: 'PUT', path: `/api/v1/endpoints/${seg}/shift`, body: { shift: '09:00-17:00' } }),
      (seg: string) => ({ method: 'PUT', path: `/api/v1/endpoints/${seg}/presence`, body: { presence: 'out' } }),
      (seg: string) => ({ method: 'POST', path: `/api/v1/endpoints/${seg}/revoke` }),
      (seg: string) => ({ method: 'POST', path: `/api/v1/webhooks/${seg}/rotate` }),
      (seg: string) => ({ method: 'DELETE', path: `/api/v1/webhooks/${seg}` }),
      (seg: string) => ({ method: 'GET', path: `/api/v1/events?endpoint=${seg}` }),
      (seg: string) => ({ method: 'POST', path: `/webhooks/w/${seg}`, body: { action: 'opened' } }),
      (seg: string) => ({ method: 'POST', path: `/mcp/${seg}`, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }, mcp: true }),
      (seg: string) => ({ method: 'GET', path: `/mcp/${seg}`, mcp: true }),
      // The board: every route with an id, POSTs with a valid CSRF token.
      ...[`/endpoints/{}`, `/endpoints/{}/revoke`, `/todos/{}`].map((p) => (seg: string) => ({ method: 'GET', path: p.replace('{}', seg), board: true })),
      ...['presence', 'presence/clear', 'shift', 'self-test', 'revoke'].map((v) => (seg: string) => ({ method: 'POST', path: `/endpoints/${seg}/${v}`, board: true })),
    );
    await fuzz('random {slug} / {ref} / {token} / {id} in paths', fc.tuple(door, pathSegment), 400, async ([make, seg]) => {
      const d = make(seg) as { method: string; path: string; body?: unknown; mcp?: boolean; board?: boolean };
      const form = d.board && d.method === 'POST' ? new URLSearchParams({ csrf_token: board.csrf, presence: 'out', shift: '09:00-17:00' }).toString() : undefined;
      const res = await request(`${app.url}${d.path}`, {
        method: d.method,
        redirect: 'manual',
        headers: d.board
          ? { cookie: board.cookie, ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) }
          : {
              authorization: `Bearer ${d.mcp ? e.token : humanToken}`,
              ...(d.mcp ? { accept: 'application/json, text/event-stream' } : {}),
              ...(d.body ? { 'content-type': 'application/json' } : {}),
            },
        body: form ?? (d.body ? JSON.stringify(d.body) : undefined),
        signal: AbortSignal.timeout(5000),
      });
      return { ...res, answer: `${d.method} ${d.path.slice(0, 200)} → ${res.answer}` };
    });
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  });
});
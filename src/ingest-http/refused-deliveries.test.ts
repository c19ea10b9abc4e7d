import { randomBytes, randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { githubHeaders, githubIssueOpened, githubPush, signSha256 } from '../domain/ingest/fixtures.testkit.ts';
import { INGEST_BODY_LIMIT } from './routes.ts';
import {
  api,
  app,
  counter,
  createWebhook,
  github,
  logged,
  type Minted,
  post,
  refused,
  todo,
  seedForgeWebhooks,
  useIngestSuite,
  vend,
  type Vended,
  verifyFailures,
} from '../../test/support/ingest.ts';

// Webhook ingestion end to end: refused deliveries and the ingest limits.

useIngestSuite();

// ---------------------------------------------------------------------------------------------

let forge: Vended;
let gh: Minted;
let gen: Minted;

beforeAll(async () => void ({ forge, gh, gen } = await seedForgeWebhooks()));

describe('bad input: the documented status, nothing stored, nothing secret logged', () => {
  const body = () => JSON.stringify(githubIssueOpened);

  it('wrong signature: 401, counted as bad_signature, one redacted log line', async () => {
    const before = await verifyFailures('github', 'bad_signature');
    const rejected = await counter('switchboard_webhook_deliveries_total', { provider: 'github', trust_mode: 'signed', verdict: 'rejected' });
    const { r, lines } = await refused(401, 'unauthenticated', () => post(gh.ingest_url, body(), githubHeaders('issues', body(), 'whsec_not-the-secret')));
    expect(r.json).toEqual({ error: 'signature verification failed', code: 'unauthenticated' });
    expect(await verifyFailures('github', 'bad_signature')).toBe(before + 1);
    expect(await counter('switchboard_webhook_deliveries_total', { provider: 'github', trust_mode: 'signed', verdict: 'rejected' })).toBe(rejected + 1);
    const line = lines.split('\n').find((l) => l.includes('webhook signature refused'))!;
    expect(JSON.parse(line)).toMatchObject({ provider: 'github', event: 'issues', reason: 'bad_signature', slug: forge.slug });
    expect(line).not.toMatch(/sha256=|whsec_/);
    // The metric as Prometheus renders it.
    expect(await app.services.metrics.registry.getSingleMetricAsString('switchboard_webhook_verify_failures_total')).toMatch(
      /switchboard_webhook_verify_failures_total\{provider="github",reason="bad_signature"\} [1-9]/,
    );
  });

  it('missing signature header (a sha1-only hook): 401 missing_signature', async () => {
    const before = await verifyFailures('github', 'missing_signature');
    const { 'x-hub-signature-256': _drop, ...headers } = githubHeaders('issues', body(), gh.signing_secret!);
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, body(), headers));
    const bare = { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': randomUUID() };
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, body(), bare));
    expect(await verifyFailures('github', 'missing_signature')).toBe(before + 2);
  });

  it('a signature for a different body: 401 bad_signature', async () => {
    const before = await verifyFailures('github', 'bad_signature');
    const signedFor = JSON.stringify({ ...githubIssueOpened, action: 'closed' });
    const headers = githubHeaders('issues', signedFor, gh.signing_secret!);
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, body(), headers));
    // One byte of whitespace is a different body.
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, `${signedFor}\n`, headers));
    expect(await verifyFailures('github', 'bad_signature')).toBe(before + 2);
  });

  it('a malformed signature (no sha256= prefix, not hex): 401 malformed_signature', async () => {
    const before = await verifyFailures('github', 'malformed_signature');
    const hex = signSha256(gh.signing_secret!, body());
    for (const sig of [hex, `sha1=${hex}`, `sha256=${hex.slice(0, 40)}`, 'sha256=not-hex']) {
      await refused(401, 'unauthenticated', () => post(gh.ingest_url, body(), { ...githubHeaders('issues', body(), gh.signing_secret!), 'x-hub-signature-256': sig }));
    }
    expect(await verifyFailures('github', 'malformed_signature')).toBe(before + 4);
  });

  it('a body over 5 MiB: 413', async () => {
    const base = JSON.stringify({ ...githubPush, pad: '' });
    const big = JSON.stringify({ ...githubPush, pad: 'x'.repeat(INGEST_BODY_LIMIT + 1 - base.length) });
    expect(Buffer.byteLength(big)).toBe(INGEST_BODY_LIMIT + 1);
    const { r } = await refused(413, 'payload_too_large', () => github(gh, 'push', big, gh.signing_secret!));
    expect(r.json.error).toMatch(/too large/);
  });

  it('a body that is not JSON, or a form with no JSON payload, on github: 400 naming the field, but only after the signature verified', async () => {
    const form = 'action=opened&number=12';
    const formHeaders = { ...githubHeaders('issues', form, gh.signing_secret!), 'content-type': 'application/x-www-form-urlencoded' };
    const { r } = await refused(400, 'invalid_argument', () => post(gh.ingest_url, form, formHeaders));
    expect(r.json).toMatchObject({ field: 'payload', error: expect.stringMatching(/^payload: /) });
    const text = await refused(400, 'invalid_argument', () => github(gh, 'issues', '{"action": "opened",', gh.signing_secret!));
    expect(text.r.json).toMatchObject({ field: 'body', error: 'body: is not valid JSON' });
    await refused(400, 'invalid_argument', () => github(gh, 'issues', '', gh.signing_secret!));
    // Unverified, the same body is a 401: nothing is parsed before the signature checks out.
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, form, { ...formHeaders, 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` }));
  });

  it('an unknown token: 404, nothing counted as a verify failure', async () => {
    const failures = await app.services.metrics.registry.getSingleMetricAsString('switchboard_webhook_verify_failures_total');
    const unknown = `${app.url}/webhooks/w/${randomBytes(16).toString('hex')}`;
    const { r } = await refused(404, 'not_found', () => post(unknown, body(), githubHeaders('issues', body(), gh.signing_secret!)));
    expect(r.json.error).toBe('unknown webhook');
    await refused(404, 'not_found', () => post(`${app.url}/webhooks/w/`, body(), githubHeaders('issues', body(), gh.signing_secret!)));
    expect(await app.services.metrics.registry.getSingleMetricAsString('switchboard_webhook_verify_failures_total')).toBe(failures);
  });

  it('a revoked owner endpoint: 503, for a correctly signed delivery too', async () => {
    const e = await vend(['reviews']);
    const w = await createWebhook(e.slug, 'github', 'reviews');
    const g = await createWebhook(e.slug, 'generic', 'reviews');
    expect((await api('POST', `/api/v1/endpoints/${e.slug}/revoke`)).status).toBe(200);
    const { r } = await refused(503, 'unavailable', () => github(w, 'issues', githubIssueOpened, w.signing_secret!));
    expect(r.json.error).toMatch(/webhook not configured/);
    await refused(503, 'unavailable', () => post(g.ingest_url, '{"title":"x"}', { 'content-type': 'application/json' }));
  });

  it('an event name outside the kind grammar: 400 naming its header, nothing stored', async () => {
    for (const name of ['x'.repeat(65), 'push event', 'issues;drop', '']) {
      const { r } = await refused(400, 'invalid_argument', () => github(gh, name, body(), gh.signing_secret!));
      expect(r.json).toMatchObject({ field: 'X-GitHub-Event' });
    }
    const { r } = await refused(400, 'invalid_argument', () =>
      post(gen.ingest_url, body(), { 'content-type': 'application/json', 'x-event-type': '<b>urgent</b>' }),
    );
    expect(r.json.error).toMatch(/^X-Event-Type: the event name must be letters, digits/);
  });

  it('a notify hook delivery (its marker header): 400 naming the header, nothing stored, so hooks cannot loop', async () => {
    const { r } = await refused(400, 'invalid_argument', () =>
      post(gen.ingest_url, body(), { 'content-type': 'application/json', 'x-switchboard-notify-hook': 'a-hook-id' }),
    );
    expect(r.json).toMatchObject({ field: 'X-Switchboard-Notify-Hook' });
    expect(r.json.error).toMatch(/would loop/);
  });

  it('a 12,000-level nested JSON: 400, nothing stored', async () => {
    const deep = `${'['.repeat(12_000)}${']'.repeat(12_000)}`;
    const { r } = await refused(400, 'invalid_argument', () => github(gh, 'issues', deep, gh.signing_secret!));
    expect(r.json.error).toBe('body: must nest at most 64 levels of arrays and objects');
    const deepObject = `${'{"a":'.repeat(12_000)}1${'}'.repeat(12_000)}`;
    await refused(400, 'invalid_argument', () => post(gen.ingest_url, deepObject, { 'content-type': 'application/json' }));
  });

  it('a body PostgreSQL cannot store (U+0000, valid in JSON): 400, nothing stored', async () => {
    const nul = { ...githubIssueOpened, issue: { ...githubIssueOpened.issue, body: 'pasted from a binary log: a\u0000b' } };
    const { r } = await refused(400, 'invalid_argument', () => github(gh, 'issues', nul, gh.signing_secret!));
    expect(r.json).toMatchObject({ field: 'body', error: expect.stringMatching(/NUL/) });
    // A text body with a NUL byte on a generic webhook.
    await refused(400, 'invalid_argument', () => post(gen.ingest_url, Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0x41]), { 'content-type': 'application/octet-stream' }));
    expect(logged).not.toContain('unhandled error');
  });

  it('a good delivery still goes through after the refusals', async () => {
    const r = await github(gh, 'issues', { ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: 13 } }, gh.signing_secret!);
    expect(r.status).toBe(202);
    expect((await todo(r.json.id)).title).toMatch(/^Issue #13 opened/);
  });
});

describe('limits: refusals per address, valid deliveries per webhook', () => {
  it('valid deliveries are not limited per address: 40 in a row from one address with a frozen clock are accepted', async () => {
    const e = await vend(['alerts']);
    const w = await createWebhook(e.slug, 'generic', 'alerts');
    for (let i = 0; i < 40; i++) {
      const r = await post(w.ingest_url, JSON.stringify({ title: `alert ${i}` }), { 'content-type': 'application/json' });
      expect(r.status, `delivery ${i}`).toBe(202);
    }
  });

  it('refusals spend the address\'s budget: past 20, even a valid delivery from it is 429 before any lookup; time refills it', async () => {
    const e = await vend(['alerts']);
    const w = await createWebhook(e.slug, 'generic', 'alerts');
    for (let i = 0; i < 20; i++) await refused(404, 'not_found', () => post(`${app.url}/webhooks/w/${'0'.repeat(31)}${i % 10}`, '{}', { 'content-type': 'application/json' }));
    const { r } = await refused(429, 'rate_limited', () => post(w.ingest_url, '{"title":"valid, but from a scanner"}', { 'content-type': 'application/json' }));
    expect(r.json.error).toBe('too many refused deliveries from this address');
    expect(r.headers.get('retry-after')).toBe('1');
    app.clock.advance(1000);
    expect((await post(w.ingest_url, '{"title":"later"}', { 'content-type': 'application/json' })).status).toBe(202);
  });

  it('a bad signature counts as a refusal; a duplicate does not', async () => {
    const body = JSON.stringify(githubIssueOpened);
    for (let i = 0; i < 20; i++) await refused(401, 'unauthenticated', () => post(gh.ingest_url, body, githubHeaders('issues', body, 'whsec_wrong')));
    await refused(429, 'rate_limited', () => post(gh.ingest_url, body, githubHeaders('issues', body, gh.signing_secret!)));
    app.clock.advance(5_000);
    const headers = githubHeaders('issues', body, gh.signing_secret!);
    const first = await post(gh.ingest_url, body, headers);
    expect([200, 202, 409]).toContain(first.status);
    for (let i = 0; i < 25; i++) expect((await post(gh.ingest_url, body, headers)).status).not.toBe(429);
  });
});
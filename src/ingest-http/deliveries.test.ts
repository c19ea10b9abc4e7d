import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { apiCaller, humanWithToken } from '../../test/support/app.ts';
import { SecretBox, decodeKey, sealedFor } from '../lib/crypto-box.ts';
import {
  giteaHeaders,
  giteaIssueOpened,
  githubHeaders,
  githubIssueOpened,
  githubPullRequestOpened,
  githubPullRequestReviewRequested,
  githubPush,
  signSha256,
} from '../domain/ingest/fixtures.testkit.ts';
import { INGEST_BODY_LIMIT } from './routes.ts';
import { IDEMPOTENCY_KEY_MAX_BYTES } from '../domain/lifecycle.ts';
import {
  api,
  app,
  counter,
  counts,
  createWebhook,
  db,
  doorbellsFor,
  github,
  KEY,
  listener,
  logged,
  type Minted,
  neverLogged,
  type Notification,
  post,
  refused,
  settle,
  todo,
  tokenOf,
  until,
  useIngestSuite,
  vend,
  type Vended,
  verifyFailures,
} from '../../test/support/ingest.ts';

// Webhook ingestion end to end, in order: creating webhooks, signed deliveries, rotation, the event
// history, tenancy, and what the log never carried.

useIngestSuite();

// ---------------------------------------------------------------------------------------------

let forge: Vended;
let gh: Minted;
let gt: Minted;
let gen: Minted;
let bell: { client: Client; heard: Notification[] };

describe('creating webhooks through the API', () => {
  beforeAll(async () => {
    forge = await vend();
  });

  it('github and gitea: 201 with the ingest URL and a whsec_ secret shown once; trust mode signed', async () => {
    gh = await createWebhook(forge.slug, 'github', 'reviews');
    expect(gh).toMatchObject({
      endpoint_id: forge.id,
      source_type: 'github',
      trust_mode: 'signed',
      target_queue: 'reviews',
      created_by: expect.stringMatching(/^operator:/),
      rotated_at: null,
      last_delivery_at: null,
    });
    expect(gh.ingest_url).toMatch(new RegExp(`^${app.baseUrl}/webhooks/w/[0-9a-f]{32}$`));
    expect(gh.signing_secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(gh.ingest_url_hint).toBe(`${app.baseUrl}/webhooks/w/${tokenOf(gh.ingest_url).slice(0, 6)}…`);

    gt = await createWebhook(forge.slug, 'gitea', 'inbox');
    expect(gt).toMatchObject({ source_type: 'gitea', trust_mode: 'signed', target_queue: 'inbox' });
    expect(gt.signing_secret).toMatch(/^whsec_/);
    expect(gt.signing_secret).not.toBe(gh.signing_secret);
  });

  it('generic: token trust and no secret', async () => {
    gen = await createWebhook(forge.slug, 'generic', 'inbox');
    expect(gen).toMatchObject({ source_type: 'generic', trust_mode: 'token', target_queue: 'inbox' });
    expect(gen).not.toHaveProperty('signing_secret');
  });

  it('trust mode is derived, never settable; bad source types and queues are refused', async () => {
    const before = (await db.sql`select count(*)::int as n from webhooks`)[0]!.n;
    for (const body of [
      { source_type: 'generic', target_queue: 'inbox', trust_mode: 'signed' },
      { source_type: 'github', target_queue: 'inbox', trust_mode: 'token' },
      { source_type: 'github', target_queue: 'inbox', signing_secret: 'whsec_mine' },
      { source_type: 'stripe', target_queue: 'inbox' },
      { source_type: 'github', target_queue: 'elsewhere' },
      { source_type: 'github' }, // two queues: which one must be said
      { target_queue: 'inbox' },
    ]) {
      const r = await api('POST', `/api/v1/endpoints/${forge.slug}/webhooks`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.code).toBe('invalid_argument');
    }
    const refusedTrust = await api('POST', `/api/v1/endpoints/${forge.slug}/webhooks`, { source_type: 'github', target_queue: 'inbox', trust_mode: 'token' });
    expect(refusedTrust.json.error).toMatch(/trust_mode/);
    expect((await db.sql`select count(*)::int as n from webhooks`)[0]!.n).toBe(before);
    // One queue: the target defaults to it.
    const single = await vend(['alerts']);
    const w = await createWebhook(single.slug, 'generic');
    expect(w.target_queue).toBe('alerts');
  });

  it('list shows metadata only: never a secret or a full URL', async () => {
    const r = await api('GET', `/api/v1/endpoints/${forge.slug}/webhooks`);
    expect(r.status).toBe(200);
    // Created at the same (manual) instant, so compare as a set.
    expect(r.json.webhooks.map((w: Minted) => w.webhook_id).sort()).toEqual([gh.webhook_id, gt.webhook_id, gen.webhook_id].sort());
    expect(r.json.webhooks.find((w: Minted) => w.webhook_id === gh.webhook_id)).toMatchObject({ source_type: 'github', trust_mode: 'signed', target_queue: 'reviews', ingest_url_hint: gh.ingest_url_hint });
    for (const w of r.json.webhooks) {
      expect(w).not.toHaveProperty('ingest_url');
      expect(w).not.toHaveProperty('signing_secret');
    }
    for (const m of [gh, gt, gen]) expect(r.text).not.toContain(tokenOf(m.ingest_url));
    expect(r.text).not.toContain('whsec_');
  });

  it('stores the secret sealed (v2:, AES-256-GCM under the configured key, bound to its row) and the ingest token only as a hash', async () => {
    const [row] = await db.sql`select * from webhooks where id = ${gh.webhook_id}`;
    const token = tokenOf(gh.ingest_url);
    expect(row!.signing_secret).toMatch(/^v2:[\w-]+:[\w-]+:[\w-]+$/);
    expect(row!.signing_secret).not.toContain(gh.signing_secret!.slice('whsec_'.length));
    expect(new SecretBox(decodeKey(KEY)).for(sealedFor('webhooks', gh.webhook_id)).open(row!.signing_secret)).toBe(gh.signing_secret);
    expect(() => new SecretBox(randomBytes(32)).for(sealedFor('webhooks', gh.webhook_id)).open(row!.signing_secret)).toThrow();
    expect(row!.ingest_token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    expect(row!.ingest_token_hint).toBe(token.slice(0, 6));
    expect(JSON.stringify(row)).not.toContain(token);
    const [generic] = await db.sql`select signing_secret from webhooks where id = ${gen.webhook_id}`;
    expect(generic!.signing_secret).toBeNull();
  });
});

describe('deliveries', () => {
  beforeAll(async () => {
    bell = await listener(forge);
  });

  let issueTodo = '';
  let issueDelivery = '';

  it('a signed GitHub issues delivery becomes a todo on the target queue and rings the connected agent', async () => {
    const before = await counts();
    const accepted = await counter('switchboard_webhook_deliveries_total', { provider: 'github', trust_mode: 'signed', verdict: 'accepted' });
    issueDelivery = randomUUID();
    const body = JSON.stringify(githubIssueOpened);
    const r = await post(gh.ingest_url, body, githubHeaders('issues', body, gh.signing_secret!, issueDelivery));
    expect(r.status).toBe(202);
    expect(r.json).toEqual({
      todos: [{ id: expect.stringMatching(/^td_/), endpoint_id: forge.id, queue: 'reviews', created: true }],
      created: 1,
      id: r.json.todos[0].id,
      queue: 'reviews',
      trust_mode: 'signed',
      verified: true,
      // No rules: the webhook's target queue, traced as the default.
      routing: { stage: 'default', rule_index: null, rule_name: null, action: 'queue', queue: 'reviews' },
      event_id: expect.stringMatching(/^\d+$/),
    });
    issueTodo = r.json.id;
    expect(await counts()).toEqual({ todos: before.todos + 1, events: before.events + 1 });

    const t = await todo(issueTodo);
    expect(t).toMatchObject({
      endpoint_id: forge.id,
      queue: 'reviews',
      state: 'pending',
      source: 'github',
      kind: 'issues',
      title: 'Issue #12 opened in octo/repo: Doorbell rings twice after a redelivery',
    });
    expect(t.payload).toEqual(githubIssueOpened);

    await until(() => doorbellsFor(bell.heard, issueTodo).length === 1, 'the doorbell');
    const n = doorbellsFor(bell.heard, issueTodo)[0]!;
    expect(n.method).toBe('notifications/claude/channel');
    expect(n.params.meta).toMatchObject({ todo_id: issueTodo, queue: 'reviews', todo_kind: 'issues' });
    expect(n.params.content).toContain('Issue #12 opened in octo/repo');
    await settle(); // the creation's own todo_ready echo is gated: still one doorbell
    expect(doorbellsFor(bell.heard, issueTodo)).toHaveLength(1);

    expect(await counter('switchboard_webhook_deliveries_total', { provider: 'github', trust_mode: 'signed', verdict: 'accepted' })).toBe(accepted + 1);
    const [w] = await db.sql`select last_delivery_at from webhooks where id = ${gh.webhook_id}`;
    expect(w!.last_delivery_at).toEqual(app.clock.now());
  });

  it('stores the event with the raw body, the delivery id, and its signature headers redacted', async () => {
    const [ev] = await db.sql`
      select ev.* from events ev join todos t on t.event_id = ev.id where t.id = ${issueTodo}`;
    expect(ev).toMatchObject({
      source: 'github',
      family: 'webhook',
      event_type: 'issues',
      external_id: issueDelivery,
      trust_mode: 'signed',
      verified: true,
      verify_detail: 'hmac-sha256 ok',
      content_type: 'application/json',
      webhook_id: gh.webhook_id,
      endpoint_id: forge.id,
      disposition: 'routed',
      routing: { stage: 'default', rule_index: null, rule_name: null, action: 'queue', queue: 'reviews' },
    });
    expect(Buffer.from(ev!.payload).toString()).toBe(JSON.stringify(githubIssueOpened));
    expect(ev!.payload_size).toBe(Buffer.byteLength(JSON.stringify(githubIssueOpened)));
    expect(ev!.headers).toMatchObject({
      'x-hub-signature-256': '«redacted»',
      'x-hub-signature': '«redacted»',
      'x-github-event': 'issues',
      'x-github-delivery': issueDelivery,
      'user-agent': 'GitHub-Hookshot/8e5a9c1',
    });
    expect(JSON.stringify(ev!.headers)).not.toMatch(/sha(1|256)=/);
    expect(JSON.stringify(ev!.headers)).not.toContain(signSha256(gh.signing_secret!, JSON.stringify(githubIssueOpened)));
  });

  it('a redelivery (same X-GitHub-Delivery) answers created: 0 with the same id, stores nothing and rings nothing', async () => {
    const before = await counts();
    const r = await github(gh, 'issues', githubIssueOpened, gh.signing_secret!, issueDelivery);
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ created: 0, id: issueTodo, todos: [{ id: issueTodo, created: false }], trust_mode: 'signed', verified: true });
    expect(await counts()).toEqual(before);
    await settle();
    expect(doorbellsFor(bell.heard, issueTodo)).toHaveLength(1);
  });

  it('pull_request opened and review_requested get their titles', async () => {
    const opened = await github(gh, 'pull_request', githubPullRequestOpened, gh.signing_secret!);
    expect(opened.status).toBe(202);
    expect((await todo(opened.json.id)).title).toBe('PR #42 opened in octo/repo: Add a retry budget to the doorbell');
    const requested = await github(gh, 'pull_request', githubPullRequestReviewRequested, gh.signing_secret!);
    expect(requested.status).toBe(202);
    expect(requested.json.id).not.toBe(opened.json.id);
    const t = await todo(requested.json.id);
    expect(t.title).toBe('Review requested from hubot on PR #42 in octo/repo: Add a retry budget to the doorbell');
    expect(t.payload.requested_reviewer.login).toBe('hubot');
    await until(() => doorbellsFor(bell.heard, requested.json.id).length === 1, 'the review doorbell');
  });

  it('an event with no readable title falls back to "<event> on <repo>", payload intact', async () => {
    const star = { action: 'created', starred_at: '2026-01-05T09:20:00Z', repository: { full_name: 'octo/repo' }, sender: { login: 'hubot' } };
    const r = await github(gh, 'star', star, gh.signing_secret!);
    expect(r.status).toBe(202);
    expect(await todo(r.json.id)).toMatchObject({ title: 'star on octo/repo', payload: star, kind: 'star' });
  });

  it('a Gitea delivery verifies X-Gitea-Signature (bare hex) and lands on its queue', async () => {
    const delivery = randomUUID();
    const body = JSON.stringify(giteaIssueOpened);
    const r = await post(gt.ingest_url, body, giteaHeaders('issues', body, gt.signing_secret!, delivery));
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ created: 1, queue: 'inbox', trust_mode: 'signed', verified: true });
    expect(await todo(r.json.id)).toMatchObject({ queue: 'inbox', source: 'gitea', title: 'Issue #7 opened in team/app: Login page 500s on an empty password' });
    const [ev] = await db.sql`select external_id, headers from events where id = ${(await todo(r.json.id)).event_id}`;
    expect(ev!.external_id).toBe(delivery);
    expect(ev!.headers['x-gitea-signature']).toBe('«redacted»');
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the gitea doorbell');

    const wrong = await post(gt.ingest_url, body, giteaHeaders('issues', body, gh.signing_secret!));
    expect(wrong.status).toBe(401);
    expect(await verifyFailures('gitea', 'bad_signature')).toBe(1);
  });

  it('a generic webhook (token trust) creates a push-eligible todo with verified: false', async () => {
    const body = JSON.stringify({ title: 'Nightly build failed', build: 981, url: 'https://ci.example.com/builds/981' });
    const r = await post(gen.ingest_url, body, { 'content-type': 'application/json', 'x-event-type': 'build.failed', 'x-delivery-id': 'build-981' });
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ created: 1, queue: 'inbox', trust_mode: 'token', verified: false });
    const t = await todo(r.json.id);
    expect(t).toMatchObject({ title: 'Nightly build failed', kind: 'build.failed', source: 'generic', payload: { build: 981 } });
    const [ev] = await db.sql`select verified, trust_mode, verify_detail, external_id from events where id = ${t.event_id}`;
    expect(ev).toMatchObject({ verified: false, trust_mode: 'token', external_id: 'build-981', verify_detail: expect.stringMatching(/^token ok/) });
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the generic doorbell');

    // Same X-Delivery-Id: the same todo.
    const again = await post(gen.ingest_url, body, { 'content-type': 'application/json', 'x-delivery-id': 'build-981' });
    expect(again.json).toMatchObject({ created: 0, id: r.json.id });
  });

  it('a delivery id that makes the key exceed the key cap still becomes a todo (keyed by its hash) and still dedups', async () => {
    // 250 bytes is a valid delivery id, but "<webhook id>:<delivery id>" is then over the 256-byte key cap.
    const delivery = `build-${'7'.repeat(244)}`;
    const body = JSON.stringify({ title: 'Long delivery id', build: 982 });
    const headers = { 'content-type': 'application/json', 'x-delivery-id': delivery };
    const r = await post(gen.ingest_url, body, headers);
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ created: 1, queue: 'inbox' });
    const [t] = await db.sql<{ idempotency_key: string; event_id: string }[]>`select idempotency_key, event_id from todos where id = ${r.json.id}`;
    expect(Buffer.byteLength(t!.idempotency_key)).toBeLessThanOrEqual(IDEMPOTENCY_KEY_MAX_BYTES);
    expect(t!.idempotency_key).toBe(`${gen.webhook_id}:sha256:${createHash('sha256').update(delivery).digest('hex')}`);
    const [ev] = await db.sql`select external_id from events where id = ${t!.event_id}`;
    expect(ev!.external_id).toBe(delivery);
    const again = await post(gen.ingest_url, body, headers);
    expect(again.json).toMatchObject({ created: 0, id: r.json.id });
  });

  it('generic: without a delivery id the body hash dedups', async () => {
    const before = await counts();
    const body = '{"title":"disk 93% full on db-1"}';
    const first = await post(gen.ingest_url, body, { 'content-type': 'application/json' });
    expect(first.status).toBe(202);
    expect(await todo(first.json.id)).toMatchObject({ title: 'disk 93% full on db-1', payload: { title: 'disk 93% full on db-1' } });
    const second = await post(gen.ingest_url, body, { 'content-type': 'application/json' });
    expect(second.json).toMatchObject({ created: 0, id: first.json.id });
    const [ev] = await db.sql`select external_id from events where id = ${(await todo(first.json.id)).event_id}`;
    expect(ev!.external_id).toBe(`sha256:${createHash('sha256').update(body).digest('hex')}`);
    expect(await counts()).toEqual({ todos: before.todos + 1, events: before.events + 1 });
  });

  it('a body of exactly 5 MiB is accepted', async () => {
    const base = JSON.stringify({ ...githubPush, pad: '' });
    const body = JSON.stringify({ ...githubPush, pad: 'x'.repeat(INGEST_BODY_LIMIT - base.length) });
    expect(Buffer.byteLength(body)).toBe(INGEST_BODY_LIMIT);
    const r = await github(gh, 'push', body, gh.signing_secret!);
    expect(r.status).toBe(202);
    expect((await todo(r.json.id)).title).toBe('Push to main in octo/repo (2 commits)');
  });
});

describe('rotate and delete', () => {
  it('rotating: the old URL is gone, the old secret fails on the new URL, the new secret verifies', async () => {
    const w = await createWebhook(forge.slug, 'github', 'reviews');
    const before = (await db.sql`select ingest_token_hash, signing_secret from webhooks where id = ${w.webhook_id}`)[0]!;
    expect((await github(w, 'issues', githubIssueOpened, w.signing_secret!)).status).toBe(202);

    const r = await api('POST', `/api/v1/webhooks/${w.webhook_id}/rotate`);
    expect(r.status).toBe(200);
    const rotated = r.json as Minted;
    neverLogged.add(tokenOf(rotated.ingest_url)).add(rotated.signing_secret!);
    expect(rotated).toMatchObject({ webhook_id: w.webhook_id, source_type: 'github', trust_mode: 'signed', target_queue: 'reviews', rotated_at: expect.any(String) });
    expect(rotated.ingest_url).not.toBe(w.ingest_url);
    expect(rotated.signing_secret).toMatch(/^whsec_/);
    expect(rotated.signing_secret).not.toBe(w.signing_secret);
    const after = (await db.sql`select ingest_token_hash, signing_secret from webhooks where id = ${w.webhook_id}`)[0]!;
    expect(after.ingest_token_hash).not.toBe(before.ingest_token_hash);
    expect(after.signing_secret).toMatch(/^v2:/);
    expect(after.signing_secret).not.toBe(before.signing_secret);

    await refused(404, 'not_found', () => github(w, 'issues', githubPush, w.signing_secret!));
    await refused(404, 'not_found', () => github(w, 'issues', githubPush, rotated.signing_secret!));
    await refused(401, 'unauthenticated', () => github(rotated, 'push', githubPush, w.signing_secret!));
    const ok = await github(rotated, 'push', githubPush, rotated.signing_secret!);
    expect(ok.status).toBe(202);
    expect(ok.json).toMatchObject({ created: 1, verified: true, queue: 'reviews' });
  });

  it('opens the signing secret once while the webhook is unchanged, not on every delivery', async () => {
    const w = await createWebhook(forge.slug, 'github', 'reviews');
    const [{ signing_secret: stored }] = (await db.sql`select signing_secret from webhooks where id = ${w.webhook_id}`) as unknown as [{ signing_secret: string }];
    // The spy calls through, so leaving it on would change nothing for later tests; it is restored anyway.
    const opens = vi.spyOn(SecretBox.prototype, 'open');
    for (const [event, body] of [['issues', githubIssueOpened], ['push', githubPush], ['pull_request', githubPullRequestOpened]] as const) {
      expect((await github(w, event, body, w.signing_secret!)).status).toBe(202);
    }
    const decrypted = opens.mock.calls.filter(([sealed]) => sealed === stored).length;
    opens.mockRestore();
    expect(decrypted).toBe(1);
  });

  it('rotating a generic webhook mints a new URL and still no secret', async () => {
    const w = await createWebhook(forge.slug, 'generic', 'inbox');
    const r = await api('POST', `/api/v1/webhooks/${w.webhook_id}/rotate`);
    neverLogged.add(tokenOf(r.json.ingest_url));
    expect(r.json).not.toHaveProperty('signing_secret');
    await refused(404, 'not_found', () => post(w.ingest_url, '{}', { 'content-type': 'application/json' }));
    expect((await post(r.json.ingest_url, '{"title":"after rotate"}', { 'content-type': 'application/json' })).status).toBe(202);
  });

  it('deleting: the URL answers 404, the list drops it, the history keeps the delivery', async () => {
    const w = await createWebhook(forge.slug, 'github', 'reviews');
    const delivered = await github(w, 'release', { action: 'published', release: { tag_name: 'v9.9.9' }, repository: { full_name: 'octo/repo' } }, w.signing_secret!);
    expect(delivered.status).toBe(202);
    const r = await api('DELETE', `/api/v1/webhooks/${w.webhook_id}`);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ webhook_id: w.webhook_id, deleted: true });
    await refused(404, 'not_found', () => github(w, 'issues', githubIssueOpened, w.signing_secret!));
    expect((await api('GET', `/api/v1/endpoints/${forge.slug}/webhooks`)).json.webhooks.map((x: Minted) => x.webhook_id)).not.toContain(w.webhook_id);
    expect((await api('DELETE', `/api/v1/webhooks/${w.webhook_id}`)).status).toBe(404);
    expect((await api('POST', `/api/v1/webhooks/${w.webhook_id}/rotate`)).status).toBe(404);
    const events = (await api('GET', `/api/v1/events?endpoint=${forge.slug}&limit=200`)).json.events;
    expect(events.find((e: { todo_id: string }) => e.todo_id === delivered.json.id)).toMatchObject({ event_type: 'release', webhook_id: null });
  });
});

describe('GET /api/v1/events', () => {
  it("shows the endpoint's deliveries newest first: sanitized headers, verified flag, todo id, no payload", async () => {
    const delivery = randomUUID();
    const d = await github(gh, 'issues', { ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: 14 } }, gh.signing_secret!, delivery);
    expect(d.status).toBe(202);
    const r = await api('GET', `/api/v1/events?endpoint=${forge.slug}`);
    expect(r.status).toBe(200);
    const [newest] = r.json.events;
    expect(newest).toMatchObject({
      source: 'github',
      event_type: 'issues',
      external_id: delivery,
      trust_mode: 'signed',
      verified: true,
      verify_detail: 'hmac-sha256 ok',
      content_type: 'application/json',
      webhook_id: gh.webhook_id,
      todo_id: d.json.id,
      disposition: 'routed',
      received_at: app.clock.now().toISOString().replace('.000Z', 'Z'),
    });
    expect(newest.headers).toMatchObject({ 'x-hub-signature-256': '«redacted»', 'x-github-event': 'issues', 'x-github-delivery': delivery });
    expect(newest).not.toHaveProperty('payload');
    expect(newest.payload_size).toBeGreaterThan(0);
    expect(r.text).not.toMatch(/sha256=[0-9a-f]{64}|whsec_/);
    expect(r.json.events.some((e: { verified: boolean; trust_mode: string }) => !e.verified && e.trust_mode === 'token')).toBe(true);
    expect((await api('GET', `/api/v1/events?endpoint=${forge.id}&limit=1`)).json.events).toHaveLength(1);
    expect((await api('GET', '/api/v1/events')).status).toBe(400);
    expect((await api('GET', `/api/v1/events?endpoint=${forge.slug}&limit=0`)).status).toBe(400);
  });
});

describe('tenancy', () => {
  it("a foreign human gets 404 for another's endpoint's webhooks, events, rotate and delete", async () => {
    const stranger = apiCaller(app.url, (await humanWithToken(db.sql)).token);
    const before = (await db.sql`select ingest_token_hash, signing_secret from webhooks where id = ${gh.webhook_id}`)[0]!;
    for (const [method, path, body] of [
      ['GET', `/api/v1/endpoints/${forge.slug}/webhooks`],
      ['POST', `/api/v1/endpoints/${forge.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' }],
      ['GET', `/api/v1/events?endpoint=${forge.slug}`],
      ['GET', `/api/v1/events?endpoint=${forge.id}`],
      ['POST', `/api/v1/webhooks/${gh.webhook_id}/rotate`],
      ['DELETE', `/api/v1/webhooks/${gh.webhook_id}`],
    ] as const) {
      const r = await stranger(method, path, body);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.json.code).toBe('not_found');
    }
    const after = (await db.sql`select ingest_token_hash, signing_secret from webhooks where id = ${gh.webhook_id}`)[0]!;
    expect(after).toEqual(before);
    expect((await github(gh, 'issues', { ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: 15 } }, gh.signing_secret!)).status).toBe(202);
  });
});

describe('logs', () => {
  it('never carried a signing secret, an ingest token or a full signature', () => {
    expect(logged).toContain('webhook delivery');
    expect(logged).toContain('webhook signature refused');
    expect(neverLogged.size).toBeGreaterThan(20);
    for (const s of neverLogged) expect(logged).not.toContain(s);
    expect(logged).not.toMatch(/whsec_/);
  });
});
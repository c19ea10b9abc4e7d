import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { App } from '../app.ts';
import { main } from '../cli/main.ts';
import { ManualClock } from '../lib/clock.ts';
import { SecretBox, decodeKey } from '../lib/crypto-box.ts';
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
import { createLogger } from '../lib/log.ts';
import { INGEST_BODY_LIMIT } from './routes.ts';
import { IDEMPOTENCY_KEY_MAX_BYTES } from '../domain/lifecycle.ts';

/**
 * Webhook ingestion end to end: a real server and PostgreSQL, deliveries signed in the test
 * exactly as GitHub and Gitea document it, the doorbell heard by the MCP SDK's own Client.
 */

type Notification = { method: string; params: { content: string; meta: Record<string, string> } };

const KEY = randomBytes(32).toString('hex');
let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: App & { clock: ManualClock };
let api: ReturnType<typeof apiCaller>;
let ownerToken = '';
let logged = '';
const clients: Client[] = [];
/** Every signing secret, ingest token and full signature the test saw: none may ever be logged. */
const neverLogged = new Set<string>();

/** A debug-level logger whose lines go to `sink`. */
const capture = (sink: (text: string) => void) => createLogger('debug', new Writable({ write: (c, _e, done) => void (sink(c.toString()), done()) }));

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock(), { env: { SWITCHBOARD_SECRET_ENCRYPTION_KEY: KEY }, log: capture((t) => void (logged += t)) });
  ownerToken = (await humanWithToken(db.sql)).token;
  api = apiCaller(app.url, ownerToken);
});
// Refills the per-IP ingest bucket (20 at 10/s) and the API buckets between tests; stays well under
// the doorbell's 60 s creation gate, so a creation's own todo_ready echo is still absorbed.
beforeEach(() => void app.clock.advance(5_000));
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app.stop();
  await db.drop();
});

// ---------------------------------------------------------------------------------------------
// Helpers

interface Vended {
  id: string;
  slug: string;
  token: string;
  mcp_url: string;
}

interface Minted {
  webhook_id: string;
  endpoint_id: string;
  source_type: string;
  trust_mode: string;
  target_queue: string;
  ingest_url: string;
  ingest_url_hint: string;
  signing_secret?: string;
}

async function vend(queues = ['reviews', 'inbox'], extra: Record<string, unknown> = {}, via = api): Promise<Vended> {
  const r = await via('POST', '/api/v1/endpoints', { name: 'forge-bot', queues, ...extra });
  expect(r.status).toBe(201);
  return r.json;
}

async function createWebhook(slug: string, source: string, queue?: string): Promise<Minted> {
  const r = await api('POST', `/api/v1/endpoints/${slug}/webhooks`, { source_type: source, ...(queue ? { target_queue: queue } : {}) });
  expect(r.status).toBe(201);
  const m = r.json as Minted;
  neverLogged.add(tokenOf(m.ingest_url));
  if (m.signing_secret) neverLogged.add(m.signing_secret);
  return m;
}

const tokenOf = (url: string) => url.split('/').pop()!;

interface Response {
  status: number;
  json: any;
  text: string;
  headers: Headers;
}

async function post(url: string, body: string | Buffer, headers: Record<string, string>): Promise<Response> {
  for (const [k, v] of Object.entries(headers)) if (/signature/.test(k)) neverLogged.add(v.replace(/^sha(1|256)=/, ''));
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** A GitHub delivery of `event`, signed with `secret` (the body is the JSON of `payload` unless a string). */
function github(w: { ingest_url: string }, event: string, payload: unknown, secret: string, delivery: string = randomUUID()) {
  const body = typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : JSON.stringify(payload);
  return post(w.ingest_url, body, githubHeaders(event, body, secret, delivery));
}

async function counts(): Promise<{ todos: number; events: number }> {
  const [row] = await db.sql<{ todos: number; events: number }[]>`
    select (select count(*) from todos)::int as todos, (select count(*) from events)::int as events`;
  return row!;
}

async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const metric = await app.metrics.registry.getSingleMetric(name)!.get();
  return metric.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? 0;
}
const verifyFailures = (provider: string, reason: string) => counter('switchboard_webhook_verify_failures_total', { provider, reason });

async function todo(id: string) {
  const [row] = await db.sql<{ id: string; title: string; queue: string; endpoint_id: string; payload: any; state: string; source: string; kind: string; event_id: string }[]>`
    select id, title, queue, endpoint_id, payload, state, source, kind, event_id::text as event_id from todos where id = ${id}`;
  return row!;
}

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
const settle = () => new Promise((r) => setTimeout(r, 150));

async function connect(e: Vended): Promise<Client> {
  const client = new Client({ name: 'claude-code', version: '2.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), {
    requestInit: { headers: { Authorization: `Bearer ${e.token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** An SDK client whose doorbells land in `heard`; resolves once its stream is open. */
async function listener(e: Vended): Promise<{ client: Client; heard: Notification[] }> {
  const heard: Notification[] = [];
  const client = new Client({ name: 'claude-code', version: '2.1.0' });
  client.fallbackNotificationHandler = async (n) => void heard.push(n as unknown as Notification);
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), {
    requestInit: { headers: { Authorization: `Bearer ${e.token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  const sessionId = transport.sessionId!;
  await until(() => app.sessions.all().some((s) => s.id === sessionId && s.stream !== null), 'the stream to open');
  return { client, heard };
}

/** Calls a tool; the parsed JSON result, or `{error: "<code>: <message>"}` for a tool error. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const r = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
  const text = r.content[0]!.text;
  return r.isError ? { error: text } : JSON.parse(text);
}

const doorbellsFor = (heard: Notification[], todoId: string) => heard.filter((n) => n.params.meta.todo_id === todoId);

/**
 * Runs one refused delivery: asserts the status and code, that no todo or event was stored, that
 * nothing secret reached the log, and returns the response and the log lines it produced.
 */
async function refused(status: number, code: string, deliver: () => Promise<Response>): Promise<{ r: Response; lines: string }> {
  const before = await counts();
  const mark = logged.length;
  const r = await deliver();
  expect(r.status).toBe(status);
  expect(r.json).toMatchObject({ code });
  expect(await counts()).toEqual(before);
  const lines = logged.slice(mark);
  for (const s of neverLogged) expect(lines).not.toContain(s);
  return { r, lines };
}

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

  it('stores the secret sealed (v1:, AES-256-GCM under the configured key) and the ingest token only as a hash', async () => {
    const [row] = await db.sql`select * from webhooks where id = ${gh.webhook_id}`;
    const token = tokenOf(gh.ingest_url);
    expect(row!.signing_secret).toMatch(/^v1:[\w-]+:[\w-]+:[\w-]+$/);
    expect(row!.signing_secret).not.toContain(gh.signing_secret!.slice('whsec_'.length));
    expect(new SecretBox(decodeKey(KEY)).open(row!.signing_secret)).toBe(gh.signing_secret);
    expect(() => new SecretBox(randomBytes(32)).open(row!.signing_secret)).toThrow();
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
    const ping = { zen: 'Keep it logically awesome.', hook_id: 512345678, hook: { type: 'Repository', events: ['issues'] }, repository: { full_name: 'octo/repo' } };
    const r = await github(gh, 'ping', ping, gh.signing_secret!);
    expect(r.status).toBe(202);
    expect(await todo(r.json.id)).toMatchObject({ title: 'ping on octo/repo', payload: ping, kind: 'ping' });
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

  it('generic: a non-JSON body is kept as text, and without a delivery id the body hash dedups', async () => {
    const before = await counts();
    const first = await post(gen.ingest_url, 'disk 93% full on db-1', { 'content-type': 'text/plain' });
    expect(first.status).toBe(202);
    expect(await todo(first.json.id)).toMatchObject({ title: 'webhook delivery', payload: { body: 'disk 93% full on db-1' } });
    const second = await post(gen.ingest_url, 'disk 93% full on db-1', { 'content-type': 'text/plain' });
    expect(second.json).toMatchObject({ created: 0, id: first.json.id });
    const [ev] = await db.sql`select external_id from events where id = ${(await todo(first.json.id)).event_id}`;
    expect(ev!.external_id).toBe(`sha256:${createHash('sha256').update('disk 93% full on db-1').digest('hex')}`);
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
    expect(await app.metrics.registry.getSingleMetricAsString('switchboard_webhook_verify_failures_total')).toMatch(
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

  it('a non-JSON body on github: 400 invalid_argument, but only after the signature verified', async () => {
    const form = `payload=${encodeURIComponent(body())}`;
    const formHeaders = { ...githubHeaders('issues', form, gh.signing_secret!), 'content-type': 'application/x-www-form-urlencoded' };
    const { r } = await refused(400, 'invalid_argument', () => post(gh.ingest_url, form, formHeaders));
    expect(r.json).toMatchObject({ field: 'body', error: 'body: is not valid JSON' });
    await refused(400, 'invalid_argument', () => github(gh, 'issues', '{"action": "opened",', gh.signing_secret!));
    await refused(400, 'invalid_argument', () => github(gh, 'issues', '', gh.signing_secret!));
    // Unverified, the same body is a 401: nothing is parsed before the signature checks out.
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, form, { ...formHeaders, 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` }));
  });

  it('an unknown token: 404, nothing counted as a verify failure', async () => {
    const failures = await app.metrics.registry.getSingleMetricAsString('switchboard_webhook_verify_failures_total');
    const unknown = `${app.url}/webhooks/w/${randomBytes(16).toString('hex')}`;
    const { r } = await refused(404, 'not_found', () => post(unknown, body(), githubHeaders('issues', body(), gh.signing_secret!)));
    expect(r.json.error).toBe('unknown webhook');
    await refused(404, 'not_found', () => post(`${app.url}/webhooks/w/`, body(), githubHeaders('issues', body(), gh.signing_secret!)));
    expect(await app.metrics.registry.getSingleMetricAsString('switchboard_webhook_verify_failures_total')).toBe(failures);
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

  it('a 12,000-level nested JSON: 400, nothing stored', async () => {
    const deep = `${'['.repeat(12_000)}${']'.repeat(12_000)}`;
    const { r } = await refused(400, 'invalid_argument', () => github(gh, 'issues', deep, gh.signing_secret!));
    expect(r.json.error).toMatch(/nests too deeply/);
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
    expect(after.signing_secret).toMatch(/^v1:/);
    expect(after.signing_secret).not.toBe(before.signing_secret);

    await refused(404, 'not_found', () => github(w, 'issues', githubPush, w.signing_secret!));
    await refused(404, 'not_found', () => github(w, 'issues', githubPush, rotated.signing_secret!));
    await refused(401, 'unauthenticated', () => github(rotated, 'push', githubPush, w.signing_secret!));
    const ok = await github(rotated, 'push', githubPush, rotated.signing_secret!);
    expect(ok.status).toBe(202);
    expect(ok.json).toMatchObject({ created: 1, verified: true, queue: 'reviews' });
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

describe('agent verbs', () => {
  const WEBHOOK_VERBS = ['create_webhook', 'list_webhooks', 'rotate_webhook', 'delete_webhook'];

  it('are granted only when vended with them', async () => {
    const plain = await connect(await vend());
    expect((await plain.listTools()).tools.map((t) => t.name)).not.toContain('create_webhook');
    expect(await call(plain, 'create_webhook', { source_type: 'generic', target_queue: 'inbox' })).toEqual({ error: expect.stringMatching(/^forbidden: /) });
  });

  it('create_webhook within the ceiling (default 1) and the scope; list, rotate and delete their own only', async () => {
    const e = await vend(['reviews', 'inbox'], { verbs: ['list_todos', 'claim', 'claim_next', ...WEBHOOK_VERBS] });
    const agent = await connect(e);
    expect((await agent.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(WEBHOOK_VERBS));

    const outside = await call(agent, 'create_webhook', { source_type: 'github', target_queue: 'payments' });
    expect(outside).toEqual({ error: expect.stringMatching(/^forbidden: target_queue/) });
    expect(await call(agent, 'create_webhook', { source_type: 'github', target_queue: 'reviews', trust_mode: 'token' })).toEqual({
      error: expect.stringMatching(/^invalid_argument: /),
    });
    expect(await call(agent, 'create_webhook', { source_type: 'stripe', target_queue: 'reviews' })).toEqual({
      error: expect.stringMatching(/^invalid_argument: /),
    });

    const created = await call(agent, 'create_webhook', { source_type: 'github', target_queue: 'reviews' });
    neverLogged.add(tokenOf(created.ingest_url)).add(created.signing_secret);
    expect(created).toMatchObject({ source_type: 'github', trust_mode: 'signed', target_queue: 'reviews', created_by: 'agent' });
    expect(created.signing_secret).toMatch(/^whsec_/);
    const delivered = await github(created, 'pull_request', githubPullRequestOpened, created.signing_secret);
    expect(delivered.status).toBe(202);
    expect(delivered.json.todos[0]).toMatchObject({ endpoint_id: e.id, queue: 'reviews', created: true });

    const second = await call(agent, 'create_webhook', { source_type: 'generic', target_queue: 'inbox' });
    expect(second).toEqual({ error: expect.stringMatching(/^forbidden: .*limit/) });
    expect((await db.sql`select count(*)::int as n from webhooks where endpoint_id = ${e.id}`)[0]!.n).toBe(1);

    const listed = await call(agent, 'list_webhooks');
    expect(listed.ceiling).toEqual({ max: 1, used: 1, queues: ['reviews', 'inbox'] });
    expect(listed.webhooks).toHaveLength(1);
    expect(listed.webhooks[0]).toMatchObject({ webhook_id: created.webhook_id, source_type: 'github' });
    expect(JSON.stringify(listed)).not.toContain(created.signing_secret);
    expect(JSON.stringify(listed)).not.toContain(tokenOf(created.ingest_url));

    // Another endpoint's webhook answers like a missing one.
    expect(await call(agent, 'rotate_webhook', { webhook_id: gh.webhook_id })).toEqual({ error: expect.stringMatching(/^not_found: /) });
    expect(await call(agent, 'delete_webhook', { webhook_id: gh.webhook_id })).toEqual({ error: expect.stringMatching(/^not_found: /) });
    expect(await call(agent, 'delete_webhook', { webhook_id: 'not-a-uuid' })).toEqual({ error: expect.stringMatching(/^invalid_argument: /) });
    expect((await db.sql`select count(*)::int as n from webhooks where id = ${gh.webhook_id}`)[0]!.n).toBe(1);

    const rotated = await call(agent, 'rotate_webhook', { webhook_id: created.webhook_id });
    neverLogged.add(tokenOf(rotated.ingest_url)).add(rotated.signing_secret);
    expect(rotated.signing_secret).not.toBe(created.signing_secret);
    expect((await github(created, 'issues', githubIssueOpened, created.signing_secret)).status).toBe(404);
    expect((await github(rotated, 'issues', githubIssueOpened, created.signing_secret)).status).toBe(401);
    expect((await github(rotated, 'issues', githubIssueOpened, rotated.signing_secret)).status).toBe(202);

    expect(await call(agent, 'delete_webhook', { webhook_id: created.webhook_id })).toEqual({ webhook_id: created.webhook_id, deleted: true });
    expect((await github(rotated, 'issues', githubIssueOpened, rotated.signing_secret)).status).toBe(404);
    expect((await call(agent, 'list_webhooks')).ceiling).toMatchObject({ max: 1, used: 0 });
    // The slot is free again.
    const again = await call(agent, 'create_webhook', { source_type: 'generic', target_queue: 'inbox' });
    neverLogged.add(tokenOf(again.ingest_url));
    expect(again).toMatchObject({ trust_mode: 'token' });
  });
});

describe('per-IP limit', () => {
  it('over 20 deliveries with a frozen clock: 429 with Retry-After, nothing stored; time refills it', async () => {
    const e = await vend(['alerts']);
    const w = await createWebhook(e.slug, 'generic', 'alerts');
    for (let i = 0; i < 20; i++) {
      const r = await post(w.ingest_url, JSON.stringify({ title: `alert ${i}` }), { 'content-type': 'application/json' });
      expect(r.status, `delivery ${i}`).toBe(202);
    }
    const { r } = await refused(429, 'rate_limited', () => post(w.ingest_url, '{"title":"one too many"}', { 'content-type': 'application/json' }));
    expect(r.headers.get('retry-after')).toBe('1');
    // The bucket is per address, before the token is even looked up.
    await refused(429, 'rate_limited', () => post(`${app.url}/webhooks/w/${'0'.repeat(32)}`, '{}', { 'content-type': 'application/json' }));
    app.clock.advance(1000);
    expect((await post(w.ingest_url, '{"title":"later"}', { 'content-type': 'application/json' })).status).toBe(202);
  });
});

describe('without SWITCHBOARD_SECRET_ENCRYPTION_KEY', () => {
  it('stores new secrets as plain:, warns at startup, and answers 503 for a secret sealed under a key it lacks', async () => {
    let plainLog = '';
    const plain = await startTestApp(db.url, new ManualClock('2026-02-01T00:00:00Z'), { log: capture((t) => void (plainLog += t)) });
    try {
      // Signed webhooks exist (sealed by the keyed instance): the startup warning names the fix.
      expect(plainLog).toContain('webhook signing secrets are stored unencrypted');
      const e = await vend(['reviews']);
      const w = await apiCaller(plain.url, ownerToken)('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github' });
      expect(w.status).toBe(201);
      neverLogged.add(tokenOf(w.json.ingest_url)).add(w.json.signing_secret);
      expect(w.json.ingest_url.startsWith(`${plain.url}/webhooks/w/`)).toBe(true);
      const [row] = await db.sql`select signing_secret from webhooks where id = ${w.json.webhook_id}`;
      expect(row!.signing_secret).toBe(`plain:${w.json.signing_secret}`);

      expect((await github(w.json, 'issues', githubIssueOpened, w.json.signing_secret)).status).toBe(202);
      // The keyed instance reads plain: secrets too.
      const onKeyed = await github({ ingest_url: w.json.ingest_url.replace(plain.url, app.url) }, 'push', githubPush, w.json.signing_secret);
      expect(onKeyed.status).toBe(202);

      // A secret sealed under a key this instance does not have is as good as absent: 503, not a 500.
      const mark = plainLog.length;
      const before = await counts();
      const sealed = await github({ ingest_url: gh.ingest_url.replace(app.url, plain.url) }, 'issues', githubIssueOpened, gh.signing_secret!);
      expect(sealed.status).toBe(503);
      expect(sealed.json).toMatchObject({ code: 'unavailable', error: expect.stringMatching(/webhook not configured/) });
      expect(await counts()).toEqual(before);
      const lines = plainLog.slice(mark);
      expect(lines).not.toContain('unhandled error');
      expect(lines).toContain('SWITCHBOARD_SECRET_ENCRYPTION_KEY');
    } finally {
      await plain.stop();
    }
    for (const s of neverLogged) expect(plainLog).not.toContain(s);
  });
});

describe('switchboard webhook / events CLI', () => {
  it('webhook create prints the URL and secret once; list and events list show the delivery, never the secret', async () => {
    const home = await mkdtemp(join(tmpdir(), 'sbwh-'));
    const owner = await humanWithToken(db.sql);
    const env = { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: owner.token };
    const run = async (...args: string[]) => {
      let out = '';
      let err = '';
      const code = await main(['node', 'switchboard', ...args], {
        io: { out: (t) => void (out += t), err: (t) => void (err += t) },
        env,
        readStdin: async () => '',
        stdinIsTty: false,
      });
      return { code, out, err };
    };
    const e = await vend(['reviews', 'inbox'], {}, apiCaller(app.url, owner.token));

    const created = await run('webhook', 'create', e.slug, '--source', 'github', '--queue', 'reviews');
    expect(created).toMatchObject({ code: 0, err: '' });
    const id = /Created github webhook ([0-9a-f-]{36}) → queue reviews \(signed\)\./.exec(created.out)![1]!;
    const url = /Ingest URL {6}(\S+)/.exec(created.out)![1]!;
    const secret = /Signing secret {2}(whsec_\S+)/.exec(created.out)![1]!;
    neverLogged.add(tokenOf(url)).add(secret);
    expect(url.startsWith(`${app.baseUrl}/webhooks/w/`)).toBe(true);
    expect(created.out).toContain('Shown once');

    const delivery = randomUUID();
    const d = await github({ ingest_url: url }, 'issues', githubIssueOpened, secret, delivery);
    expect(d.status).toBe(202);

    const list = await run('webhook', 'list', e.slug);
    expect(list.code).toBe(0);
    expect(list.out.split('\n')[0]).toMatch(/^ID\s+SOURCE\s+TRUST\s+QUEUE\s+URL\s+LAST DELIVERY$/);
    expect(list.out).toMatch(new RegExp(`${id}\\s+github\\s+signed\\s+reviews\\s+\\S+${tokenOf(url).slice(0, 6)}…`));
    expect(list.out).not.toContain(secret);
    expect(list.out).not.toContain(tokenOf(url));
    const listJson = await run('webhook', 'list', e.slug, '--json');
    expect(JSON.parse(listJson.out).webhooks[0]).toMatchObject({ webhook_id: id, source_type: 'github', last_delivery_at: expect.any(String) });

    const events = await run('events', 'list', e.slug);
    expect(events.code).toBe(0);
    expect(events.out.split('\n')[0]).toMatch(/^ID\s+RECEIVED\s+SOURCE\s+EVENT\s+TRUST\s+VERIFIED\s+TODO$/);
    expect(events.out).toMatch(new RegExp(`github\\s+issues\\s+signed\\s+yes\\s+${d.json.id}`));
    const eventsJson = JSON.parse((await run('events', 'list', e.slug, '--json', '--limit', '5')).out);
    expect(eventsJson.events[0]).toMatchObject({ external_id: delivery, verified: true, todo_id: d.json.id, headers: { 'x-hub-signature-256': '«redacted»' } });

    const generic = await run('webhook', 'create', e.slug, '--source', 'generic', '--queue', 'inbox');
    neverLogged.add(tokenOf(/Ingest URL {6}(\S+)/.exec(generic.out)![1]!));
    expect(generic.out).not.toContain('Signing secret');
    expect(generic.out).toContain('the credential');
    const bad = await run('webhook', 'create', e.slug, '--source', 'github', '--queue', 'nope');
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/target_queue.*invalid_argument/);
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

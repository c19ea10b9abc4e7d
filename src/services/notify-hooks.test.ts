import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { App } from '../app.ts';
import { main } from '../cli/main.ts';
import { ManualClock } from '../lib/clock.ts';
import { retryBackoffSeconds } from '../domain/lifecycle.ts';
import { createLogger } from '../lib/log.ts';
import { reapOnce } from './maintenance/reaper.ts';
import { insertEventAndTodo, type TodoRow } from '../store/todos/index.ts';
import { VERSION } from '../lib/version.ts';

/**
 * Notify hooks end to end (SPEC-0024): real PostgreSQL, real servers, and a plain-HTTP receiver
 * on 127.0.0.1 (allowed by SWITCHBOARD_PUSH_ALLOW_HTTP and SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS)
 * that checks every signature with its own implementation of the Standard Webhooks scheme.
 */

type TestApp = App & { clock: ManualClock };

const HOOK_ENV = { SWITCHBOARD_PUSH_ALLOW_HTTP: '1', SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32' };
const silent = createLogger('silent');

let db: Awaited<ReturnType<typeof migratedDatabase>>;
/** One clock for every instance in this file: time moves for all of them at once. */
const clock = new ManualClock('2026-09-21T08:00:00Z');
/** The main instance: three attempts, short backoff. */
let app: TestApp;
/** A second instance on the same database: one attempt per delivery, a short timeout. */
let appB: TestApp;
/** An instance with neither test flag (https only, no allow list) and at most one hook per endpoint. */
let strict: TestApp;
let owner: { id: string; token: string };
let api: ReturnType<typeof caller>;
let apiB: ReturnType<typeof caller>;
let apiStrict: ReturnType<typeof caller>;
const clients: Client[] = [];

// ---------------------------------------------------------------------------------------------
// The receiver

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  body: any;
}

let receiver: Server;
let receiverBase = '';
const received: Received[] = [];
const plans = new Map<string, (number | 'hang')[]>();
const hanging: ServerResponse[] = [];
let targetSeq = 0;

interface Target {
  url: string;
  path: string;
  got(): Received[];
}

/** A fresh path on the receiver; it answers the given statuses in order, then 200. */
function target(...answers: (number | 'hang')[]): Target {
  const path = `/hook/${++targetSeq}`;
  plans.set(path, answers);
  return { url: `${receiverBase}${path}`, path, got: () => received.filter((r) => r.path === path) };
}

async function startReceiver(): Promise<void> {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const path = req.url ?? '';
      received.push({ path, headers: req.headers, raw, body });
      const answer = plans.get(path)?.shift() ?? 200;
      if (answer === 'hang') return void hanging.push(res);
      if (answer >= 300 && answer < 400) res.setHeader('location', `${receiverBase}/moved`);
      res.statusCode = answer;
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverBase = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
}

// ---------------------------------------------------------------------------------------------
// Standard Webhooks, written here independently of src/lib/hook-signing.ts (WebCrypto, not node:crypto's createHmac)

/** The `v1,<base64>` entries of a request's webhook-signature header. */
function signatureEntries(r: Received): string[] {
  return String(r.headers['webhook-signature'] ?? '')
    .split(' ')
    .filter(Boolean);
}

/** How many of the request's signature entries verify with this `whsec_` secret. */
async function verifiedBy(r: Received, secret: string): Promise<number> {
  expect(secret).toMatch(/^whsec_/);
  const key = await crypto.subtle.importKey('raw', Buffer.from(secret.slice('whsec_'.length), 'base64'), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
  const signed = Buffer.concat([Buffer.from(`${String(r.headers['webhook-id'])}.${String(r.headers['webhook-timestamp'])}.`), r.raw]);
  let n = 0;
  for (const entry of signatureEntries(r)) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const mac = Buffer.from(entry.slice(comma + 1), 'base64');
    // crypto.subtle.verify compares in constant time.
    if (mac.length === 32 && (await crypto.subtle.verify('HMAC', key, mac, signed))) n++;
  }
  return n;
}

/** Every request verifies with exactly one entry made with `secret`. */
async function expectSigned(rs: Received[], secret: string): Promise<void> {
  for (const r of rs) expect(await verifiedBy(r, secret)).toBe(1);
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** An API caller on one instance; each write first moves the shared clock on 4 s so the write limit never bites. */
function caller(on: App, token: string) {
  const raw = apiCaller(on.url, token);
  return (method: string, path: string, body?: unknown) => {
    if (method !== 'GET') clock.advance(4000);
    return raw(method, path, body);
  };
}

interface Vended {
  id: string;
  slug: string;
  token: string;
  mcp_url: string;
}

async function vend(body: Record<string, unknown> = {}): Promise<Vended> {
  const r = await api('POST', '/api/v1/endpoints', { name: 'agent', queues: ['reviews', 'inbox'], ...body });
  expect(r.status).toBe(201);
  return r.json;
}

async function push(e: Vended, title: string, opts: { queue?: string; payload?: unknown; via?: typeof api } = {}): Promise<string> {
  const r = await (opts.via ?? api)('POST', `/api/v1/endpoints/${e.slug}/todos`, { title, queue: opts.queue ?? 'reviews', payload: opts.payload });
  expect(r.status).toBe(201);
  return r.json.id;
}

interface HookOut {
  hook_id: string;
  url: string;
  queues: string[];
  ignore_presence: boolean;
  enabled: boolean;
  signing_secret: string;
}

async function createHook(e: Vended, body: Record<string, unknown>, via = api): Promise<HookOut> {
  const r = await via('POST', `/api/v1/endpoints/${e.slug}/hooks`, body);
  expect(r.status, r.text).toBe(201);
  return r.json;
}

async function listHooks(e: Vended): Promise<{ hooks: any[]; ceiling: { max: number; used: number } }> {
  const r = await api('GET', `/api/v1/endpoints/${e.slug}/hooks`);
  expect(r.status).toBe(200);
  return r.json;
}

async function hookView(e: Vended, hookId: string): Promise<any> {
  return (await listHooks(e)).hooks.find((h) => h.hook_id === hookId);
}

/** The health columns straight from the database, for polling (the API's read limit would bite). */
async function health(hookId: string) {
  const [row] = await db.sql<{ enabled: boolean; consecutive_failures: number; last_status: number | null; last_error: string | null }[]>`
    select enabled, consecutive_failures, last_status, last_error from notify_hooks where id = ${hookId}`;
  return row!;
}

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
/** A brief wait to show that nothing more arrives. */
const settle = () => new Promise((r) => setTimeout(r, 250));

const dbTodo = async (id: string) => (await db.sql<TodoRow[]>`select * from todos where id = ${id}`)[0]!;
const rfc3339 = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

beforeAll(async () => {
  await startReceiver();
  db = await migratedDatabase();
  app = await startTestApp(db.url, clock, { env: HOOK_ENV, selfTestRingDelayMs: 20, notifyHookDelivery: { attempts: 3, backoffMs: [10, 10], timeoutMs: 2000 } });
  appB = await startTestApp(db.url, clock, { env: HOOK_ENV, notifyHookDelivery: { attempts: 1, backoffMs: [10, 10], timeoutMs: 300 } });
  strict = await startTestApp(db.url, clock, { env: { SWITCHBOARD_NOTIFY_HOOK_MAX: '1' } });
  owner = await humanWithToken(db.sql);
  api = caller(app, owner.token);
  apiB = caller(appB, owner.token);
  apiStrict = caller(strict, owner.token);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  for (const res of hanging) res.destroy();
  await Promise.all([app?.stop(), appB?.stop(), strict?.stop()]);
  receiver.closeAllConnections();
  await new Promise((r) => receiver.close(r));
  await db?.drop();
});

// ---------------------------------------------------------------------------------------------

describe('managing hooks over the API', () => {
  it('create answers 201 with a whsec_ secret shown once; the list never shows it', async () => {
    const e = await vend();
    const t = target();
    const created = await createHook(e, { url: `${t.url}?token=query-secret` });
    expect(created).toMatchObject({
      hook_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      queues: [],
      ignore_presence: false,
      enabled: true,
      disabled_reason: null,
      consecutive_failures: 0,
      last_attempt_at: null,
      signing_secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    expect(Buffer.from(created.signing_secret.slice(6), 'base64')).toHaveLength(32);
    const r = await api('GET', `/api/v1/endpoints/${e.slug}/hooks`);
    expect(r.status).toBe(200);
    expect(r.json.ceiling).toEqual({ max: 5, used: 1 });
    expect(r.json.hooks).toHaveLength(1);
    expect(r.json.hooks[0].signing_secret).toBeUndefined();
    expect(r.json.hooks[0].url.startsWith(`${t.url}?`)).toBe(true);
    expect(r.json.hooks[0].url).toMatch(/redacted/);
    expect(r.text).not.toContain(created.signing_secret.slice(6));
    expect(r.text).not.toContain('query-secret');
    // By id too: the endpoint id works as the ref.
    expect((await api('GET', `/api/v1/endpoints/${e.id}/hooks`)).json.hooks[0].hook_id).toBe(created.hook_id);
  });

  it('refuses user info, a URL over 2048 bytes, an unknown queue and unknown fields', async () => {
    const e = await vend();
    const t = target();
    const withUser = t.url.replace('http://', 'http://user:pass@');
    for (const [body, field, message] of [
      [{ url: withUser }, 'url', /user name or password/],
      [{ url: `${t.url}/${'a'.repeat(2048)}` }, 'url', /at most 2048 bytes/],
      [{ url: 'http://10.1.2.3/hook' }, 'url', /not a public address/],
      [{ url: t.url, queues: ['elsewhere'] }, 'queues', /"elsewhere" is not one of endpoint/],
      [{}, 'url', /required/],
    ] as const) {
      const r = await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.json).toMatchObject({ code: 'invalid_argument', field });
      expect(r.json.error).toMatch(message);
    }
    expect((await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: t.url, secret: 'mine' })).status).toBe(400);
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('without the test flags: https is required and every non-public address class is refused naming url', async () => {
    const e = await vend();
    const http = await apiStrict('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: 'http://93.184.216.34/hook' });
    expect(http.status).toBe(400);
    expect(http.json).toMatchObject({ code: 'invalid_argument', field: 'url', error: 'url: must use https' });
    for (const host of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '[::1]', '[fe80::1]', '[fc00::1]', '[::ffff:127.0.0.1]', '224.0.0.1', 'localhost']) {
      const r = await apiStrict('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: `https://${host}/hook` });
      expect(r.status, host).toBe(400);
      expect(r.json, host).toMatchObject({ code: 'invalid_argument', field: 'url', error: expect.stringMatching(/not a public address/) });
    }
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('stops at the ceiling: 5 by default, SWITCHBOARD_NOTIFY_HOOK_MAX otherwise; over answers 409 resource_exhausted', async () => {
    const e = await vend();
    for (let i = 0; i < 5; i++) await createHook(e, { url: target().url });
    const over = await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: target().url });
    expect(over.status).toBe(409);
    expect(over.json).toMatchObject({ code: 'resource_exhausted', max: 5, used: 5 });
    expect((await listHooks(e)).ceiling).toEqual({ max: 5, used: 5 });

    // The strict instance is configured with SWITCHBOARD_NOTIFY_HOOK_MAX=1 (a public https URL; nothing is pushed there).
    const f = await vend();
    expect((await apiStrict('POST', `/api/v1/endpoints/${f.slug}/hooks`, { url: 'https://93.184.216.34/hook' })).status).toBe(201);
    const second = await apiStrict('POST', `/api/v1/endpoints/${f.slug}/hooks`, { url: 'https://93.184.216.34/other' });
    expect(second.status).toBe(409);
    expect(second.json).toMatchObject({ code: 'resource_exhausted', max: 1, used: 1 });
    expect((await apiStrict('GET', `/api/v1/endpoints/${f.slug}/hooks`)).json.ceiling).toEqual({ max: 1, used: 1 });
  });

  it("a foreign human gets 404 on another's hooks routes and changes nothing", async () => {
    const e = await vend();
    const h = await createHook(e, { url: target().url });
    const foreign = caller(app, (await humanWithToken(db.sql)).token);
    const [before] = await db.sql`select secret, rotated_at from notify_hooks where id = ${h.hook_id}`;
    for (const [method, path, body] of [
      ['GET', `/api/v1/endpoints/${e.slug}/hooks`, undefined],
      ['POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: target().url }],
      ['POST', `/api/v1/hooks/${h.hook_id}/rotate`, undefined],
      ['DELETE', `/api/v1/hooks/${h.hook_id}`, undefined],
    ] as const) {
      const r = await foreign(method, path, body);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.json.code).toBe('not_found');
    }
    const [after] = await db.sql`select secret, rotated_at from notify_hooks where id = ${h.hook_id}`;
    expect(after).toEqual(before);
    expect((await listHooks(e)).hooks.map((x) => x.hook_id)).toEqual([h.hook_id]);
    // The owner can delete it; then it is gone.
    const del = await api('DELETE', `/api/v1/hooks/${h.hook_id}`);
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ hook_id: h.hook_id, deleted: true });
    expect((await listHooks(e)).hooks).toEqual([]);
    expect((await api('DELETE', `/api/v1/hooks/${h.hook_id}`)).status).toBe(404);
  });
});

describe('todo.ready', () => {
  it('an operator push fires exactly one signed todo.ready (created) with identifiers only', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const id = await push(e, 'Review PR 12', { payload: { note: 'payload-must-not-leak', token: 'hdr-must-not-leak' } });
    await until(() => t.got().length === 1, 'the notification');
    const r = t.got()[0]!;
    await settle();
    expect(t.got()).toHaveLength(1);

    await expectSigned([r], h.signing_secret);
    expect(signatureEntries(r)).toHaveLength(1);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['user-agent']).toBe(`switchboard/${VERSION}`);
    expect(r.headers['webhook-id']).toMatch(/^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(r.headers['webhook-timestamp']).toBe(String(Math.floor(clock.now().getTime() / 1000)));
    expect(r.raw.length).toBeLessThanOrEqual(4096);
    const todo = await dbTodo(id);
    expect(r.body).toEqual({
      type: 'todo.ready',
      reason: 'created',
      todo_id: id,
      queue: 'reviews',
      kind: 'operator',
      source: 'operator',
      summary: 'Review PR 12',
      endpoint: e.slug,
      attempt: 0,
      created_at: rfc3339(todo.created_at),
    });
    expect(r.raw.toString()).not.toMatch(/must-not-leak|payload/);
    // The health columns record the delivery.
    await until(async () => (await health(h.hook_id)).last_status === 200, 'the recorded outcome');
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 0, last_error: null, enabled: true, last_attempt_at: expect.any(String) });
  });

  it('a webhook delivery fires created once; its redelivery fires nothing', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const w = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
    expect(w.status).toBe(201);
    const deliver = () =>
      fetch(w.json.ingest_url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-event-type': 'build.failed', 'x-delivery-id': 'build-981' },
        body: JSON.stringify({ title: 'Nightly build failed', secret_field: 'payload-must-not-leak' }),
      });
    const first = await deliver();
    expect(first.status).toBe(202);
    const { id } = (await first.json()) as { id: string };
    await until(() => t.got().length === 1, 'the notification');
    expect((await deliver()).status).toBe(202);
    await settle();
    expect(t.got()).toHaveLength(1);
    await expectSigned(t.got(), h.signing_secret);
    expect(t.got()[0]!.body).toMatchObject({ type: 'todo.ready', reason: 'created', todo_id: id, queue: 'inbox', kind: 'build.failed', source: 'generic', summary: 'Nightly build failed' });
    expect(t.got()[0]!.raw.toString()).not.toContain('must-not-leak');
  });

  it('a lease expiry and an elapsed retry each fire once with reason requeued (the reaper wired as app.ts wires it)', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const id = await push(e, 'requeue me');
    await until(() => t.got().length === 1, 'the created notification');

    const agent = await connect(e);
    expect(await agent.call('claim', { id, lease_ttl_seconds: 60 })).toMatchObject({ id, state: 'claimed' });
    const reap = () =>
      reapOnce({ sql: app.sql, clock: app.clock, log: silent, onRequeued: (todos) => todos.forEach((row) => void app.hooks.todoReady(row, 'requeued')) });
    await reap();
    await settle();
    expect(t.got()).toHaveLength(1); // The lease has not run out yet.
    clock.advance(61_000);
    const { reaped } = await reap();
    expect(reaped.map((m) => m.id)).toContain(id);
    await until(() => t.got().length === 2, 'the requeued notification');
    expect(t.got()[1]!.body).toMatchObject({ type: 'todo.ready', reason: 'requeued', todo_id: id, queue: 'reviews', attempt: 1 });
    expect(t.got()[1]!.headers['webhook-id']).not.toBe(t.got()[0]!.headers['webhook-id']);

    // Claimed again and failed: the retry window elapsing is the other requeue.
    expect(await agent.call('claim', { id })).toMatchObject({ id, state: 'claimed' });
    await agent.call('fail', { id });
    await reap();
    await settle();
    expect(t.got()).toHaveLength(2); // Still waiting out its backoff.
    clock.advance((retryBackoffSeconds(2) + 1) * 1000);
    await reap();
    await until(() => t.got().length === 3, 'the second requeued notification');
    expect(t.got()[2]!.body).toMatchObject({ reason: 'requeued', todo_id: id, attempt: 2 });
    await settle();
    expect(t.got()).toHaveLength(3);
    await expectSigned(t.got(), h.signing_secret);
  });

  it('a requeued todo that fails the sender gate (an unverified signed delivery) fires nothing', async () => {
    const e = await vend();
    const t = target();
    await createHook(e, { url: t.url });
    const { todo, pushEligible } = await insertEventAndTodo(
      app.sql,
      { source: 'github', family: 'webhook', trustMode: 'signed', verified: false, verifyDetail: 'bad signature (test)' },
      { endpointId: e.id, queue: 'reviews', title: 'unverified', source: 'github', kind: 'push' },
      clock.now(),
    );
    expect(pushEligible).toBe(false);
    const agent = await connect(e);
    expect(await agent.call('claim', { id: todo.id, lease_ttl_seconds: 30 })).toMatchObject({ id: todo.id, state: 'claimed' });
    clock.advance(31_000);
    const requeued: string[] = [];
    const { reaped } = await reapOnce({
      sql: app.sql,
      clock: app.clock,
      log: silent,
      onRequeued: (todos) => todos.forEach((row) => (requeued.push(row.id), void app.hooks.todoReady(row, 'requeued'))),
    });
    expect(reaped.map((m) => m.id)).toContain(todo.id);
    expect(requeued).not.toContain(todo.id);
    // A real todo afterwards is the first and only thing the receiver hears.
    const id = await push(e, 'verified work');
    await until(() => t.got().length === 1, 'the real notification');
    await settle();
    expect(t.got().map((r) => r.body.todo_id)).toEqual([id]);
  });

  it('a synthetic self-test todo fires nothing', async () => {
    const e = await vend();
    const t = target();
    await createHook(e, { url: t.url });
    const started = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, {});
    expect(started.status).toBe(201);
    const synthetic = await dbTodo(started.json.todo_id);
    expect(synthetic.synthetic).toBe(true);
    await settle();
    // Even handed straight to the hooks, a synthetic todo is refused.
    await app.hooks.todoReady(synthetic, 'created');
    await settle();
    expect(t.got()).toEqual([]);
    // A real todo afterwards is the first and only thing the receiver hears.
    const id = await push(e, 'real work');
    await until(() => t.got().length === 1, 'the real notification');
    await settle();
    expect(t.got().map((r) => r.body.todo_id)).toEqual([id]);
  });

  it('queues narrow a hook; without queues it takes every scoped queue', async () => {
    const e = await vend();
    const inboxOnly = target();
    const all = target();
    expect((await createHook(e, { url: inboxOnly.url, queues: ['inbox'] })).queues).toEqual(['inbox']);
    await createHook(e, { url: all.url });
    const review = await push(e, 'a review', { queue: 'reviews' });
    const inbox = await push(e, 'an inbox item', { queue: 'inbox' });
    await until(() => all.got().length === 2 && inboxOnly.got().length === 1, 'the notifications');
    await settle();
    expect(inboxOnly.got().map((r) => r.body.todo_id)).toEqual([inbox]);
    expect(all.got().map((r) => r.body.todo_id).sort()).toEqual([review, inbox].sort());
  });

  it('two instances on one database: a push through either fires once in total', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const viaA = await push(e, 'through A');
    await until(() => t.got().length === 1, 'the notification from A');
    await settle();
    expect(t.got()).toHaveLength(1);
    const viaB = await push(e, 'through B', { via: apiB });
    await until(() => t.got().length === 2, 'the notification from B');
    await settle();
    expect(t.got().map((r) => r.body.todo_id)).toEqual([viaA, viaB]);
    await expectSigned(t.got(), h.signing_secret);
  });
});

describe('presence', () => {
  it('while out: no todo.ready except for ignore_presence hooks; on clock-in one todos.backlog per respecting hook', async () => {
    const e = await vend();
    const respecting = target();
    const ignoring = target();
    const hr = await createHook(e, { url: respecting.url });
    const hi = await createHook(e, { url: ignoring.url, ignore_presence: true });
    expect(hi.ignore_presence).toBe(true);
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out' })).json).toMatchObject({ presence: 'out' });
    const a = await push(e, 'alpha-title', { queue: 'reviews' });
    const b = await push(e, 'beta-title', { queue: 'inbox' });
    await until(() => ignoring.got().length === 2, 'the ignore_presence notifications');
    await settle();
    expect(respecting.got()).toEqual([]);
    expect(ignoring.got().map((r) => r.body.todo_id)).toEqual([a, b]);

    const back = await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'in' });
    expect(back.json).toMatchObject({ presence: 'in', pending: 2 });
    await until(() => respecting.got().length === 1, 'the backlog');
    // The other instance evaluating afterwards finds nothing to claim: still one backlog.
    await appB.presence.evaluate();
    await settle();
    expect(respecting.got()).toHaveLength(1);
    expect(ignoring.got()).toHaveLength(2);
    const r = respecting.got()[0]!;
    await expectSigned([r], hr.signing_secret);
    const oldest = await dbTodo(a);
    expect(r.body).toEqual({
      type: 'todos.backlog',
      reason: 'operator',
      endpoint: e.slug,
      pending: 2,
      queues: ['inbox', 'reviews'],
      oldest_pending_seconds: Math.round((clock.now().getTime() - oldest.created_at.getTime()) / 1000),
      created_at: rfc3339(clock.now()),
    });
    expect(r.raw.toString()).not.toMatch(/alpha-title|beta-title|td_/);
  });

  it('clearing the override (DELETE presence) also sends the backlog, counting only each hook\'s queues', async () => {
    const e = await vend();
    const all = target();
    const inboxOnly = target();
    const reviewsOnly = target();
    await createHook(e, { url: all.url });
    await createHook(e, { url: inboxOnly.url, queues: ['inbox'] });
    await createHook(e, { url: reviewsOnly.url, queues: ['reviews'] });
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out' })).status).toBe(200);
    await push(e, 'one', { queue: 'reviews' });
    await push(e, 'two', { queue: 'reviews' });
    await settle();
    expect([...all.got(), ...inboxOnly.got(), ...reviewsOnly.got()]).toEqual([]);
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`)).json).toMatchObject({ presence: 'in', source: 'default' });
    await until(() => all.got().length === 1 && reviewsOnly.got().length === 1, 'the backlogs');
    // Clearing again is no transition: nothing more.
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`)).status).toBe(200);
    await settle();
    expect(all.got().map((r) => r.body)).toEqual([expect.objectContaining({ type: 'todos.backlog', pending: 2, queues: ['reviews'] })]);
    expect(reviewsOnly.got().map((r) => r.body)).toEqual([expect.objectContaining({ type: 'todos.backlog', pending: 2, queues: ['reviews'] })]);
    expect(inboxOnly.got()).toEqual([]);
  });
});

describe('delivery', () => {
  it('503 then 200: the same webhook-id twice, counted as delivered', async () => {
    const e = await vend();
    const t = target(503);
    const h = await createHook(e, { url: t.url });
    await push(e, 'retry me');
    await until(() => t.got().length === 2, 'the retry');
    await until(async () => (await health(h.hook_id)).last_status === 200, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(2);
    const [first, second] = t.got();
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(second!.raw.equals(first!.raw)).toBe(true);
    await expectSigned(t.got(), h.signing_secret);
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 0, last_error: null, enabled: true });
  });

  it('408 and 429 are retried too, up to three attempts in all', async () => {
    const e = await vend();
    const t = target(429, 408, 500);
    const h = await createHook(e, { url: t.url });
    await push(e, 'busy receiver');
    await until(() => t.got().length === 3, 'three attempts');
    await until(async () => (await health(h.hook_id)).last_status === 500, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(3);
    expect(new Set(t.got().map((r) => r.headers['webhook-id'])).size).toBe(1);
    // Three attempts are one failed delivery.
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_error: 'http 500', enabled: true });
  });

  it('400 is not retried', async () => {
    const e = await vend();
    const t = target(400);
    const h = await createHook(e, { url: t.url });
    await push(e, 'bad request');
    await until(() => t.got().length === 1, 'the attempt');
    await until(async () => (await health(h.hook_id)).last_status === 400, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(1);
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_error: 'http 400', enabled: true });
  });

  it('a 302 redirect is a failure, not followed and not retried', async () => {
    const e = await vend();
    const t = target(302);
    const h = await createHook(e, { url: t.url });
    await push(e, 'redirected');
    await until(() => t.got().length === 1, 'the attempt');
    await until(async () => (await health(h.hook_id)).last_status === 302, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(1);
    expect(received.filter((r) => r.path === '/moved')).toEqual([]);
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_error: 'redirect refused' });
  });

  it('a receiver that never answers times out (instance B: 300 ms timeout, one attempt)', async () => {
    const e = await vend();
    const t = target('hang');
    const h = await createHook(e, { url: t.url });
    await push(e, 'slow receiver', { via: apiB });
    await until(() => t.got().length === 1, 'the attempt');
    await until(async () => (await health(h.hook_id)).last_error === 'timeout', 'the recorded timeout');
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_status: null });
  });

  it('the timeout bounds the whole attempt: a receiver trickling its answer byte by byte is cut off', async () => {
    // Each byte arrives well within the timeout, so only a deadline on the attempt as a whole ends it.
    const sockets: Socket[] = [];
    const slow = createNetServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.write('HTTP/1.1 200 OK\r\n');
      const drip = setInterval(() => socket.write('x'), 50);
      socket.on('close', () => clearInterval(drip));
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    try {
      const e = await vend();
      const h = await createHook(e, { url: `http://127.0.0.1:${(slow.address() as { port: number }).port}/hook` });
      await push(e, 'trickled', { via: apiB });
      await until(() => sockets.length === 1, 'the connection');
      await until(async () => (await health(h.hook_id)).last_error === 'timeout', 'the attempt to time out', 3000);
      expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_status: null });
      await until(() => sockets[0]!.destroyed, 'the connection to be dropped');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => slow.close(r));
    }
  });

  it('ten 500s in a row disable the hook (instance B: one attempt each); rotate re-enables it', async () => {
    const e = await vend();
    const t = target(...Array<number>(10).fill(500));
    const h = await createHook(e, { url: t.url });
    for (let i = 0; i < 10; i++) await push(e, `failing ${i}`, { via: apiB });
    await until(() => t.got().length === 10, 'ten attempts');
    await until(async () => (await health(h.hook_id)).enabled === false, 'the hook to be disabled');
    expect(await hookView(e, h.hook_id)).toMatchObject({
      enabled: false,
      disabled_reason: 'consecutive_failures',
      disabled_at: expect.any(String),
      consecutive_failures: 10,
      last_status: 500,
      last_error: 'http 500',
    });
    // A disabled hook is not called.
    await push(e, 'while disabled', { via: apiB });
    await settle();
    expect(t.got()).toHaveLength(10);

    const rotated = await api('POST', `/api/v1/hooks/${h.hook_id}/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.json).toMatchObject({ hook_id: h.hook_id, enabled: true, disabled_reason: null, disabled_at: null, consecutive_failures: 0 });
    expect(rotated.json.signing_secret).toMatch(/^whsec_/);
    expect(rotated.json.signing_secret).not.toBe(h.signing_secret);
    const id = await push(e, 'after rotate', { via: apiB });
    await until(() => t.got().length === 11, 'the delivery after rotation');
    const r = t.got()[10]!;
    expect(r.body.todo_id).toBe(id);
    expect(await verifiedBy(r, rotated.json.signing_secret)).toBe(1);
    await until(async () => (await health(h.hook_id)).last_status === 200, 'the recorded outcome');
    expect(await hookView(e, h.hook_id)).toMatchObject({ enabled: true, consecutive_failures: 0 });
  });

  it('the address is checked again before each attempt: an instance without the allow list refuses to call', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    await push(e, 'through the strict instance', { via: apiStrict });
    await until(async () => (await health(h.hook_id)).consecutive_failures === 1, 'the refused attempt');
    const v = await hookView(e, h.hook_id);
    expect(v.last_status).toBeNull();
    expect(v.last_error).toMatch(/^rejected: url: must use https/);
    await settle();
    expect(t.got()).toEqual([]);
    // The same hook through an instance that allows it is called.
    await push(e, 'through the main instance');
    await until(() => t.got().length === 1, 'the allowed delivery');
  });
});

describe('rotation', () => {
  it('signs with both secrets for 24 hours after a rotation, then with the new one only', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const rotated = await api('POST', `/api/v1/hooks/${h.hook_id}/rotate`);
    expect(rotated.status).toBe(200);
    const next: string = rotated.json.signing_secret;
    expect(next).toMatch(/^whsec_/);
    expect(next).not.toBe(h.signing_secret);
    expect(JSON.stringify((await listHooks(e)).hooks)).not.toContain(next.slice(6));

    await push(e, 'during the grace');
    await until(() => t.got().length === 1, 'the first notification');
    const during = t.got()[0]!;
    expect(signatureEntries(during)).toHaveLength(2);
    expect(await verifiedBy(during, h.signing_secret)).toBe(1);
    expect(await verifiedBy(during, next)).toBe(1);

    clock.advance(24 * 3_600_000);
    await push(e, 'after the grace');
    await until(() => t.got().length === 2, 'the second notification');
    const after = t.got()[1]!;
    expect(signatureEntries(after)).toHaveLength(1);
    expect(await verifiedBy(after, next)).toBe(1);
    expect(await verifiedBy(after, h.signing_secret)).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------

interface Agent {
  client: Client;
  call: (name: string, args?: Record<string, unknown>) => Promise<any>;
}

async function connect(e: Vended): Promise<Agent> {
  const client = new Client({ name: 'claude-code', version: '2.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), { requestInit: { headers: { Authorization: `Bearer ${e.token}` } } });
  await client.connect(transport);
  clients.push(client);
  return {
    client,
    call: async (name, args = {}) => {
      const r = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
      return r.isError ? { error: r.content[0]!.text } : JSON.parse(r.content[0]!.text);
    },
  };
}

const HOOK_VERBS = ['create_notify_hook', 'list_notify_hooks', 'rotate_notify_hook', 'delete_notify_hook'];

describe('agent verbs over MCP', () => {
  it('are not granted by a default vend', async () => {
    const e = await vend();
    const a = await connect(e);
    const names = (await a.client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('claim');
    for (const verb of HOOK_VERBS) expect(names).not.toContain(verb);
    expect((await a.call('create_notify_hook', { url: target().url })).error).toMatch(/^forbidden: verb "create_notify_hook" is not granted/);
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('manage only their own endpoint\'s hooks, within its scope', async () => {
    const verbs = ['list_todos', 'claim', ...HOOK_VERBS];
    const e = await vend({ verbs });
    const other = await vend({ verbs });
    const foreignHook = await createHook(other, { url: target().url });
    const a = await connect(e);
    const names = (await a.client.listTools()).tools.map((t) => t.name);
    for (const verb of HOOK_VERBS) expect(names).toContain(verb);

    const t = target();
    const created = await a.call('create_notify_hook', { url: t.url, queues: ['inbox'] });
    expect(created).toMatchObject({ hook_id: expect.any(String), queues: ['inbox'], ignore_presence: false, enabled: true, signing_secret: expect.stringMatching(/^whsec_/) });
    expect((await a.call('create_notify_hook', { url: t.url, queues: ['elsewhere'] })).error).toMatch(/^forbidden: queues: "elsewhere"/);
    expect((await a.call('create_notify_hook', { url: 'http://10.1.2.3/hook' })).error).toMatch(/^invalid_argument: url: .*not a public address/);

    const listed = await a.call('list_notify_hooks');
    expect(listed.ceiling).toEqual({ max: 5, used: 1 });
    expect(listed.hooks).toHaveLength(1);
    expect(listed.hooks[0]).toMatchObject({ hook_id: created.hook_id, consecutive_failures: 0, enabled: true, last_status: null });
    expect(listed.hooks[0].signing_secret).toBeUndefined();

    // Another endpoint's hook id is not found, and stays as it was.
    expect((await a.call('rotate_notify_hook', { hook_id: foreignHook.hook_id })).error).toMatch(/^not_found: /);
    expect((await a.call('delete_notify_hook', { hook_id: foreignHook.hook_id })).error).toMatch(/^not_found: /);
    expect((await listHooks(other)).hooks.map((x) => x.hook_id)).toEqual([foreignHook.hook_id]);
    const [foreignRow] = await db.sql`select rotated_at from notify_hooks where id = ${foreignHook.hook_id}`;
    expect(foreignRow!.rotated_at).toBeNull();

    // The agent's hook works, with the secret it was shown.
    const id = await push(e, 'for the agent hook', { queue: 'inbox' });
    await until(() => t.got().length === 1, 'the notification');
    expect(t.got()[0]!.body.todo_id).toBe(id);
    await expectSigned(t.got(), created.signing_secret);

    const rotated = await a.call('rotate_notify_hook', { hook_id: created.hook_id });
    expect(rotated.signing_secret).toMatch(/^whsec_/);
    expect(rotated.signing_secret).not.toBe(created.signing_secret);
    expect(await a.call('delete_notify_hook', { hook_id: created.hook_id })).toEqual({ hook_id: created.hook_id, deleted: true });
    expect((await a.call('list_notify_hooks')).hooks).toEqual([]);
  });
});

describe('switchboard hook (CLI)', () => {
  it('create prints the secret once; list shows the hook and its health, never the secret', async () => {
    const home = await mkdtemp(join(tmpdir(), 'sbhook-'));
    const run = async (args: string[]) => {
      let out = '';
      let err = '';
      const code = await main(['node', 'switchboard', ...args], {
        io: { out: (s) => void (out += s), err: (s) => void (err += s) },
        env: { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), SWITCHBOARD_DATABASE_URL: db.url, SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: owner.token },
        readStdin: async () => '',
        stdinIsTty: false,
      });
      return { code, out, err };
    };
    const e = await vend();
    const t = target();
    clock.advance(4000);
    const created = await run(['hook', 'create', e.slug, '--url', t.url, '--queue', 'reviews']);
    expect(created.err).toBe('');
    expect(created.code).toBe(0);
    const m = /^Created notify hook ([0-9a-f-]{36}) → (\S+)\n {2}Signing secret {2}(whsec_\S+)\nShown once\./.exec(created.out);
    expect(m, created.out).not.toBeNull();
    const [, hookId, url, secret] = m!;
    expect(url).toBe(t.url);

    const list = await run(['hook', 'list', e.slug]);
    expect(list.code).toBe(0);
    expect(list.out.split('\n')[0]).toMatch(/^ID\s+URL\s+QUEUES\s+STATE\s+LAST\s+FAILURES$/);
    expect(list.out).toMatch(new RegExp(`${hookId}\\s+${t.url.replace(/[.]/g, '\\.')}\\s+reviews\\s+enabled\\s+never\\s+0`));
    expect(list.out).not.toContain('whsec_');
    const json = await run(['hook', 'list', e.slug, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({ ceiling: { max: 5, used: 1 }, hooks: [{ hook_id: hookId, queues: ['reviews'] }] });
    expect(json.out).not.toContain(secret!.slice(6));

    // The printed secret is the one that signs.
    await push(e, 'for the CLI hook');
    await until(() => t.got().length === 1, 'the notification');
    await expectSigned(t.got(), secret!);
  });
});

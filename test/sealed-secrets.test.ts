import { createCipheriv, createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { githubHeaders, githubIssueOpened } from '../src/domain/ingest/fixtures.testkit.ts';
import { SecretBox, decodeKey, sealedFor } from '../src/lib/crypto-box.ts';
import { createLogger } from '../src/lib/log.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { apiCaller, humanWithToken, migratedDatabase, push, startTestApp, vend, type TestApp } from './support/fixtures.ts';
import { until } from './support/agents.ts';

// Issue 17 item 15c: webhook and notify hook secrets sealed under SWITCHBOARD_SECRET_ENCRYPTION_KEY
// and bound to their row; plain: and pre-binding values refused on read, resealed once at startup;
// the startup warning counts notify hooks too.

const KEY = randomBytes(32).toString('hex');
const HOOK_ENV = { SWITCHBOARD_PUSH_ALLOW_HTTP: '1', SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32' };
const keyed = { ...HOOK_ENV, SWITCHBOARD_SECRET_ENCRYPTION_KEY: KEY };
const box = new SecretBox(decodeKey(KEY));

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let api: ReturnType<typeof apiCaller>;
let token = '';
const extra: TestApp[] = [];
let receiver: Server;
let hookUrl = '';
const received: { headers: IncomingHttpHeaders; raw: Buffer }[] = [];

const logTo = (sink: (t: string) => void) => createLogger('info', new Writable({ write: (c, _e, done) => void (sink(c.toString()), done()) }));

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void (received.push({ headers: req.headers, raw: Buffer.concat(chunks) }), res.end('{}')));
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock(), { env: keyed });
  token = (await humanWithToken(db.sql)).token;
  api = apiCaller(app.url, token);
});
afterAll(async () => {
  await Promise.all([app, ...extra].map((a) => a?.stop()));
  receiver?.closeAllConnections();
  await new Promise((r) => receiver?.close(r));
  await db?.drop();
});

async function webhook(slug: string, on = api): Promise<{ webhook_id: string; ingest_url: string; signing_secret: string }> {
  const r = await on('POST', `/api/v1/endpoints/${slug}/webhooks`, { source_type: 'github' });
  expect(r.status, r.text).toBe(201);
  return r.json;
}
async function hook(slug: string, on = api): Promise<{ hook_id: string; signing_secret: string }> {
  const r = await on('POST', `/api/v1/endpoints/${slug}/hooks`, { url: hookUrl });
  expect(r.status, r.text).toBe(201);
  return r.json;
}
const deliver = async (url: string, secret: string, n: number) => {
  const body = JSON.stringify({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: n } });
  return (await fetch(url, { method: 'POST', headers: githubHeaders('issues', body, secret), body })).status;
};
const stored = async (table: 'webhooks' | 'notify_hooks', id: string): Promise<string> =>
  table === 'webhooks'
    ? (await db.sql`select signing_secret as s from webhooks where id = ${id}`)[0]!.s
    : (await db.sql`select secret as s from notify_hooks where id = ${id}`)[0]!.s;
/** Standard Webhooks: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>"> under the secret's bytes. */
const signedWith = (r: { headers: IncomingHttpHeaders; raw: Buffer }, secret: string) => {
  const mac = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
    .update(`${String(r.headers['webhook-id'])}.${String(r.headers['webhook-timestamp'])}.${r.raw.toString('utf8')}`)
    .digest('base64');
  return String(r.headers['webhook-signature']).split(' ').includes(`v1,${mac}`);
};
/** A todo for the endpoint, and the notify hook request it caused. */
async function hookRequest(slug: string): Promise<{ headers: IncomingHttpHeaders; raw: Buffer }> {
  const before = received.length;
  await push(api, slug, { queue: 'reviews', title: 'ping the hook' });
  await until(() => received.length > before, 'the notify hook request');
  return received[received.length - 1]!;
}
/** The v1 form, sealed before rows were bound (no associated data). */
function sealV1(secret: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', decodeKey(KEY)!, iv);
  const ct = Buffer.concat([c.update(secret, 'utf8'), c.final()]);
  return ['v1', iv.toString('base64url'), c.getAuthTag().toString('base64url'), ct.toString('base64url')].join(':');
}

describe('with SWITCHBOARD_SECRET_ENCRYPTION_KEY', () => {
  it('webhook and notify hook secrets are sealed (v2) bound to their row: they open for it and no other', async () => {
    const e = await vend(api, { name: 'sealed', queues: ['reviews'] });
    const w = await webhook(e.slug);
    const h = await hook(e.slug);
    const ws = await stored('webhooks', w.webhook_id);
    const hs = await stored('notify_hooks', h.hook_id);
    expect(ws).toMatch(/^v2:[\w-]+:[\w-]+:[\w-]+$/);
    expect(hs).toMatch(/^v2:[\w-]+:[\w-]+:[\w-]+$/);
    expect(box.for(sealedFor('webhooks', w.webhook_id)).open(ws)).toBe(w.signing_secret);
    expect(box.for(sealedFor('notify_hooks', h.hook_id)).open(hs)).toBe(h.signing_secret);
    expect(() => box.for(sealedFor('webhooks', h.hook_id)).open(ws)).toThrow();
    expect(() => box.for(sealedFor('notify_hooks', w.webhook_id)).open(hs)).toThrow();
    // The delivery path opens them: a signed delivery verifies, a hook request is signed.
    expect(await deliver(w.ingest_url, w.signing_secret, 1)).toBe(202);
    expect(signedWith(await hookRequest(e.slug), h.signing_secret)).toBe(true);
  });

  it('a sealed secret copied onto another row, or a plain: value written there, is refused (503), and nothing is stored', async () => {
    const e = await vend(api, { name: 'swap', queues: ['reviews'] });
    const a = await webhook(e.slug);
    const b = await webhook(e.slug);
    await db.sql`update webhooks set signing_secret = ${await stored('webhooks', a.webhook_id)} where id = ${b.webhook_id}`;
    const count = async () => (await db.sql`select count(*)::int as n from events`)[0]!.n;
    const before = await count();
    expect(await deliver(b.ingest_url, a.signing_secret, 2)).toBe(503);
    await db.sql`update webhooks set signing_secret = ${`plain:${b.signing_secret}`} where id = ${b.webhook_id}`;
    expect(await deliver(b.ingest_url, b.signing_secret, 3)).toBe(503);
    expect(await count()).toBe(before);
    expect(await deliver(a.ingest_url, a.signing_secret, 4)).toBe(202);
  });

  it('at startup, plain: and v1: values are accepted once and resealed bound to their row', async () => {
    const e = await vend(api, { name: 'legacy', queues: ['reviews'] });
    const w = await webhook(e.slug);
    const h = await hook(e.slug);
    await db.sql`update webhooks set signing_secret = ${`plain:${w.signing_secret}`} where id = ${w.webhook_id}`;
    const previous = `whsec_${randomBytes(32).toString('base64')}`;
    await db.sql`update notify_hooks set secret = ${sealV1(h.signing_secret)}, prev_secret = ${`plain:${previous}`},
      prev_secret_expires_at = ${new Date(app.clock.now().getTime() + 3_600_000)} where id = ${h.hook_id}`;
    // Read as they are, they are refused.
    expect(await deliver(w.ingest_url, w.signing_secret, 5)).toBe(503);

    let log = '';
    extra.push(await startTestApp(db.url, app.clock, { env: keyed, log: logTo((t) => void (log += t)) }));
    expect(log).toContain('resealed');
    expect(await stored('webhooks', w.webhook_id)).toMatch(/^v2:/);
    expect(await stored('notify_hooks', h.hook_id)).toMatch(/^v2:/);
    const [row] = await db.sql`select prev_secret from notify_hooks where id = ${h.hook_id}`;
    expect(box.for(sealedFor('notify_hooks', h.hook_id)).open(row!.prev_secret)).toBe(previous);
    expect(await deliver(w.ingest_url, w.signing_secret, 6)).toBe(202);
    const r = await hookRequest(e.slug);
    expect(signedWith(r, h.signing_secret)).toBe(true);
    expect(signedWith(r, previous)).toBe(true);
  });
});

describe('without a key', () => {
  it('the startup warning counts notify hooks as well as signed webhooks', async () => {
    const own = await migratedDatabase();
    try {
      const first = await startTestApp(own.url, new ManualClock(), { env: HOOK_ENV });
      const ownApi = apiCaller(first.url, (await humanWithToken(own.sql)).token);
      const e = await vend(ownApi, { name: 'plain', queues: ['reviews'] });
      await hook(e.slug, ownApi);
      await first.stop();
      expect((await own.sql`select secret from notify_hooks`)[0]!.secret).toMatch(/^plain:whsec_/);
      let log = '';
      const second = await startTestApp(own.url, new ManualClock(), { env: HOOK_ENV, log: logTo((t) => void (log += t)) });
      await second.stop();
      expect(log).toContain('stored unencrypted (0 signed webhooks, 1 notify hooks)');
    } finally {
      await own.drop();
    }
  });
});

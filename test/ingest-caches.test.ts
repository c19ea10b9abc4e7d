import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { githubHeaders, githubIssueOpened } from '../src/domain/ingest/fixtures.testkit.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { until } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './support/app.ts';
import { vend, type Api, type TestApp, type TestDb } from './support/fixtures.ts';

/**
 * What a delivery no longer looks up (issue 20): each instance caches the webhook an ingest token
 * names and the endpoints with no enabled notify hook. Changes made through the other instance
 * must reach the cache at once: a rotated or deleted webhook's old URL stops, a new hook hears.
 * The clock never moves here, so no cache entry expires on its own: only invalidation can pass.
 */
let db: TestDb;
let a: TestApp;
let b: TestApp;
let viaA: Api;
let receiver: Server;
let receiverUrl = '';
const heard: { path: string; body: { type?: string; todo_id?: string } }[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  const env = { SWITCHBOARD_PUSH_ALLOW_HTTP: '1', SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32', SWITCHBOARD_NOTIFY_HOOK_PORTS: 'any' };
  const clock = new ManualClock(new Date());
  [a, b] = await Promise.all([startTestApp(db.url, clock, { env }), startTestApp(db.url, clock, { env })]);
  viaA = apiCaller(a.url, (await humanWithToken(db.sql)).token);
  receiver = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      heard.push({ path: req.url ?? '', body: JSON.parse(raw || '{}') });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await new Promise((r) => receiver?.close(r));
  await db?.drop();
});

const onB = (ingestUrl: string) => ingestUrl.replace(a.url, b.url);
async function deliver(url: string, secret: string, n: number): Promise<number> {
  const body = JSON.stringify({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: n } });
  return (await fetch(url, { method: 'POST', headers: githubHeaders('issues', body, secret), body })).status;
}

describe('the ingest target cache', () => {
  it('a webhook rotated through A stops taking its old URL on B, which cached it, and takes the new one', async () => {
    const e = await vend(viaA, { name: 'cached', queues: ['issues'] });
    const created = await viaA('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'issues' });
    const old = { url: onB(created.json.ingest_url), secret: created.json.signing_secret };
    expect(await deliver(old.url, old.secret, 1)).toBe(202);
    expect(await deliver(old.url, old.secret, 2)).toBe(202); // from B's cache
    const rotated = await viaA('POST', `/api/v1/webhooks/${created.json.webhook_id}/rotate`);
    expect(rotated.status).toBe(200);
    // On A, at once; on B, as soon as the NOTIFY arrives.
    expect(await deliver(created.json.ingest_url, old.secret, 3)).toBe(404);
    await until(async () => (await deliver(old.url, old.secret, 4)) === 404, "B to forget the old URL");
    expect(await deliver(onB(rotated.json.ingest_url), rotated.json.signing_secret, 5)).toBe(202);
  });

  it('a webhook deleted through A is gone on B', async () => {
    const e = await vend(viaA, { name: 'deleted', queues: ['issues'] });
    const created = await viaA('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'issues' });
    const url = onB(created.json.ingest_url);
    expect(await deliver(url, created.json.signing_secret, 1)).toBe(202);
    expect((await viaA('DELETE', `/api/v1/webhooks/${created.json.webhook_id}`)).status).toBe(200);
    await until(async () => (await deliver(url, created.json.signing_secret, 2)) === 404, 'B to forget the deleted webhook');
  });
});

describe('the no-hooks cache', () => {
  it('an endpoint B believed hookless hears its todos once a hook is created through A', async () => {
    const e = await vend(viaA, { name: 'hookless', queues: ['reviews'] });
    const created = await viaA('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'reviews' });
    const url = onB(created.json.ingest_url);
    // A todo made on B while the endpoint has no hook: B now believes it has none.
    expect(await deliver(url, created.json.signing_secret, 1)).toBe(202);
    const hook = await viaA('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: `${receiverUrl}/${e.slug}` });
    expect(hook.status, hook.text).toBe(201);
    let n = 2;
    await until(async () => {
      expect(await deliver(url, created.json.signing_secret, n++)).toBe(202);
      return heard.some((h) => h.path === `/hook/${e.slug}` && h.body.type === 'todo.ready');
    }, 'a todo.ready from B');
  });

  it('an endpoint whose only hook was disabled hears again on B once the hook is rotated (re-enabled) through A', async () => {
    const e = await vend(viaA, { name: 'disabled-hook', queues: ['reviews'] });
    const hook = await viaA('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: `${receiverUrl}/${e.slug}` });
    expect(hook.status, hook.text).toBe(201);
    await db.sql`update notify_hooks set enabled = false, disabled_reason = 'operator' where id = ${hook.json.hook_id}`;
    const created = await viaA('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'reviews' });
    const url = onB(created.json.ingest_url);
    // B finds no enabled hook and now believes the endpoint has none.
    expect(await deliver(url, created.json.signing_secret, 1)).toBe(202);
    expect((await viaA('POST', `/api/v1/hooks/${hook.json.hook_id}/rotate`)).status).toBe(200);
    let n = 2;
    await until(async () => {
      expect(await deliver(url, created.json.signing_secret, n++)).toBe(202);
      return heard.some((h) => h.path === `/hook/${e.slug}` && h.body.type === 'todo.ready');
    }, 'a todo.ready from B after the rotation');
  });
});

import { describe, expect, it } from 'vitest';
import { apiCaller } from '../../test/support/app.ts';
import { alice, app, bob, db, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';
import { githubHeaders } from '../domain/ingest/fixtures.testkit.ts';
import { escapeHtml } from './html.ts';

// Webhooks and notify hooks managed from the endpoint page: created with the URL and secrets shown
// once, the API's own validation errors inline, rotate and delete behind confirm pages, CSRF, and
// another human's endpoint or hook answering 404.

useBoardSuite();

const ingestUrlOf = (page: string) => /<code id="ingest-url" class="secret">([^<]+)<\/code>/.exec(page)?.[1];
const secretOf = (page: string) => /<code id="signing-secret" class="secret">([^<]+)<\/code>/.exec(page)?.[1];
const webhookRows = async (endpointId: string) => db.sql`select id from webhooks where endpoint_id = ${endpointId}`;
const hookRows = async (endpointId: string) => db.sql`select id from notify_hooks where endpoint_id = ${endpointId}`;

/** A GitHub ping signed with `secret` to `url`: 200 when accepted, 401 for a wrong secret, 404 for a dead URL. */
async function deliver(url: string, secret: string) {
  const body = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
  return (await fetch(url, { method: 'POST', headers: githubHeaders('ping', body, secret), body })).status;
}

describe('webhooks on the board', () => {
  it('refuses bad input with the API’s error under the field and creates nothing', async () => {
    const e = await vend(alice, 'hooked', ['reviews', 'inbox']);
    const b = await signedIn(alice);
    const refused = await b.post(`/endpoints/${e.id}/webhooks`, { source_type: 'svn', target_queue: 'reviews', csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    const viaApi = await apiCaller(app.url, alice.token)('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'svn', target_queue: 'reviews' });
    expect(viaApi.json.field).toBe('source_type');
    expect(refused.text).toContain(`<p class="error" id="webhook-source-error" role="alert">${escapeHtml(viaApi.json.error)}</p>`);
    const badQueue = await b.post(`/endpoints/${e.id}/webhooks`, { source_type: 'github', target_queue: 'elsewhere', csrf_token: b.csrfToken });
    expect(badQueue.status).toBe(400);
    expect(badQueue.text).toMatch(/<p class="error" id="webhook-queue-error" role="alert">target_queue: &quot;elsewhere&quot; is not one of endpoint/);
    expect(await webhookRows(e.id)).toHaveLength(0);
  });

  it('creates a signed webhook showing its URL and secret once; rotate mints new ones; delete removes it', async () => {
    const e = await vend(alice, 'forge', ['reviews', 'inbox']);
    const b = await signedIn(alice);
    const created = await b.post(`/endpoints/${e.id}/webhooks`, { source_type: 'github', target_queue: 'inbox', csrf_token: b.csrfToken });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    const url = ingestUrlOf(created.text)!;
    const secret = secretOf(created.text)!;
    expect(url).toMatch(new RegExp(`^${app.url}/webhooks/w/`));
    expect(secret).toMatch(/^whsec_/);
    // The secret shown is the one that verifies deliveries.
    expect(await deliver(url, secret)).toBe(200);
    expect(await deliver(url, 'whsec_wrong')).toBe(401);
    const [row] = await webhookRows(e.id);
    // The endpoint page lists it with a hint, never the URL or the secret.
    const card = (await b.get(`/endpoints/${e.id}`)).text;
    expect(card).toContain(`id="webhook-${row!.id}"`);
    expect(card).not.toContain(url);
    expect(card).not.toContain(secret);

    const confirm = await b.get(`/endpoints/${e.id}/webhooks/${row!.id}/rotate`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain(`action="/endpoints/${e.id}/webhooks/${row!.id}/rotate"`);
    const rotated = await b.post(`/endpoints/${e.id}/webhooks/${row!.id}/rotate`, { csrf_token: b.csrfToken });
    expect(rotated.status).toBe(200);
    const url2 = ingestUrlOf(rotated.text)!;
    const secret2 = secretOf(rotated.text)!;
    expect(url2).not.toBe(url);
    expect(secret2).not.toBe(secret);
    expect(await deliver(url, secret)).toBe(404);
    expect(await deliver(url2, secret2)).toBe(200);

    expect((await b.get(`/endpoints/${e.id}/webhooks/${row!.id}/delete`)).status).toBe(200);
    const deleted = await b.post(`/endpoints/${e.id}/webhooks/${row!.id}/delete`, { csrf_token: b.csrfToken });
    expect(deleted.status).toBe(303);
    expect(deleted.headers.get('location')).toBe(`/endpoints/${e.id}#webhooks`);
    expect(await webhookRows(e.id)).toHaveLength(0);
  });

  it('refuses a form without the CSRF token (403), another human’s endpoint or webhook (404), and a revoked endpoint (409)', async () => {
    const e = await vend(alice, 'guarded', ['reviews']);
    const b = await signedIn(alice);
    expect((await b.post(`/endpoints/${e.id}/webhooks`, { source_type: 'generic' })).status).toBe(403);
    expect((await b.post(`/endpoints/${e.id}/webhooks`, { source_type: 'generic', csrf_token: 'f'.repeat(64) })).status).toBe(403);
    expect(await webhookRows(e.id)).toHaveLength(0);
    const made = await b.post(`/endpoints/${e.id}/webhooks`, { source_type: 'generic', csrf_token: b.csrfToken });
    expect(made.status).toBe(201);
    const [row] = await webhookRows(e.id);
    expect((await b.post(`/endpoints/${e.id}/webhooks/${row!.id}/delete`, {})).status).toBe(403);

    const mallory = await signedIn(bob);
    const own = await vend(bob, 'bobs', ['reviews']);
    expect((await mallory.post(`/endpoints/${e.id}/webhooks`, { source_type: 'generic', csrf_token: mallory.csrfToken })).status).toBe(404);
    for (const via of [e.id, own.id]) {
      expect((await mallory.get(`/endpoints/${via}/webhooks/${row!.id}/rotate`)).status).toBe(404);
      expect((await mallory.post(`/endpoints/${via}/webhooks/${row!.id}/rotate`, { csrf_token: mallory.csrfToken })).status).toBe(404);
      expect((await mallory.post(`/endpoints/${via}/webhooks/${row!.id}/delete`, { csrf_token: mallory.csrfToken })).status).toBe(404);
    }
    expect((await mallory.post(`/endpoints/${own.id}/webhooks/not-a-uuid/delete`, { csrf_token: mallory.csrfToken })).status).toBe(404);
    expect(await webhookRows(e.id)).toHaveLength(1);

    expect((await b.post(`/endpoints/${e.id}/revoke`, { csrf_token: b.csrfToken })).status).toBe(303);
    expect((await b.post(`/endpoints/${e.id}/webhooks`, { source_type: 'generic', csrf_token: b.csrfToken })).status).toBe(409);
    expect(await webhookRows(e.id)).toHaveLength(1);
  });
});

describe('notify hooks on the board', () => {
  // A public literal address: creating a hook resolves nothing and calls nothing (no todo is pushed here).
  const target = 'https://93.184.216.34/hook';

  it('refuses a bad URL or queue with the API’s error under the field and creates nothing', async () => {
    const e = await vend(alice, 'hook-bad', ['reviews', 'inbox']);
    const b = await signedIn(alice);
    for (const [form, fieldName] of [
      [{ url: 'http://10.1.2.3/hook' }, 'url'],
      [{ url: 'not a url' }, 'url'],
      [{ url: target, queues: 'elsewhere' }, 'queues'],
    ] as const) {
      const refused = await b.post(`/endpoints/${e.id}/hooks`, { ...form, csrf_token: b.csrfToken });
      expect(refused.status).toBe(400);
      const body = { url: form.url, ...('queues' in form ? { queues: [form.queues] } : {}) };
      const viaApi = await apiCaller(app.url, alice.token)('POST', `/api/v1/endpoints/${e.slug}/hooks`, body);
      expect(viaApi.json.field).toBe(fieldName);
      expect(refused.text).toContain(`<p class="error" id="hook-${fieldName}-error" role="alert">${escapeHtml(viaApi.json.error)}</p>`);
      expect(refused.text).toContain(`value="${form.url}"`);
    }
    expect(await hookRows(e.id)).toHaveLength(0);
  });

  it('creates a hook showing its secret once; rotate mints a new one; delete removes it', async () => {
    const e = await vend(alice, 'hook-good', ['reviews', 'inbox']);
    const b = await signedIn(alice);
    const created = await b.post(`/endpoints/${e.id}/hooks`, { url: target, queues: 'inbox', ignore_presence: 'true', csrf_token: b.csrfToken });
    expect(created.status).toBe(201);
    const secret = secretOf(created.text)!;
    expect(secret).toMatch(/^whsec_/);
    const [row] = await db.sql`select id, queues, ignore_presence from notify_hooks where endpoint_id = ${e.id}`;
    expect(row).toMatchObject({ queues: ['inbox'], ignore_presence: true });
    const card = (await b.get(`/endpoints/${e.id}`)).text;
    expect(card).toContain(`id="hook-${row!.id}"`);
    expect(card).not.toContain(secret);

    expect((await b.get(`/endpoints/${e.id}/hooks/${row!.id}/rotate`)).text).toContain('keeps signing alongside it for 24 hours');
    const rotated = await b.post(`/endpoints/${e.id}/hooks/${row!.id}/rotate`, { csrf_token: b.csrfToken });
    expect(rotated.status).toBe(200);
    const secret2 = secretOf(rotated.text)!;
    expect(secret2).toMatch(/^whsec_/);
    expect(secret2).not.toBe(secret);

    expect((await b.get(`/endpoints/${e.id}/hooks/${row!.id}/delete`)).status).toBe(200);
    const deleted = await b.post(`/endpoints/${e.id}/hooks/${row!.id}/delete`, { csrf_token: b.csrfToken });
    expect(deleted.status).toBe(303);
    expect(await hookRows(e.id)).toHaveLength(0);
  });

  it('shows the ceiling inline when the endpoint has its most hooks', async () => {
    const e = await vend(alice, 'hook-full', ['reviews']);
    const b = await signedIn(alice);
    for (let i = 0; i < 5; i++) expect((await b.post(`/endpoints/${e.id}/hooks`, { url: `${target}/${i}`, csrf_token: b.csrfToken })).status).toBe(201);
    const over = await b.post(`/endpoints/${e.id}/hooks`, { url: `${target}/6`, csrf_token: b.csrfToken });
    expect(over.status).toBe(409);
    expect(over.text).toMatch(/<p class="error" id="hook-error" role="alert">this endpoint already has 5 notify hooks/);
    expect(await hookRows(e.id)).toHaveLength(5);
  });

  it('refuses a form without the CSRF token (403) and another human’s endpoint or hook (404)', async () => {
    const e = await vend(alice, 'hook-guarded', ['reviews']);
    const b = await signedIn(alice);
    expect((await b.post(`/endpoints/${e.id}/hooks`, { url: target })).status).toBe(403);
    expect(await hookRows(e.id)).toHaveLength(0);
    expect((await b.post(`/endpoints/${e.id}/hooks`, { url: target, csrf_token: b.csrfToken })).status).toBe(201);
    const [row] = await hookRows(e.id);
    expect((await b.post(`/endpoints/${e.id}/hooks/${row!.id}/rotate`, {})).status).toBe(403);
    const mallory = await signedIn(bob);
    const own = await vend(bob, 'bobs-hooks', ['reviews']);
    expect((await mallory.post(`/endpoints/${e.id}/hooks`, { url: target, csrf_token: mallory.csrfToken })).status).toBe(404);
    for (const via of [e.id, own.id]) {
      expect((await mallory.get(`/endpoints/${via}/hooks/${row!.id}/delete`)).status).toBe(404);
      expect((await mallory.post(`/endpoints/${via}/hooks/${row!.id}/rotate`, { csrf_token: mallory.csrfToken })).status).toBe(404);
      expect((await mallory.post(`/endpoints/${via}/hooks/${row!.id}/delete`, { csrf_token: mallory.csrfToken })).status).toBe(404);
    }
    expect(await hookRows(e.id)).toHaveLength(1);
  });
});

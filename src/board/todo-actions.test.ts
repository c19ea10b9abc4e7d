import { describe, expect, it } from 'vitest';
import { apiCaller } from '../../test/support/app.ts';
import { alice, app, bob, db, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';
import { escapeHtml } from './html.ts';

// Acting on todos from the board: push from the endpoint page (the API's rules and errors, shown
// under the field), and cancel and retry from the todo's page, each behind the CSRF token and
// answering 404 for another human's endpoint or todo.

useBoardSuite();

const todosOf = (endpointId: string) => db.sql`select id, title, queue, kind, payload, idempotency_key from todos where endpoint_id = ${endpointId} and not synthetic`;

describe('push from the board', () => {
  it('pushes a todo with its queue, kind, payload and key, then lands on its page', async () => {
    const e = await vend(alice, 'pushed', ['reviews', 'inbox']);
    const b = await signedIn(alice);
    expect((await b.get(`/endpoints/${e.id}`)).text).toContain(`<form class="push-form" method="post" action="/endpoints/${e.id}/todos">`);
    const form = { title: 'Review PR 12', queue: 'inbox', kind: 'review', payload: '{"pr": 12, "repo": "acme/widgets"}', key: 'pr-12', csrf_token: b.csrfToken };
    const r = await b.post(`/endpoints/${e.id}/todos`, form);
    expect(r.status).toBe(303);
    const [row] = await todosOf(e.id);
    expect(row).toMatchObject({ title: 'Review PR 12', queue: 'inbox', kind: 'review', payload: { pr: 12, repo: 'acme/widgets' }, idempotency_key: 'pr-12' });
    expect(r.headers.get('location')).toBe(`/todos/${row!.id}`);
    const page = (await b.get(`/todos/${row!.id}`)).text;
    expect(page).toContain('<h1 class="todo-title">Review PR 12</h1>');
    expect(page).not.toContain('push-existing');

    // The same key while the first is live: nothing new, and the page says so.
    const again = await b.post(`/endpoints/${e.id}/todos`, { ...form, title: 'Review PR 12 again' });
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe(`/todos/${row!.id}?existing=1`);
    expect((await b.get(again.headers.get('location')!)).text).toContain('id="push-existing"');
    expect(await todosOf(e.id)).toHaveLength(1);

    // Blank optional fields are not sent: the only queue of a one-queue endpoint, kind operator, payload {}.
    const single = await vend(alice, 'single', ['reviews']);
    expect((await b.post(`/endpoints/${single.id}/todos`, { title: 'Plain', queue: '', kind: '', payload: '', key: '', csrf_token: b.csrfToken })).status).toBe(303);
    expect((await todosOf(single.id))[0]).toMatchObject({ title: 'Plain', queue: 'reviews', kind: 'operator', payload: {}, idempotency_key: null });
  });

  it('refuses bad input with the API’s error under the field, keeps what was typed, and pushes nothing', async () => {
    const e = await vend(alice, 'refused', ['reviews', 'inbox']);
    const b = await signedIn(alice);
    const api = apiCaller(app.url, alice.token);
    const cases: { form: Record<string, string>; body: Record<string, unknown>; field: string }[] = [
      { form: { title: '   ', queue: 'inbox' }, body: { title: '   ', queue: 'inbox' }, field: 'title' },
      { form: { title: 'x', queue: 'elsewhere' }, body: { title: 'x', queue: 'elsewhere' }, field: 'queue' },
      { form: { title: 'x', queue: 'inbox', kind: 'no spaces' }, body: { title: 'x', queue: 'inbox', kind: 'no spaces' }, field: 'kind' },
      { form: { title: 'x', queue: 'inbox', key: 'k'.repeat(300) }, body: { title: 'x', queue: 'inbox', key: 'k'.repeat(300) }, field: 'key' },
      { form: { title: 'x', queue: 'inbox', payload: '['.repeat(70) + ']'.repeat(70) }, body: { title: 'x', queue: 'inbox', payload: JSON.parse('['.repeat(70) + ']'.repeat(70)) }, field: 'payload' },
    ];
    for (const c of cases) {
      const r = await b.post(`/endpoints/${e.id}/todos`, { ...c.form, csrf_token: b.csrfToken });
      expect(r.status, c.field).toBe(400);
      const viaApi = await api('POST', `/api/v1/endpoints/${e.slug}/todos`, c.body);
      expect(viaApi.status).toBe(400);
      expect(viaApi.json.field).toBe(c.field);
      expect(r.text).toContain(`<p class="error" id="push-${c.field}-error" role="alert">${escapeHtml(viaApi.json.error)}</p>`);
      expect(r.text).toContain(`aria-describedby="push-${c.field}-error"`);
    }
    const notJson = await b.post(`/endpoints/${e.id}/todos`, { title: 'kept title', queue: 'inbox', payload: '{"pr": 12', csrf_token: b.csrfToken });
    expect(notJson.status).toBe(400);
    expect(notJson.text).toMatch(/<p class="error" id="push-payload-error" role="alert">payload: must be JSON/);
    expect(notJson.text).toContain('value="kept title"');
    expect(notJson.text).toContain('{&quot;pr&quot;: 12</textarea>');
    expect(await todosOf(e.id)).toHaveLength(0);
  });

  it('refuses a push without the CSRF token (403), to another human’s endpoint (404) and to a revoked one (409)', async () => {
    const e = await vend(alice, 'push-guarded', ['reviews']);
    const b = await signedIn(alice);
    expect((await b.post(`/endpoints/${e.id}/todos`, { title: 'no token' })).status).toBe(403);
    expect((await b.post(`/endpoints/${e.id}/todos`, { title: 'wrong token', csrf_token: '0'.repeat(64) })).status).toBe(403);
    const mallory = await signedIn(bob);
    expect((await mallory.post(`/endpoints/${e.id}/todos`, { title: 'not mine', csrf_token: mallory.csrfToken })).status).toBe(404);
    expect(await todosOf(e.id)).toHaveLength(0);
    await b.post(`/endpoints/${e.id}/revoke`, { csrf_token: b.csrfToken });
    expect((await b.post(`/endpoints/${e.id}/todos`, { title: 'too late', csrf_token: b.csrfToken })).status).toBe(409);
    expect(await todosOf(e.id)).toHaveLength(0);
  });
});

import { describe, expect, it } from 'vitest';
import { apiCaller } from '../../test/support/app.ts';
import { connectAgent } from '../../test/support/agents.ts';
import { alice, app, bob, clients, db, push, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';
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

    // Delay, priority and max attempts, as the API takes them.
    const later = await b.post(`/endpoints/${e.id}/todos`, { title: 'Later', queue: 'reviews', delay: '10m', priority: '7', max_attempts: '2', csrf_token: b.csrfToken });
    expect(later.status).toBe(303);
    const [laterRow] = await db.sql`select run_at, priority, max_attempts from todos where endpoint_id = ${e.id} and title = 'Later'`;
    expect(laterRow).toMatchObject({ priority: 7, max_attempts: 2 });
    expect((laterRow!.run_at as Date).getTime()).toBe(app.clock.now().getTime() + 10 * 60_000);

    // Blank optional fields are not sent: the only queue of a one-queue endpoint, kind operator, payload {}.
    const single = await vend(alice, 'single', ['reviews']);
    expect((await b.post(`/endpoints/${single.id}/todos`, { title: 'Plain', queue: '', kind: '', payload: '', key: '', csrf_token: b.csrfToken })).status).toBe(303);
    expect((await todosOf(single.id))[0]).toMatchObject({ title: 'Plain', queue: 'reviews', kind: 'operator', payload: {}, idempotency_key: null });
    expect((await db.sql`select run_at, priority, max_attempts from todos where endpoint_id = ${single.id}`)[0]).toEqual({ run_at: null, priority: 0, max_attempts: 5 });
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
      { form: { title: 'x', queue: 'inbox', delay: 'soon' }, body: { title: 'x', queue: 'inbox', delay: 'soon' }, field: 'delay' },
      { form: { title: 'x', queue: 'inbox', delay: '31d' }, body: { title: 'x', queue: 'inbox', delay: '31d' }, field: 'delay' },
      { form: { title: 'x', queue: 'inbox', priority: '5000' }, body: { title: 'x', queue: 'inbox', priority: 5000 }, field: 'priority' },
      { form: { title: 'x', queue: 'inbox', priority: '1.5' }, body: { title: 'x', queue: 'inbox', priority: 1.5 }, field: 'priority' },
      { form: { title: 'x', queue: 'inbox', max_attempts: '0' }, body: { title: 'x', queue: 'inbox', max_attempts: 0 }, field: 'max_attempts' },
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

const stateOf = async (id: string) => (await db.sql`select state, attempt, next_retry_at from todos where id = ${id}`)[0]!;

describe('cancel and retry from the board', () => {
  it('cancels a pending todo from its page; a second cancel is refused on the page (409)', async () => {
    const e = await vend(alice, 'cancels', ['reviews']);
    const id = await push(alice, e.slug, 'to be canceled');
    const b = await signedIn(alice);
    const page = (await b.get(`/todos/${id}`)).text;
    expect(page).toContain(`<form class="inline todo-action" method="post" action="/todos/${id}/cancel">`);
    expect(page).not.toContain(`action="/todos/${id}/retry"`);
    const r = await b.post(`/todos/${id}/cancel`, { csrf_token: b.csrfToken });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe(`/todos/${id}`);
    expect((await stateOf(id)).state).toBe('canceled');
    const after = (await b.get(`/todos/${id}`)).text;
    expect(after).toContain('<span class="badge state-canceled">canceled</span>');
    expect(after).not.toContain(`action="/todos/${id}/cancel"`);
    const again = await b.post(`/todos/${id}/cancel`, { csrf_token: b.csrfToken });
    expect(again.status).toBe(409);
    expect(again.text).toMatch(/<p class="error" role="alert" id="todo-refused">todo td_[^ ]+ is already canceled/);
    expect(again.text).not.toContain('id="live-updates"');
  });

  it('cancels from the list and goes back to it; a return outside /todos goes to the todo instead', async () => {
    const e = await vend(alice, 'cancels-list', ['reviews']);
    const one = await push(alice, e.slug, 'one');
    const two = await push(alice, e.slug, 'two');
    const b = await signedIn(alice);
    const list = `/todos?endpoint=${e.id}&state=pending`;
    expect((await b.get(list)).text).toContain(`<input type="hidden" name="return" value="/todos?endpoint=${e.id}&amp;state=pending">`);
    const r = await b.post(`/todos/${one}/cancel`, { return: list, csrf_token: b.csrfToken });
    expect(r.headers.get('location')).toBe(list);
    const off = await b.post(`/todos/${two}/cancel`, { return: 'https://evil.example/todos', csrf_token: b.csrfToken });
    expect(off.headers.get('location')).toBe(`/todos/${two}`);
    expect((await stateOf(two)).state).toBe('canceled');
  });

  it('retries a dead letter: pending again with its attempts from 0; retrying a pending todo is refused (409)', async () => {
    const e = await vend(alice, 'retries', ['reviews']);
    const id = await push(alice, e.slug, 'fails once', { max_attempts: 1 });
    const agent = await connectAgent(app, e, { track: clients });
    await agent.call('claim', { id });
    await agent.call('fail', { id, result: { error: 'boom' } });
    expect(await stateOf(id)).toMatchObject({ state: 'failed', attempt: 1, next_retry_at: null });
    const b = await signedIn(alice);
    const page = (await b.get(`/todos/${id}`)).text;
    expect(page).toContain('<span class="badge dead">dead letter</span>');
    expect(page).toContain(`action="/todos/${id}/retry"`);
    const r = await b.post(`/todos/${id}/retry`, { csrf_token: b.csrfToken });
    expect(r.status).toBe(303);
    expect(await stateOf(id)).toMatchObject({ state: 'pending', attempt: 0 });
    const again = await b.post(`/todos/${id}/retry`, { csrf_token: b.csrfToken });
    expect(again.status).toBe(409);
    expect(again.text).toMatch(/id="todo-refused">todo td_[^ ]+ is pending; only a failed todo/);
  });

  it('refuses cancel and retry without the CSRF token (403) and for another human’s todo or none (404)', async () => {
    const e = await vend(alice, 'action-guarded', ['reviews']);
    const id = await push(alice, e.slug, 'guarded');
    const b = await signedIn(alice);
    const mallory = await signedIn(bob);
    for (const action of ['cancel', 'retry']) {
      expect((await b.post(`/todos/${id}/${action}`, {})).status).toBe(403);
      expect((await mallory.post(`/todos/${id}/${action}`, { csrf_token: mallory.csrfToken })).status).toBe(404);
      expect((await b.post(`/todos/td_00000000-0000-4000-8000-000000000000/${action}`, { csrf_token: b.csrfToken })).status).toBe(404);
      expect((await b.post(`/todos/not-a-todo/${action}`, { csrf_token: b.csrfToken })).status).toBe(404);
    }
    expect((await stateOf(id)).state).toBe('pending');
  });
});

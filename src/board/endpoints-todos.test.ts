import { describe, expect, it } from 'vitest';
import { connectAgent } from '../../test/support/agents.ts';
import { apiCaller, humanWithToken } from '../../test/support/app.ts';
import { alice, app, bob, clients, db, push, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';

// The endpoints page and the todo list: pending and claimed counts on each card, one vocabulary
// for state and presence, revoked endpoints as a short list, the endpoint filter with queues
// scoped per endpoint, and a todo's owner named by the claiming session's client.

useBoardSuite();

/** The HTML of one endpoint card on `/`, or undefined when it has none. */
const cardOf = (page: string, id: string) => {
  const start = page.indexOf(`<article class="card" id="endpoint-${id}">`);
  return start < 0 ? undefined : page.slice(start, page.indexOf('</article>', start));
};

describe('the endpoint cards', () => {
  it('show pending and claimed counts, each linking to those todos', async () => {
    const e = await vend(alice, 'counted', ['reviews']);
    const ids = [];
    for (const t of ['one', 'two', 'three']) ids.push(await push(alice, e.slug, t));
    const agent = await connectAgent(app, e, { track: clients });
    for (const id of ids.slice(0, 2)) expect(await agent.call('claim', { id })).toMatchObject({ state: 'claimed' });
    const b = await signedIn(alice);
    const card = cardOf((await b.get('/')).text, e.id)!;
    expect(card).toContain(`<a class="pending-count" href="/todos?endpoint=${e.id}&amp;state=pending">1 pending</a>`);
    expect(card).toContain(`<a class="claimed-count" href="/todos?endpoint=${e.id}&amp;state=claimed">2 claimed</a>`);
    // Clocked out, the pending one is held.
    await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', csrf_token: b.csrfToken });
    expect(cardOf((await b.get('/')).text, e.id)).toMatch(/1 pending<\/a> <span class="held">\(held until clocked in\)<\/span> · <a class="claimed-count"/);
  });

  it('say active or revoked and in or out as the API does, and "on shift" only while a shift decides', async () => {
    const api = apiCaller(app.url, alice.token);
    const e = await vend(alice, 'words', ['reviews']);
    const b = await signedIn(alice);
    let card = cardOf((await b.get('/')).text, e.id)!;
    expect(card).toContain('<span class="badge state state-active">active</span>');
    expect(card).toContain('<span class="badge presence-badge">in</span>');
    expect(card).toContain('<span class="presence-source">default</span> · <span class="presence-reason">no shift and no override</span>');
    expect(card).not.toMatch(/on shift|off shift|>live</);
    expect((await api('GET', `/api/v1/endpoints/${e.slug}`)).json).toMatchObject({ state: 'active', presence: { presence: 'in', source: 'default' } });

    // A shift covering every minute of the week: in, by the shift.
    await b.post(`/endpoints/${e.id}/shift`, { shift: 'TZ=UTC Mon-Sun 00:00-24:00', action: 'save', csrf_token: b.csrfToken });
    card = cardOf((await b.get('/')).text, e.id)!;
    expect(card).toContain('<span class="presence-source">shift</span> · <span class="presence-reason">on shift</span>');
    expect((await api('GET', `/api/v1/endpoints/${e.slug}`)).json.presence).toMatchObject({ presence: 'in', source: 'shift' });

    // An override beats the shift: out, set by a human, and no longer "on shift".
    await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', csrf_token: b.csrfToken });
    card = cardOf((await b.get('/')).text, e.id)!;
    expect(card).toContain('<span class="badge presence-badge">out</span>');
    expect(card).toContain('<span class="presence-source">operator</span> · <span class="presence-reason">clocked out by a human</span>');
    expect(card).not.toContain('on shift');
    expect((await api('GET', `/api/v1/endpoints/${e.slug}`)).json.presence).toMatchObject({ presence: 'out', source: 'operator' });
  });

  it('collapse revoked endpoints into a short list below the active cards', async () => {
    const h = await humanWithToken(db.sql);
    const kept = await vend(h, 'kept', ['reviews']);
    const gone = await vend(h, 'gone', ['reviews']);
    const b = await signedIn(h);
    expect((await b.post(`/endpoints/${gone.id}/revoke`, { csrf_token: b.csrfToken })).status).toBe(303);
    const page = (await b.get('/')).text;
    expect(cardOf(page, kept.id)).toBeDefined();
    expect(page).not.toContain(`id="endpoint-${gone.id}"`);
    const revokedAt = (await db.sql`select revoked_at from endpoints where id = ${gone.id}`)[0]!.revoked_at as Date;
    expect(page).toMatch(
      new RegExp(
        `<tr class="revoked-row" id="revoked-${gone.id}"><td><a href="/endpoints/${gone.id}">gone</a></td><td><code>${gone.slug}</code></td><td><time datetime="${revokedAt.toISOString().slice(0, 19)}`,
      ),
    );
    expect(page.indexOf('id="revoked"')).toBeGreaterThan(page.indexOf(`id="endpoint-${kept.id}"`));
    // Its own page still shows the card, revoked.
    expect((await b.get(`/endpoints/${gone.id}`)).text).toContain('<span class="badge state state-revoked">revoked</span>');
  });
});

describe('the todo list', () => {
  it('filters by endpoint, and a queue is always one endpoint’s', async () => {
    const h = await humanWithToken(db.sql);
    const a = await vend(h, 'alpha', ['inbox', 'reviews']);
    const z = await vend(h, 'zulu', ['inbox']);
    await push(h, a.slug, 'A inbox', { queue: 'inbox' });
    await push(h, a.slug, 'A reviews', { queue: 'reviews' });
    await push(h, z.slug, 'Z inbox', { queue: 'inbox' });
    const b = await signedIn(h);

    const all = (await b.get('/todos')).text;
    // Across endpoints, each queue link names its endpoint too.
    expect(all).toContain(`href="/todos?endpoint=${a.id}&amp;queue=inbox"><code>${a.slug}</code> / inbox <span class="count">1</span>`);
    expect(all).toContain(`href="/todos?endpoint=${z.id}&amp;queue=inbox"><code>${z.slug}</code> / inbox <span class="count">1</span>`);
    expect(all).toContain(`href="/todos?endpoint=${a.id}"><code>${a.slug}</code> <span class="count">2</span>`);

    const aInbox = (await b.get(`/todos?endpoint=${a.id}&queue=inbox`)).text;
    expect(aInbox).toContain('A inbox');
    expect(aInbox).not.toContain('Z inbox');
    expect(aInbox).not.toContain('A reviews');
    expect(aInbox).toContain(`hx-get="/todos?endpoint=${a.id}&amp;queue=inbox"`);

    const onlyZ = (await b.get(`/todos?endpoint=${z.slug}`)).text;
    expect(onlyZ).toContain('Z inbox');
    expect(onlyZ).not.toContain('A inbox');
    expect(onlyZ).toMatch(/all <span class="count">1<\/span>/);

    // Another human's endpoint, or none by that name: 404.
    const other = await vend(bob, 'bobs-list', ['inbox']);
    expect((await b.get(`/todos?endpoint=${other.id}`)).status).toBe(404);
    expect((await b.get('/todos?endpoint=no-such-endpoint')).status).toBe(404);
  });

  it('names a todo’s owner by the claiming session’s client, the session id on hover, else the id', async () => {
    const e = await vend(alice, 'owned', ['reviews']);
    const id = await push(alice, e.slug, 'held by a client');
    const agent = await connectAgent(app, e, { track: clients, name: 'review-runner' });
    await agent.call('claim', { id });
    const b = await signedIn(alice);
    const page = (await b.get(`/todos/${id}`)).text;
    expect(page).toContain(`<dt>Owner</dt><dd><span class="owner" title="session ${agent.sessionId}">review-runner 2.1.0</span></dd>`);
    expect((await b.get(`/todos?endpoint=${e.id}&state=claimed`)).text).toContain(`<span class="owner" title="session ${agent.sessionId}">review-runner 2.1.0</span>`);
    // Once the session's row is gone, the id is all there is.
    await db.sql`delete from mcp_sessions where id = ${agent.sessionId}`;
    expect((await b.get(`/todos/${id}`)).text).toContain(`<dt>Owner</dt><dd><code class="owner" title="the session has ended">${agent.sessionId}</code></dd>`);
  });
});

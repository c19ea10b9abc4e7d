import { describe, expect, it } from 'vitest';
import { connectAgent } from '../../test/support/agents.ts';
import { apiCaller } from '../../test/support/app.ts';
import { alice, app, bob, browser, clients, db, push, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';
import { INGEST_BODY_LIMIT } from '../ingest-http/routes.ts';
import { UPLOT_ASSET, UPLOT_CSS_ASSET } from './pages.ts';

// The charts' JSON routes and the pages that carry the charts (issue 39 item 3): shapes, human
// scoping (another human's endpoint or webhook is a 404 like a missing one), a bad range refused
// naming the field, refusals answered as JSON (never a redirect to sign-in), and each page's chart
// element beside a table rendered from the same numbers. The drawing itself: charts.browser.test.ts.

useBoardSuite();

const json = async (b: Awaited<ReturnType<typeof signedIn>>, path: string) => {
  const r = await b.get(path);
  return { status: r.status, type: r.headers.get('content-type') ?? '', cache: r.headers.get('cache-control'), body: JSON.parse(r.text) };
};

describe('the charts’ JSON routes', () => {
  it("GET /endpoints/{id}/history.json answers the endpoint's points for 1h, 24h (the default) and 7d", async () => {
    const e = await vend(alice, 'charted', ['reviews']);
    const [first] = [await push(alice, e.slug, 'one'), await push(alice, e.slug, 'two')];
    const agent = await connectAgent(app, e, { track: clients });
    expect(await agent.call('claim', { id: first })).toMatchObject({ state: 'claimed' });
    await app.services.history.maintain();
    const b = await signedIn(alice);

    const day = await json(b, `/endpoints/${e.id}/history.json`);
    expect(day.status).toBe(200);
    expect(day.type).toMatch(/^application\/json/);
    expect(day.cache).toBe('no-store');
    expect(day.body).toMatchObject({ range: '24h', step_seconds: 900 });
    expect(day.body.points).toHaveLength(96);
    expect(Object.keys(day.body.points[0]).sort()).toEqual(
      ['t', 'created', 'claimed', 'completed', 'failed', 'dead', 'pending', 'claimed_depth', 'wait_p50_ms', 'wait_p95_ms', 'rings_sent', 'heard_claim', 'heard_ack', 'unheard', 'digests'].sort(),
    );
    const sum = (k: string, pts: Record<string, number>[]) => pts.reduce((a, p) => a + p[k]!, 0);
    expect(sum('created', day.body.points)).toBe(2);
    expect(sum('claimed', day.body.points)).toBe(1);
    // The same numbers as the API's history of that endpoint.
    const viaApi = await apiCaller(app.url, alice.token)('GET', `/api/v1/endpoints/${e.slug}/history?range=24h`);
    expect(day.body).toEqual(viaApi.json);

    expect((await json(b, `/endpoints/${e.id}/history.json?range=1h`)).body).toMatchObject({ range: '1h', step_seconds: 60, points: expect.any(Array) });
    expect((await json(b, `/endpoints/${e.id}/history.json?range=1h`)).body.points).toHaveLength(60);
    expect((await json(b, `/endpoints/${e.id}/history.json?range=7d`)).body.points).toHaveLength(168);
  });

  it('refuses a bad range with 400 naming the field, another human’s endpoint with 404, both as JSON', async () => {
    const e = await vend(alice, 'private', ['reviews']);
    const b = await signedIn(alice);
    for (const bad of ['1y', '24H', '']) {
      if (bad === '') continue;
      const r = await json(b, `/endpoints/${e.id}/history.json?range=${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.type).toMatch(/^application\/json/);
      expect(r.body).toMatchObject({ code: 'invalid_argument', field: 'range' });
      expect(r.body.error).toMatch(/^range: must be 1h, 24h, 7d$/);
    }
    const twice = await json(b, `/endpoints/${e.id}/history.json?range=1h&range=7d`);
    expect(twice.status).toBe(400);

    const eve = await signedIn(bob);
    for (const path of [`/endpoints/${e.id}/history.json`, `/endpoints/${e.id}/presence.json`, `/todos/history.json?endpoint=${e.id}`]) {
      const r = await json(eve, path);
      expect(r.status, path).toBe(404);
      expect(r.body.code).toBe('not_found');
    }
    const missing = await json(b, '/endpoints/00000000-0000-4000-8000-000000000000/history.json');
    expect(missing.status).toBe(404);
    expect((await json(b, '/endpoints/not-a-uuid/history.json')).status).toBe(404);
    // The sparklines of bob's own endpoints do not name alice's.
    expect(Object.keys((await json(eve, '/endpoints/sparklines.json')).body.series)).not.toContain(e.id);
  });

  it('answers a request without a session with 401, not a redirect to sign-in', async () => {
    const e = await vend(alice, 'anon', ['reviews']);
    const anon = browser();
    for (const path of [`/endpoints/${e.id}/history.json`, '/todos/history.json', '/endpoints/sparklines.json', `/endpoints/${e.id}/presence.json`]) {
      const r = await anon.get(path);
      expect(r.status, path).toBe(401);
      expect(r.headers.get('location')).toBeNull();
      expect(r.headers.get('set-cookie') ?? '').not.toContain('return');
    }
  });

  it('GET /todos/history.json answers per queue, within the endpoint and queue filters', async () => {
    const e = await vend(alice, 'queued', ['reviews', 'inbox']);
    await push(alice, e.slug, 'r', { queue: 'reviews' });
    await push(alice, e.slug, 'i1', { queue: 'inbox' });
    await push(alice, e.slug, 'i2', { queue: 'inbox' });
    await app.services.history.maintain();
    const b = await signedIn(alice);
    const all = await json(b, `/todos/history.json?endpoint=${e.id}&range=1h`);
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ range: '1h', step_seconds: 60 });
    expect(Object.keys(all.body.queues).sort()).toEqual(['inbox', 'reviews']);
    expect(all.body.queues.inbox).toHaveLength(60);
    const created = (q: string, body = all.body) => body.queues[q].reduce((a: number, p: { created: number }) => a + p.created, 0);
    expect(created('inbox')).toBe(2);
    expect(created('reviews')).toBe(1);
    const inbox = await json(b, `/todos/history.json?endpoint=${e.id}&queue=inbox`);
    expect(Object.keys(inbox.body.queues)).toEqual(['inbox']);
    expect((await json(b, '/todos/history.json?queue=no%20spaces')).status).toBe(400);
    expect((await json(b, '/todos/history.json?range=30d')).status).toBe(400);
  });

  it("GET /webhooks/{id}/history.json answers a webhook's deliveries by outcome; another human's webhook is a 404", async () => {
    const e = await vend(alice, 'hooked', ['inbox']);
    const made = await apiCaller(app.url, alice.token)('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
    expect(made.status).toBe(201);
    const w = made.json as { webhook_id: string; ingest_url: string };
    for (let i = 0; i < 2; i++) {
      const r = await fetch(w.ingest_url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-delivery-id': `d${i}` }, body: JSON.stringify({ title: `build ${i}` }) });
      expect(r.status).toBe(202);
    }
    const b = await signedIn(alice);
    const r = await json(b, `/webhooks/${w.webhook_id}/history.json?range=1h`);
    expect(r.status).toBe(200);
    expect(r.body, JSON.stringify(r.body)).toMatchObject({ range: '1h', step_seconds: 60 });
    expect(r.body.outcomes.routed.reduce((a: number, n: number) => a + n, 0)).toBe(2);
    expect(r.body.outcomes.routed).toHaveLength(60);

    const eve = await signedIn(bob);
    expect((await json(eve, `/webhooks/${w.webhook_id}/history.json`)).status).toBe(404);
    expect((await json(b, '/webhooks/nope/history.json')).status).toBe(404);
    expect((await json(b, `/webhooks/${w.webhook_id}/history.json?range=2h`)).status).toBe(400);

    // The rules page carries the chart, its table the same numbers, and range links.
    const page = (await b.get(`/endpoints/${e.id}/webhooks/${w.webhook_id}/rules?range=1h`)).text;
    expect(page).toContain(`data-chart="deliveries" data-chart-src="/webhooks/${w.webhook_id}/history.json?range=1h"`);
    expect(page.match(/<td data-key="routed">(\d+)<\/td>/g)?.map((c) => Number(/>(\d+)</.exec(c)![1])).reduce((a, n) => a + n, 0)).toBe(2);
    expect(page).toContain(`href="/endpoints/${e.id}/webhooks/${w.webhook_id}/rules?range=7d#charts"`);
  });

  it('counts refused deliveries as their own outcome: a bad body, a body over the limit; the table shows them beside the routed', async () => {
    const e = await vend(alice, 'refusing', ['inbox']);
    const made = await apiCaller(app.url, alice.token)('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
    const w = made.json as { webhook_id: string; ingest_url: string };
    const deliver = (body: string | Buffer) => fetch(w.ingest_url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect((await deliver(JSON.stringify({ title: 'fine' }))).status).toBe(202);
    expect((await deliver('not json')).status).toBe(400);
    expect((await deliver('{"title": ')).status).toBe(400);
    expect((await deliver(Buffer.alloc(INGEST_BODY_LIMIT + 1, 0x20))).status).toBe(413);
    // Counted in memory until the tally's loop (or a stop) writes them.
    const b = await signedIn(alice);
    const before = await json(b, `/webhooks/${w.webhook_id}/history.json?range=1h`);
    expect(before.body.outcomes.refused).toBeUndefined();
    await app.services.webhookRefusals.flush();
    expect(await db.sql`select reason, n from webhook_refusals where webhook_id = ${w.webhook_id} order by reason`).toEqual([
      { reason: 'invalid_argument', n: 2 },
      { reason: 'payload_too_large', n: 1 },
    ]);
    const r = await json(b, `/webhooks/${w.webhook_id}/history.json?range=1h`);
    const total = (xs: number[]) => xs.reduce((a, n) => a + n, 0);
    expect(total(r.body.outcomes.refused)).toBe(3);
    expect(total(r.body.outcomes.routed)).toBe(1);
    // The same minute as the routed delivery.
    expect(r.body.outcomes.refused.indexOf(3)).toBe(r.body.outcomes.routed.indexOf(1));
    const page = (await b.get(`/endpoints/${e.id}/webhooks/${w.webhook_id}/rules?range=1h`)).text;
    const cells = (key: string) => page.match(new RegExp(`<td data-key="${key}">(\\d+)</td>`, 'g'))?.map((c) => Number(/>(\d+)</.exec(c)![1])) ?? [];
    expect(total(cells('refused'))).toBe(3);
    expect(total(cells('routed'))).toBe(1);
  });

  it('GET /endpoints/{id}/presence.json answers the week as spans of in and out with their source, and the shift behind', async () => {
    const e = await vend(alice, 'banded', ['reviews']);
    const b = await signedIn(alice);
    // A shift that is always on: in by the shift, then out by the operator.
    await b.post(`/endpoints/${e.id}/shift`, { shift: 'TZ=UTC Mon-Sun 00:00-24:00', action: 'save', csrf_token: b.csrfToken });
    app.clock.advance(60_000);
    await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', csrf_token: b.csrfToken });
    app.clock.advance(60_000);
    const r = await json(b, `/endpoints/${e.id}/presence.json`);
    expect(r.status).toBe(200);
    const rows = await db.sql<{ at: Date; to_presence: string; source: string }[]>`
      select at, to_presence, source from presence_history where endpoint_id = ${e.id} order by at`;
    expect(rows.length).toBeGreaterThan(0);
    const spans = r.body.spans as { from: string; to: string; presence: string; source: string | null }[];
    // The last span is the last change, up to now.
    expect(spans.at(-1)).toMatchObject({ presence: rows.at(-1)!.to_presence, source: rows.at(-1)!.source, from: rows.at(-1)!.at.toISOString(), to: app.clock.now().toISOString() });
    expect(spans.at(-1)).toMatchObject({ presence: 'out', source: 'operator' });
    // Spans tile the window from the endpoint's creation, each change starting one.
    for (let i = 1; i < spans.length; i++) expect(spans[i]!.from).toBe(spans[i - 1]!.to);
    expect(spans.map((s) => s.from).slice(-rows.length)).toEqual(rows.map((x) => x.at.toISOString()));
    // Before the first kept change: its `from`, by a source no row says (the shift's save changed no presence, so no row).
    expect(spans.at(-2)).toMatchObject({ presence: 'in', source: null });
    // Behind: the shift's one window, the whole week.
    expect(r.body.shift).toEqual([{ from: r.body.since, to: r.body.until }]);
    expect(r.body.shift_text).toMatch(/^TZ=UTC Mon 00:00-24:00;/);
  });
});

describe('depth, as the charts read it', () => {
  it('a queue drained since an earlier snapshot in the same point reads 0 there, in its quarter hour and its hour', async () => {
    const e = await vend(alice, 'drained', ['reviews']);
    const ids = [await push(alice, e.slug, 'a'), await push(alice, e.slug, 'b')];
    const agent = await connectAgent(app, e, { track: clients });
    const hour = Math.ceil(app.clock.now().getTime() / 3600_000) * 3600_000;
    app.clock.set(new Date(hour + 5 * 60_000));
    await app.services.history.maintain();
    for (const id of ids) {
      expect(await agent.call('claim', { id })).toMatchObject({ state: 'claimed' });
      expect(await agent.call('complete', { id })).toMatchObject({ state: 'done' });
    }
    app.clock.set(new Date(hour + 12 * 60_000));
    await app.services.history.maintain();
    const b = await signedIn(alice);
    const at = (body: { points: { t: string; pending: number }[] }, ms: number) => body.points.find((p) => p.t === new Date(ms).toISOString())!.pending;
    // Before the queue drained, its snapshot said 2; the last one in the point says 0.
    expect(at((await json(b, `/endpoints/${e.id}/history.json?range=1h`)).body, hour + 4 * 60_000)).toBe(2);
    expect(at((await json(b, `/endpoints/${e.id}/history.json?range=24h`)).body, hour)).toBe(0);
    expect(at((await json(b, `/endpoints/${e.id}/history.json?range=7d`)).body, hour)).toBe(0);
  });
});

describe('the pages that carry charts', () => {
  it('the endpoint page: depth, throughput, claim wait, doorbells and the presence band, each beside its table, over the chosen range', async () => {
    const e = await vend(alice, 'paged', ['reviews']);
    await push(alice, e.slug, 'one');
    await app.services.history.maintain();
    const b = await signedIn(alice);
    const page = (await b.get(`/endpoints/${e.id}?range=7d`)).text;
    for (const kind of ['depth', 'throughput', 'wait', 'rings']) {
      expect(page).toContain(`<div class="chart-plot" id="chart-${kind}-plot" data-chart="${kind}" data-chart-src="/endpoints/${e.id}/history.json?range=7d" aria-hidden="true"></div>`);
      expect(page).toMatch(new RegExp(`<details class="chart-table" open><summary>Table</summary><div id="chart-${kind}-table" data-live>`));
    }
    expect(page).toContain(`data-chart="presence" data-chart-src="/endpoints/${e.id}/presence.json"`);
    expect(page).toContain('<td data-key="created">1</td>');
    // The range links; the live re-read keeps the range.
    expect(page).toContain(`<a href="/endpoints/${e.id}?range=7d#charts" aria-current="true">7 d</a>`);
    expect(page).toContain(`hx-get="/endpoints/${e.id}?range=7d"`);
    expect(page).not.toMatch(/<style|style=|\son[a-z]+=/i);
    const bad = await b.get(`/endpoints/${e.id}?range=forever`);
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/^text\/html/);
    expect(bad.text).toContain('range: must be 1h, 24h, 7d');
  });

  it('the endpoints page: a pending sparkline on each card, from one JSON for all of them', async () => {
    const e1 = await vend(alice, 'spark-a', ['reviews']);
    const e2 = await vend(alice, 'spark-b', ['reviews']);
    await push(alice, e1.slug, 'x');
    await app.services.history.maintain();
    const b = await signedIn(alice);
    const page = (await b.get('/')).text;
    for (const e of [e1, e2]) expect(page).toContain(`data-chart="sparkline" data-chart-src="/endpoints/sparklines.json" data-series="${e.id}"`);
    const spark = await json(b, '/endpoints/sparklines.json');
    expect(spark.body).toMatchObject({ range: '24h', step_seconds: 900 });
    expect(spark.body.series[e1.id]).toHaveLength(96);
    expect(spark.body.series[e1.id].at(-1) + spark.body.series[e1.id].at(-2)).toBeGreaterThanOrEqual(1);
    expect(spark.body.series[e2.id].every((n: number) => n === 0)).toBe(true);
  });

  it('the todos page: pending and created per queue, within its filters', async () => {
    const e = await vend(alice, 'listed', ['reviews']);
    await push(alice, e.slug, 'x');
    const b = await signedIn(alice);
    const page = (await b.get(`/todos?endpoint=${e.id}&state=pending&range=1h`)).text;
    expect(page).toContain(`data-chart="queues-pending" data-chart-src="/todos/history.json?endpoint=${e.id}&amp;range=1h"`);
    expect(page).toContain(`data-chart="queues-created" data-chart-src="/todos/history.json?endpoint=${e.id}&amp;range=1h"`);
    expect(page).toContain('<td data-key="reviews">1</td>');
    expect(page).toContain(`href="/todos?endpoint=${e.id}&amp;state=pending&amp;range=24h#charts"`);
    expect((await b.get('/todos?range=1w')).status).toBe(400);
  });

  it('serves uPlot from the same origin with immutable caching, and charts.js with no-cache', async () => {
    for (const [path, type] of [
      [`/static/${UPLOT_ASSET}`, /^text\/javascript/],
      [`/static/${UPLOT_CSS_ASSET}`, /^text\/css/],
    ] as const) {
      const r = await fetch(`${app.url}${path}`);
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type')).toMatch(type);
      expect(r.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect((await r.text()).length).toBeGreaterThan(1000);
    }
    const charts = await fetch(`${app.url}/static/charts.js`);
    expect(charts.headers.get('cache-control')).toBe('no-cache');
    expect(await charts.text()).toContain('window.switchboardCharts');
  });
});

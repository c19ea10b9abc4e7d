import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAgent, type Agent } from '../../test/support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { launchBoardBrowser, SHOTS, type BoardBrowser } from '../../test/support/chromium.ts';
import { vend, type Vended } from '../../test/support/fixtures.ts';
import type { App } from '../app.ts';
import { windowAt, type HistoryRange } from '../domain/history.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLoginLink } from '../store/web-sessions.ts';
import { expectedHistory, expectedOutcomes, expectedSpans, readRows, type Rows } from './charts.browser.testkit.ts';
import { fmtMs } from './views/charts.ts';

/**
 * The board's charts in Debian's Chromium (issue 39): a day of simulated traffic on the injected
 * clock (pushes, claims, finishes and a dead letter, doorbells heard by claim and by ack and
 * unheard, webhook deliveries routed, dropped and refused, a shift, a clock-out), the history
 * loop run as its minute loop would; then every chart page is opened, each chart screenshot to
 * test-results/board/charts-*.png, and each chart's drawn points and its no-JS table compared with
 * buckets computed here from the todos, doorbell_rings, events and presence_history rows and the
 * times the test saw deliveries refused. The
 * open chart redraws when the event stream says something changed; no CSP violation anywhere.
 */

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: App & { clock: ManualClock };
let browser: BoardBrowser;
let page: Page;
let human: { id: string; handle: string; token: string };
let api: ReturnType<typeof apiCaller>;
let e: Vended;
let agent: Agent;
let webhook: { webhook_id: string; ingest_url: string };
const clients: Client[] = [];
/** Every pass of the history loop, as the rows' depth is computed at each. */
const maintained: Date[] = [];
/** When each delivery the webhook refused was answered. */
const refusedAt: Date[] = [];

const DAY = '2026-03-02';
const at = (hhmm: string, day = DAY) => new Date(`${day}T${hhmm}:00Z`);

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock(at('06:00')));
  human = await humanWithToken(db.sql);
  api = apiCaller(app.url, human.token);
  browser = await launchBoardBrowser();
  page = browser.page;
  // Violations the page reports as events too (the console ones are in browser.cspViolations).
  await page.addInitScript(`window.sbCsp = []; document.addEventListener('securitypolicyviolation', (ev) => window.sbCsp.push(ev.violatedDirective + ' ' + ev.blockedURI));`);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app?.stop();
  await db?.drop();
});

const set = (hhmm: string, day = DAY) => app.clock.set(at(hhmm, day));
/** A pass of the background loops the charts read from: the unheard sweep, then the history loop. */
async function maintain(): Promise<void> {
  await app.services.acks.sweep();
  await app.services.history.maintain();
  await app.services.webhookRefusals.flush();
  maintained.push(app.clock.now());
}
async function pushTodo(title: string, queue: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title, queue, ...extra });
  expect(r.status, r.text).toBe(201);
  return r.json.id as string;
}
/** The todo's ring record, once written (null when none came within a second: the endpoint is out, or backing off). */
async function ringOf(todoId: string): Promise<string | null> {
  const deadline = Date.now() + 1000;
  for (;;) {
    const [row] = await db.sql<{ ring_id: string }[]>`select ring_id from doorbell_rings where todo_id = ${todoId} order by sent_at desc limit 1`;
    if (row) return row.ring_id;
    if (Date.now() > deadline) return null;
    await new Promise((r) => setTimeout(r, 20));
  }
}
/** `n` deliveries the webhook refuses (a body that is not JSON), each answered 400. */
async function refuse(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await fetch(webhook.ingest_url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"title": ' });
    expect(r.status).toBe(400);
    refusedAt.push(app.clock.now());
  }
}
async function deliver(id: string, event = 'build'): Promise<void> {
  const headers = { 'content-type': 'application/json', 'x-delivery-id': id, 'x-event-type': event };
  const r = await fetch(webhook.ingest_url, { method: 'POST', headers, body: JSON.stringify({ title: `build ${id}` }) });
  expect(r.status).toBeLessThan(300);
}

interface Drawn {
  x: number[];
  series: Record<string, (number | string | null)[]>;
  shift?: { from: number; to: number }[];
}
/** Waits for the chart to be drawn (at least `renders` times) and answers what it drew. */
async function drawn(id: string, renders = 1): Promise<Drawn> {
  const plot = page.locator(`#chart-${id}-plot`);
  await expect.poll(async () => Number((await plot.getAttribute('data-chart-renders')) ?? 0), { timeout: 10_000 }).toBeGreaterThanOrEqual(renders);
  const viaRegistry = await page.evaluate((el) => (globalThis as unknown as { switchboardCharts: Record<string, { points: Drawn }> }).switchboardCharts[el]!.points, `chart-${id}-plot`);
  const viaAttribute = JSON.parse((await plot.getAttribute('data-points'))!) as Drawn;
  expect(viaRegistry).toEqual(viaAttribute);
  return viaAttribute;
}
/** The no-JS table of a chart: its rows by step start (ISO), each cell by its data-key. */
async function table(id: string): Promise<Map<string, Record<string, string>>> {
  const rows = await page.$$eval(`#chart-${id}-table tbody tr`, (trs) =>
    trs.map((tr) => ({
      t: tr.querySelector('th time')?.getAttribute('datetime') ?? '',
      cells: Object.fromEntries([...tr.querySelectorAll('td[data-key]')].map((td) => [td.getAttribute('data-key')!, td.textContent ?? ''])),
    })),
  );
  return new Map(rows.map((r) => [r.t, r.cells]));
}
const shot = async (id: string, name: string) => {
  await page.locator(`#chart-${id}`).scrollIntoViewIfNeeded();
  await page.locator(`#chart-${id}`).screenshot({ path: join(SHOTS, `charts-${name}.png`) });
};
const xOf = (from: Date, step: number, n: number) => Array.from({ length: n }, (_, i) => from.getTime() / 1000 + i * step);

let rows: Rows;

describe('charts on the board, in Chromium', { timeout: 120_000 }, () => {
  it('drives a day of traffic on the injected clock, with the history loop every half hour', async () => {
    e = await vend(api, { name: 'day-bot', queues: ['reviews', 'inbox'] });
    const made = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
    webhook = made.json;
    const rules = { rules: [{ name: 'drop noise', when: 'event == "noise"', action: { drop: true } }] };
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/webhooks/${webhook.webhook_id}/rules`, rules)).status).toBe(200);
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'TZ=UTC Mon-Fri 08:00-18:00' })).json).toMatchObject({ presence: 'out', source: 'shift' });
    agent = await connectAgent(app, e, { track: clients });
    await maintain();

    // Off shift: held, no doorbell.
    set('06:30');
    const morning = [await pushTodo('nightly 1', 'reviews', { max_attempts: 1 }), await pushTodo('nightly 2', 'reviews'), await pushTodo('nightly 3', 'inbox')];
    set('07:00');
    await maintain();
    // The shift starts: in, and the held todos are announced.
    set('08:00');
    await app.services.presence.evaluate();
    set('08:10');
    await maintain();
    set('08:30');
    expect(await agent.call('claim', { id: morning[0] })).toMatchObject({ state: 'claimed' });
    expect(await agent.call('fail', { id: morning[0], result: { why: 'flaky' } })).toMatchObject({ state: 'failed' });
    expect(await agent.call('claim', { id: morning[1] })).toMatchObject({ state: 'claimed' });
    set('08:50');
    expect(await agent.call('complete', { id: morning[1] })).toMatchObject({ state: 'done' });
    await maintain();

    for (const h of [9, 10, 11, 12, 13, 14, 15, 16, 17]) {
      const hh = String(h).padStart(2, '0');
      if (h === 12) {
        // Clocked out over lunch: the todo pushed meanwhile is held.
        set('12:00');
        expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out' })).json).toMatchObject({ presence: 'out', source: 'operator' });
        set('12:15');
        await pushTodo('over lunch', 'reviews');
        await deliver('lunch');
        set('12:40');
        await maintain();
        continue;
      }
      if (h === 13) {
        set('13:00');
        expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`)).json).toMatchObject({ presence: 'in', source: 'shift' });
      }
      // Heard by its claim.
      set(`${hh}:01`);
      const a = await pushTodo(`review ${h}`, 'reviews');
      await ringOf(a);
      set(`${hh}:03`);
      expect(await agent.call('claim', { id: a })).toMatchObject({ state: 'claimed' });
      set(`${hh}:08`);
      expect(await agent.call('complete', { id: a })).toMatchObject({ state: 'done' });
      // Heard by an ack (even hours), or left unheard (odd hours).
      set(`${hh}:10`);
      const b = await pushTodo(`inbox ${h}`, 'inbox');
      const ring = await ringOf(b);
      if (h % 2 === 0 && ring) {
        set(`${hh}:12`);
        await agent.call('ack_doorbell', { ring_id: ring });
      }
      set(`${hh}:20`);
      await maintain();
      set(`${hh}:27`);
      await app.services.acks.sweep();
      set(`${hh}:30`);
      await deliver(`d${h}`);
      if (h === 10 || h === 14) await deliver(`n${h}`, 'noise'); // dropped by the rule
      if (h === 11 || h === 15) await refuse(h === 11 ? 2 : 1); // not JSON: refused, 400
      if (h % 2 === 0) {
        set(`${hh}:40`);
        expect(await agent.call('claim', { id: b })).toMatchObject({ state: 'claimed' });
        set(`${hh}:45`);
        expect(await agent.call('complete', { id: b })).toMatchObject({ state: 'done' });
      }
      set(`${hh}:50`);
      await maintain();
    }

    // The shift ends: out; a todo in the evening is held.
    set('18:00');
    await app.services.presence.evaluate();
    set('18:20');
    await maintain();
    set('20:05');
    await pushTodo('evening', 'inbox');
    for (const hhmm of ['20:30', '22:00', '23:30']) {
      set(hhmm);
      await maintain();
    }
    set('00:30', '2026-03-03');
    await app.services.acks.sweep();
    await maintain();

    rows = await readRows(db.sql, e.id, webhook.webhook_id, refusedAt);
    // The day covers what the charts are for.
    const sum = (k: 'rings_sent' | 'heard_claim' | 'heard_ack' | 'unheard' | 'dead' | 'completed') =>
      expectedHistory(rows, windowAt('24h', app.clock.now()), maintained).reduce((a, p) => a + p[k], 0);
    expect(sum('rings_sent')).toBeGreaterThan(0);
    expect(sum('heard_claim')).toBeGreaterThan(0);
    expect(sum('heard_ack')).toBeGreaterThan(0);
    expect(sum('unheard')).toBeGreaterThan(0);
    expect(sum('dead')).toBe(1);
    expect(sum('completed')).toBeGreaterThan(5);
    expect(rows.presence.map((p) => `${p.to}:${p.source}`)).toEqual(expect.arrayContaining(['in:shift', 'out:operator', 'out:shift']));
    expect(new Set(rows.events.map((ev) => ev.outcome))).toEqual(new Set(['routed', 'dropped']));
    expect(rows.refused).toHaveLength(3);
  });

  it('signs in and draws the endpoint page’s charts over 24 h: each equals the rows’ buckets, and so does its table', async () => {
    const { token } = await createLoginLink(db.sql, human.handle, app.clock.now());
    await page.goto(`${app.url}/login/${token}`);
    await page.click('#confirm-login');
    await page.waitForURL(`${app.url}/`);
    await checkEndpointPage('24h');
  });

  it('and over 7 days, from the hourly rollup', async () => {
    await checkEndpointPage('7d');
  });

  it('draws the week’s presence band: the spans the presence_history rows make, the shift behind', async () => {
    await page.goto(`${app.url}/endpoints/${e.id}`);
    const band = await drawn('presence');
    const spans = expectedSpans(rows, e, app.clock.now());
    expect(band.x).toEqual(spans.map((s) => s.from / 1000));
    expect(band.series).toEqual({ to: spans.map((s) => s.to / 1000), presence: spans.map((s) => s.presence), source: spans.map((s) => s.source) });
    // Monday's shift, 08:00-18:00, behind (the week before has its own days).
    expect(band.shift).toContainEqual({ from: at('08:00').getTime() / 1000, to: at('18:00').getTime() / 1000 });
    const cells = await page.$$eval('#chart-presence-table tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(cells.map((c) => [c[2], c[3] === 'not kept' ? null : c[3]])).toEqual(spans.map((s) => [s.presence, s.source]));
    await shot('presence', 'endpoint-presence-7d');
  });

  it('draws a pending sparkline on the endpoint’s card', async () => {
    await page.goto(`${app.url}/`);
    const spark = await drawn(`spark-${e.id}`);
    const w = windowAt('24h', app.clock.now());
    expect(spark.x).toEqual(xOf(w.from, w.stepSeconds, w.points));
    expect(spark.series.pending).toEqual(expectedHistory(rows, w, maintained).map((p) => p.pending));
    await shot(`spark-${e.id}`, 'endpoints-sparkline');
  });

  it('draws pending and created per queue on the todos page', async () => {
    await page.goto(`${app.url}/todos`);
    const w = windowAt('24h', app.clock.now());
    for (const [id, field] of [
      ['queues-pending', 'pending'],
      ['queues-created', 'created'],
    ] as const) {
      const got = await drawn(id);
      expect(got.x).toEqual(xOf(w.from, w.stepSeconds, w.points));
      const tab = await table(id);
      for (const q of ['reviews', 'inbox']) {
        const want = expectedHistory(rows, w, maintained, q).map((p) => p[field]);
        expect(got.series[q], `${id} ${q}`).toEqual(want);
        want.forEach((v, i) => expect(tab.get(new Date((w.from.getTime() / 1000 + i * w.stepSeconds) * 1000).toISOString())?.[q] ?? '0', `${id} ${q} ${i}`).toBe(String(v)));
      }
      await shot(id, `todos-${id}`);
    }
  });

  it('draws the webhook’s deliveries by outcome on its rules page', async () => {
    await page.goto(`${app.url}/endpoints/${e.id}/webhooks/${webhook.webhook_id}/rules`);
    const got = await drawn('deliveries');
    const w = windowAt('24h', app.clock.now());
    const want = expectedOutcomes(rows, w);
    expect(got.series).toEqual(want);
    const tab = await table('deliveries');
    for (const [outcome, values] of Object.entries(want)) {
      values.forEach((v, i) => expect(tab.get(new Date((w.from.getTime() / 1000 + i * w.stepSeconds) * 1000).toISOString())?.[outcome] ?? '0').toBe(String(v)));
    }
    await shot('deliveries', 'webhook-deliveries');
  });

  it('redraws the open chart when the event stream says something changed', async () => {
    await page.goto(`${app.url}/endpoints/${e.id}`);
    const before = await drawn('throughput');
    const renders = Number(await page.getAttribute('#chart-throughput-plot', 'data-chart-renders'));
    await pushTodo('late push', 'reviews');
    // Another change's event may redraw first: wait for the redraw that shows the push.
    const last = (d: Drawn) => d.series.Created!.at(-1) as number;
    await expect.poll(async () => last(await drawn('throughput', renders + 1)), { timeout: 10_000 }).toBe(last(before) + 1);
    const after = await drawn('throughput', renders + 1);
    expect(last(after)).toBe(last(before) + 1);
    expect(after.series.Created!.slice(0, -1)).toEqual(before.series.Created!.slice(0, -1));
  });

  it('loaded with no CSP violation, and records what the endpoint page costs to load', async () => {
    expect(browser.cspViolations).toEqual([]);
    expect(await page.evaluate('window.sbCsp')).toEqual([]);
    // A fresh load of the endpoint page, the cache emptied: server time and bytes.
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.clearBrowserCache');
    await page.goto(`${app.url}/endpoints/${e.id}`);
    await drawn('depth');
    type Timing = { server_ms: number; bytes: number };
    const load = (await page.evaluate(`(() => {
      const t = (e) => ({ server_ms: Math.round(e.responseStart - e.requestStart), bytes: e.transferSize });
      const nav = performance.getEntriesByType('navigation')[0];
      return { html: t(nav), resources: performance.getEntriesByType('resource').map((r) => ({ name: new URL(r.name).pathname + new URL(r.name).search, ...t(r) })) };
    })()`)) as { html: Timing; resources: (Timing & { name: string })[] };
    const total = load.html.bytes + load.resources.reduce((a, r) => a + r.bytes, 0);
    // Server time, steadier than one navigation: the median of 20 requests each, with the page's cookie.
    const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const median = async (path: string) => {
      const ms: number[] = [];
      for (let i = 0; i < 20; i++) {
        const t0 = performance.now();
        const r = await fetch(`${app.url}${path}`, { headers: { cookie } });
        await r.arrayBuffer();
        expect(r.status).toBe(200);
        ms.push(performance.now() - t0);
      }
      return Math.round(ms.sort((x, y) => x - y)[10]! * 10) / 10;
    };
    const server_median_ms = {
      page: await median(`/endpoints/${e.id}`),
      history_json: await median(`/endpoints/${e.id}/history.json?range=24h`),
      history_json_7d: await median(`/endpoints/${e.id}/history.json?range=7d`),
      presence_json: await median(`/endpoints/${e.id}/presence.json`),
    };
    writeFileSync(join(SHOTS, 'charts-load.json'), `${JSON.stringify({ ...load, total_bytes: total, server_median_ms }, null, 2)}\n`);
    expect(load.resources.map((r) => r.name)).toEqual(expect.arrayContaining([expect.stringMatching(/^\/static\/uPlot-[\d.]+\.iife\.min\.js$/), `/endpoints/${e.id}/history.json?range=24h`]));
  });
});

/** Opens the endpoint page at `range` and checks depth, throughput, claim wait and doorbells, chart and table. */
async function checkEndpointPage(range: HistoryRange): Promise<void> {
  await page.goto(`${app.url}/endpoints/${e.id}${range === '24h' ? '' : `?range=${range}`}`);
  const w = windowAt(range, app.clock.now());
  const want = expectedHistory(rows, w, maintained);
  const x = xOf(w.from, w.stepSeconds, w.points);
  const charts = {
    depth: { Pending: 'pending', Claimed: 'claimed_depth' },
    throughput: { Created: 'created', Claimed: 'claimed', Done: 'completed', Failed: 'failed', 'Dead letters': 'dead' },
    wait: { p50: 'wait_p50_ms', p95: 'wait_p95_ms' },
    rings: { Sent: 'rings_sent', Heard: 'heard', Unheard: 'unheard', Digests: 'digests' },
  } as const;
  for (const [id, series] of Object.entries(charts)) {
    const got = await drawn(id);
    expect(got.x, id).toEqual(x);
    for (const [label, key] of Object.entries(series)) expect(got.series[label], `${range} ${id} ${label}`).toEqual(want.map((p) => p[key as keyof typeof p]));
    // The table: a row for every step with something, the same numbers.
    const tab = await table(id);
    const keys = id === 'rings' ? ['rings_sent', 'heard_claim', 'heard_ack', 'unheard', 'digests'] : Object.values(series);
    const busy = want.filter((p) => keys.some((k) => (p[k as keyof typeof p] ?? 0) !== 0));
    expect([...tab.keys()], `${range} ${id} rows`).toEqual(busy.map((p) => p.t));
    for (const p of busy) {
      for (const k of keys) {
        const v = p[k as keyof typeof p] as number | null;
        expect(tab.get(p.t)![k], `${range} ${id} ${p.t} ${k}`).toBe(id === 'wait' ? fmtMs(v) : String(v));
      }
    }
    await shot(id, `endpoint-${id}-${range}`);
  }
  if (range === '24h') await browser.shot('charts-endpoint-page-24h');
}

import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/lib/clock.ts';
import { waitQuantileMs, waitBin, WAIT_BINS } from '../src/domain/history.ts';
import { connectAgent, until } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './support/app.ts';
import { vend, type TestApp } from './support/fixtures.ts';

// Queue history (issue 39): two instances on one database, a clock the test moves; each point the
// API answers is compared with what the todos and ring rows themselves say.

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let apps: TestApp[];
const clock = new ManualClock('2026-03-02T10:00:10Z');
const clients: Client[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  apps = [await startTestApp(db.url, clock), await startTestApp(db.url, clock)];
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await Promise.all((apps ?? []).map((a) => a.stop()));
  await db?.drop();
});

type Point = Record<string, number | string | null>;
const at = (iso: string) => new Date(iso).getTime();

describe('GET /api/v1/endpoints/{ref}/history', () => {
  it('counts pushes through both instances, claims with their wait, finishes, dead letters, depth and rings, as the rows say', async () => {
    const owner = await humanWithToken(db.sql);
    const [a, b] = apps.map((app) => apiCaller(app.url, owner.token));
    const e = await vend(a!, { name: 'charted', queues: ['reviews', 'inbox'] });
    const agent = await connectAgent(apps[0]!, e, { track: clients });
    for (let i = 0; i < 3; i++) expect((await a!('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: `r${i}`, queue: 'reviews', max_attempts: 1 })).status).toBe(201);
    for (let i = 0; i < 2; i++) expect((await b!('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: `i${i}`, queue: 'inbox' })).status).toBe(201);
    await until(async () => (await db.sql`select count(*)::int as n from doorbell_rings where endpoint_id = ${e.id}`)[0]!.n >= 1, 'a ring recorded');

    clock.set(new Date('2026-03-02T10:03:30Z'));
    const first = await agent.call('claim_next', { queue: 'reviews' });
    const second = await agent.call('claim_next', { queue: 'reviews' });
    expect(await agent.call('complete', { id: first.todo.id })).toMatchObject({ state: 'done' });
    expect(await agent.call('fail', { id: second.todo.id, result: { why: 'no' } })).toMatchObject({ state: 'failed' });

    clock.set(new Date('2026-03-02T10:05:05Z'));
    await apps[1]!.services.history.maintain();
    const res = await a!('GET', `/api/v1/endpoints/${e.slug}/history?range=1h`);
    expect(res.status, res.text).toBe(200);
    const view = res.json as { step_seconds: number; points: Point[] };
    expect(view.step_seconds).toBe(60);
    expect(view.points).toHaveLength(60);
    const point = (iso: string) => view.points.find((p) => p.t === new Date(iso).toISOString())!;

    // From the rows themselves.
    const todos = await db.sql<{ created_at: Date; claimed_at: Date | null; state: string; next_retry_at: Date | null; updated_at: Date }[]>`
      select created_at, claimed_at, state, next_retry_at, updated_at from todos where endpoint_id = ${e.id} and not synthetic`;
    const rings = await db.sql<{ sent_at: Date; ack_via: string | null; kind: string }[]>`select sent_at, ack_via, kind from doorbell_rings where endpoint_id = ${e.id} and not synthetic`;
    const minute = (d: Date) => new Date(Math.floor(d.getTime() / 60_000) * 60_000).toISOString();
    const expected = (iso: string) => {
      const m = new Date(iso).toISOString();
      const claims = todos.filter((t) => t.claimed_at && minute(t.claimed_at) === m);
      const hist = new Array<number>(WAIT_BINS).fill(0);
      for (const t of claims) hist[waitBin(t.claimed_at!.getTime() - t.created_at.getTime())]!++;
      const sent = rings.filter((r) => minute(r.sent_at) === m && r.kind === 'todo');
      return {
        created: todos.filter((t) => minute(t.created_at) === m).length,
        claimed: claims.length,
        completed: todos.filter((t) => t.state === 'done' && minute(t.updated_at) === m).length,
        failed: todos.filter((t) => t.state === 'failed' && minute(t.updated_at) === m).length,
        dead: todos.filter((t) => t.state === 'failed' && t.next_retry_at === null && minute(t.updated_at) === m).length,
        wait_p50_ms: waitQuantileMs(hist, 0.5),
        wait_p95_ms: waitQuantileMs(hist, 0.95),
        rings_sent: sent.length,
        heard_claim: sent.filter((r) => r.ack_via === 'claim').length,
      };
    };
    for (const iso of ['2026-03-02T10:00:00Z', '2026-03-02T10:03:00Z']) expect(point(iso), iso).toMatchObject(expected(iso));
    expect(point('2026-03-02T10:00:00Z')).toMatchObject({ created: 5 });
    expect(point('2026-03-02T10:03:00Z')).toMatchObject({ claimed: 2, completed: 1, failed: 1, dead: 1 });
    // Waits of 3 min 20 s fall in the bin bounded by 100 ms * 1.5^k just above them.
    expect(point('2026-03-02T10:03:00Z').wait_p95_ms).toBeGreaterThanOrEqual(200_000);
    // Depth at the end of 10:04 (the snapshot at 10:05:05): one reviews and two inbox todos pending.
    expect(point('2026-03-02T10:04:00Z')).toMatchObject({ pending: 3, claimed_depth: 0 });
    // A queue alone.
    const inbox = (await a!('GET', `/api/v1/endpoints/${e.slug}/history?range=1h&queue=inbox`)).json as { points: Point[] };
    expect(inbox.points.find((p) => p.t === new Date('2026-03-02T10:00:00Z').toISOString())).toMatchObject({ created: 2, claimed: 0 });

    // The week view reads the hourly rollup, which agrees with the minutes.
    const week = (await b!('GET', `/api/v1/endpoints/${e.slug}/history?range=7d`)).json as { step_seconds: number; points: Point[] };
    expect(week.step_seconds).toBe(3600);
    expect(week.points.find((p) => p.t === new Date('2026-03-02T10:00:00Z').toISOString())).toMatchObject({ created: 5, claimed: 2, completed: 1, failed: 1, dead: 1, pending: 3 });

    // Minutes go after 48 hours, hours stay.
    clock.set(new Date('2026-03-04T11:00:00Z'));
    await apps[0]!.services.history.maintain();
    const [kept] = await db.sql`select count(*) filter (where width = 'm')::int as minutes, count(*) filter (where width = 'h')::int as hours from todo_history where endpoint_id = ${e.id} and bucket < ${new Date('2026-03-02T11:00:00Z')}`;
    expect(kept).toEqual({ minutes: 0, hours: 2 });
    expect(at(week.points[0]!.t as string)).toBeLessThan(at('2026-03-02T10:00:00Z'));
  });

  it('refuses an unknown range naming the field, and another human\'s endpoint as not found', async () => {
    const owner = await humanWithToken(db.sql);
    const other = await humanWithToken(db.sql);
    const e = await vend(apiCaller(apps[0]!.url, owner.token), { name: 'private' });
    const bad = await apiCaller(apps[0]!.url, owner.token)('GET', `/api/v1/endpoints/${e.slug}/history?range=1y`);
    expect(bad.status).toBe(400);
    expect(bad.json.error).toContain('range');
    expect((await apiCaller(apps[0]!.url, other.token)('GET', `/api/v1/endpoints/${e.slug}/history`)).status).toBe(404);
  });

  it('answers the minutes the loop has not folded yet as it answers them once folded: counts, wait and depth', async () => {
    const owner = await humanWithToken(db.sql);
    const api = apiCaller(apps[0]!.url, owner.token);
    const e = await vend(api, { name: 'unfolded', queues: ['reviews'] });
    clock.set(new Date('2026-03-12T08:00:05Z'));
    for (let i = 0; i < 3; i++) expect((await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: `u${i}`, queue: 'reviews' })).status).toBe(201);
    clock.set(new Date('2026-03-12T08:01:40Z'));
    const agent = await connectAgent(apps[1]!, e, { track: clients });
    const claimed = await agent.call('claim_next', { queue: 'reviews' });
    expect(await agent.call('complete', { id: claimed.todo.id })).toMatchObject({ state: 'done' });
    await agent.call('claim_next', { queue: 'reviews' });
    const read = async () => {
      const view = (await api('GET', `/api/v1/endpoints/${e.slug}/history?range=1h`)).json as { points: Point[] };
      const pick = (iso: string) => view.points.find((p) => p.t === new Date(iso).toISOString());
      return { first: pick('2026-03-12T08:00:00Z'), second: pick('2026-03-12T08:01:00Z') };
    };
    const before = await read();
    expect(await db.sql`select count(*)::int as n from todo_history where endpoint_id = ${e.id}`).toEqual([{ n: 0 }]);
    expect(before.first).toMatchObject({ created: 3, pending: 3, claimed_depth: 0 });
    expect(before.second).toMatchObject({ claimed: 2, completed: 1, pending: 1, claimed_depth: 1 });
    expect(before.second!.wait_p50_ms).toBeGreaterThanOrEqual(90_000);

    clock.set(new Date('2026-03-12T08:02:10Z'));
    await apps[0]!.services.history.maintain();
    expect(await db.sql`select count(*)::int as n from todo_history_delta where endpoint_id = ${e.id}`).toEqual([{ n: 0 }]);
    expect(await db.sql`select pending, claimed from todo_depth where endpoint_id = ${e.id}`).toEqual([{ pending: 1, claimed: 1 }]);
    expect(await read()).toEqual(before);
  });

  it('refuses to move a todo to another queue or endpoint, which the depth history could not follow', async () => {
    const owner = await humanWithToken(db.sql);
    const api = apiCaller(apps[0]!.url, owner.token);
    const e = await vend(api, { name: 'stays', queues: ['reviews', 'inbox'] });
    const pushed = (await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: 'here', queue: 'reviews' })).json as { id: string };
    await expect(db.sql`update todos set queue = 'inbox' where id = ${pushed.id}`).rejects.toMatchObject({ code: '23514' });
    expect(await db.sql`select queue from todos where id = ${pushed.id}`).toEqual([{ queue: 'reviews' }]);
    // Setting them to what they are changes nothing and passes.
    await db.sql`update todos set queue = queue, endpoint_id = endpoint_id where id = ${pushed.id}`;
  });

  it('a ring marked unheard hours after it was sent lands in its own hour of the week view', async () => {
    const owner = await humanWithToken(db.sql);
    const api = apiCaller(apps[0]!.url, owner.token);
    const e = await vend(api, { name: 'late-unheard', queues: ['reviews'] });
    clock.set(new Date('2026-03-10T09:10:00Z'));
    const sentAt = new Date('2026-03-10T09:10:00Z');
    await db.sql`insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, queue, window_seconds, sent_at)
      values ('rg_01HZZZZZZZZZZZZZZZZZZZZZZZ', ${e.id}, 's', 'td_x', 'todo', 'reviews', 21600, ${sentAt})`;
    clock.set(new Date('2026-03-10T09:30:00Z'));
    await apps[0]!.services.history.maintain();
    // Five hours later (a 6 h ack window) the ring is found unheard: its own 09:00 hour must say so.
    clock.set(new Date('2026-03-10T14:40:00Z'));
    await db.sql`update doorbell_rings set unheard_at = ${clock.now()} where ring_id = 'rg_01HZZZZZZZZZZZZZZZZZZZZZZZ'`;
    await apps[0]!.services.history.maintain();
    const week = (await api('GET', `/api/v1/endpoints/${e.slug}/history?range=7d`)).json as { points: Point[] };
    expect(week.points.find((p) => p.t === new Date('2026-03-10T09:00:00Z').toISOString())).toMatchObject({ rings_sent: 1, unheard: 1 });
  });
});

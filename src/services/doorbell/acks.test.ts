import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Writable } from 'node:stream';
import type { Counter } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../../test/support/app.ts';
import type { App } from '../../app.ts';
import { ManualClock } from '../../lib/clock.ts';
import { createLogger } from '../../lib/log.ts';
import { insertEventAndTodo } from '../../store/todos/index.ts';
import { connectAgent, settle, until, type Agent, type Notification, type Vended } from '../../../test/support/agents.ts';

/**
 * Doorbell acknowledgement end to end (SPEC-0025 REQ-1 to REQ-6, REQ-11, REQ-12): ring records,
 * acknowledgement by claim and by ack_doorbell, the unheard sweep across instances, the per-session
 * unheard mark and the /metrics scrape. Real PostgreSQL, SDK clients over HTTP, time moved by hand.
 */

type TestApp = App & { clock: ManualClock };

interface RingRow {
  ring_id: string;
  endpoint_id: string;
  session_id: string;
  todo_id: string | null;
  kind: string;
  queue: string | null;
  synthetic: boolean;
  window_seconds: number;
  sent_at: Date;
  acked_at: Date | null;
  ack_via: string | null;
  acked_session_id: string | null;
  unheard_at: Date | null;
}

const WINDOW_MS = 15 * 60_000;
const METRICS_TOKEN = 'm'.repeat(40);

/** A logger whose JSON lines land in `lines`. */
function capturingLogger() {
  const lines: Record<string, any>[] = [];
  const log = createLogger(
    'info',
    new Writable({
      write: (chunk, _enc, done) => {
        for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l));
        done();
      },
    }),
  );
  return { log, lines };
}

/**
 * Counts creation and wakeup rings per todo on an app. A push rings once from its own request and
 * once more from its todo_ready echo (gated); tests wait for both before moving the clock, or a
 * late echo would find its gate expired and ring again.
 */
const readyCalls = new WeakMap<App, Map<string, number>>();
function instrument<T extends App>(a: T): T {
  const calls = new Map<string, number>();
  readyCalls.set(a, calls);
  const original = a.doorbell.ringReady.bind(a.doorbell);
  a.doorbell.ringReady = (todo) => {
    calls.set(todo.id, (calls.get(todo.id) ?? 0) + 1);
    return original(todo);
  };
  return a;
}
const echoed = (a: App, todoId: string) => until(() => (readyCalls.get(a)?.get(todoId) ?? 0) >= 2, 'the todo_ready echo');

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let logs: Record<string, any>[];
let human: { token: string };
let api: ReturnType<typeof apiCaller>;
const clients: Client[] = [];
const agent = (e: Vended, on: App = app, name = 'claude-code'): Promise<Agent> => connectAgent(on, e, { name, track: clients });
const extraApps: TestApp[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  const captured = capturingLogger();
  logs = captured.lines;
  app = instrument(await startTestApp(db.url, new ManualClock('2026-09-22T08:00:00Z'), { log: captured.log }));
  human = await humanWithToken(db.sql);
  api = apiCaller(app.url, human.token);
});
beforeEach(async () => {
  // Refill the clock-driven rate limiters, and close every ring earlier tests left open so that an
  // unscoped sweep here counts only this test's rings.
  app.clock.advance(60_000);
  await db.sql`update doorbell_rings set acked_at = sent_at, ack_via = 'ack' where acked_at is null and unheard_at is null`;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await Promise.all(extraApps.map((a) => a.stop()));
  await app.stop();
  await db.drop();
});


async function vend(queues = ['reviews'], via = api): Promise<Vended> {
  const r = await via('POST', '/api/v1/endpoints', { name: 'agent', queues });
  expect(r.status).toBe(201);
  return r.json;
}

async function push(e: Vended, title: string, via = api, queue?: string): Promise<string> {
  const r = await via('POST', `/api/v1/endpoints/${e.slug}/todos`, { title, queue });
  expect(r.status).toBe(201);
  return r.json.id;
}



/** An SDK client on `on` whose doorbells land in `heard`; resolves once its stream is open. */

/** A session initialized over raw HTTP that never opens its notification stream. */
async function streamlessSession(e: Vended, on: App = app): Promise<string> {
  const res = await fetch(`${on.url}/mcp/${e.slug}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${e.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'claude-code', version: '2.1.0' } },
    }),
  });
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

const ringsOf = (todoId: string) => db.sql<RingRow[]>`select * from doorbell_rings where todo_id = ${todoId} order by sent_at`;
const ringsOfEndpoint = (endpointId: string) => db.sql<RingRow[]>`select * from doorbell_rings where endpoint_id = ${endpointId} order by sent_at, ring_id`;
const ringById = async (ringId: string) => (await db.sql<RingRow[]>`select * from doorbell_rings where ring_id = ${ringId}`)[0];
const todoRow = async (id: string) =>
  (await db.sql<{ state: string; owner: string | null; claimed_at: Date | null; claimed_session_id: string | null }[]>`
    select state, owner, claimed_at, claimed_session_id from todos where id = ${id}`)[0]!;

/** The value of one series of `on`'s registry (labels must match exactly). */
async function metric(on: App, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = on.metrics.registry.getSingleMetric(name) as Counter | undefined;
  if (!m) throw new Error(`no metric ${name}`);
  const { values } = await m.get();
  const want = Object.entries(labels);
  const v = values.find((x) => Object.keys(x.labels).length === want.length && want.every(([k, val]) => x.labels[k] === val));
  return v?.value ?? 0;
}

/** Every doorbell counter of one app, keyed like `name{label=value,...}`. */
async function doorbellCounters(on: App): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const name of ['switchboard_doorbell_rings_total', 'switchboard_doorbell_rings_acknowledged_total', 'switchboard_doorbell_rings_unheard_total']) {
    const { values } = await (on.metrics.registry.getSingleMetric(name) as Counter).get();
    for (const v of values) {
      const labels = Object.entries(v.labels)
        .sort()
        .map(([k, x]) => `${k}=${x}`)
        .join(',');
      out[`${name}{${labels}}`] = v.value;
    }
  }
  return out;
}

/** One doorbell rung to `a` (on `on`) for a fresh todo: the notification, and its ring record once stored. */
async function ringOne(e: Vended, a: Agent, title: string, via = api, on: App = app): Promise<{ todoId: string; note: Notification; ring: RingRow }> {
  const before = a.heard.length;
  const todoId = await push(e, title, via);
  await until(() => a.heard.length > before, `the doorbell for "${title}"`);
  const note = a.heard[a.heard.length - 1]!;
  expect(note.params.meta.todo_id).toBe(todoId);
  let ring: RingRow | undefined;
  await until(async () => (ring = await ringById(note.params.meta.ring_id!)) !== undefined, 'the ring record');
  await echoed(on, todoId);
  return { todoId, note, ring: ring! };
}

describe('ring records (REQ-1, REQ-2)', () => {
  it('a written todo doorbell creates exactly one ring whose id is the doorbell meta.ring_id', async () => {
    const e = await vend();
    const a = await agent(e);
    const ringsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' });
    const { todoId, note, ring } = await ringOne(e, a, 'review PR 7');
    expect(note.params.meta).toEqual({ todo_id: todoId, queue: 'reviews', todo_kind: 'operator', ring_id: expect.stringMatching(/^rg_[0-9A-HJKMNP-TV-Z]{26}$/) });
    for (const key of Object.keys(note.params.meta)) expect(key).toMatch(/^[a-z]+(_[a-z]+)*$/);
    // The claim instruction is still there.
    expect(note.params.content).toContain(`call claim with id "${todoId}"`);
    expect(ring).toEqual({
      ring_id: note.params.meta.ring_id,
      endpoint_id: e.id,
      session_id: a.sessionId,
      todo_id: todoId,
      kind: 'todo',
      queue: 'reviews',
      synthetic: false,
      window_seconds: 900,
      sent_at: app.clock.now(),
      acked_at: null,
      ack_via: null,
      acked_session_id: null,
      unheard_at: null,
    });
    await settle();
    expect(await ringsOf(todoId)).toHaveLength(1);
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore + 1);
  });

  it('a failed write (no stream open) creates no ring and still counts toward the write-failure warning', async () => {
    const e = await vend();
    const sid = await streamlessSession(e);
    const ringsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' });
    const ids = [await push(e, 'one'), await push(e, 'two')];
    await settle();
    expect(logs.filter((l) => l.msg === 'doorbell undeliverable: consumer attached but receiving nothing' && l.session === sid)).toHaveLength(0);
    ids.push(await push(e, 'three'));
    await settle();
    for (const id of ids) expect(await ringsOf(id)).toEqual([]);
    expect(await ringsOfEndpoint(e.id)).toEqual([]);
    const warnings = logs.filter((l) => l.msg === 'doorbell undeliverable: consumer attached but receiving nothing' && l.session === sid);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, slug: e.slug, failures: 3, cause: 'no_stream' });
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore);
  });

  it('a digest ring has kind digest, no todo and no queue, and carries the digest meta.ring_id', async () => {
    const e = await vend(['reviews', 'inbox']);
    const a = await agent(e);
    await a.call('clock_out');
    await push(e, 'held while out', api, 'inbox');
    await settle();
    expect(a.heard).toEqual([]);
    const digestsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'digest' });
    await a.call('clock_in');
    await until(() => a.heard.length === 1, 'the digest');
    const meta = a.heard[0]!.params.meta;
    expect(meta).toMatchObject({ kind: 'digest', reason: 'clock_in', ring_id: expect.stringMatching(/^rg_/) });
    let ring: RingRow | undefined;
    await until(async () => (ring = await ringById(meta.ring_id!)) !== undefined, 'the digest ring');
    expect(ring).toMatchObject({ kind: 'digest', todo_id: null, queue: null, synthetic: false, session_id: a.sessionId, endpoint_id: e.id, acked_at: null, unheard_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'digest' })).toBe(digestsBefore + 1);
  });

  it('a ring that cannot be recorded still delivers its doorbell, and is logged and counted (REQ-11)', async () => {
    const e = await vend();
    const a = await agent(e);
    const errorsBefore = await metric(app, 'switchboard_metrics_collection_errors_total', { collector: 'doorbell_rings' });
    const ringsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' });
    // Every insert into doorbell_rings now fails, in this test's own database only.
    await db.sql`alter table doorbell_rings add constraint test_ring_store_down check (false) not valid`;
    let todoId: string;
    try {
      todoId = await push(e, 'rung while the ring store is down');
      await until(() => a.heard.length === 1, 'the doorbell');
      await until(
        async () => (await metric(app, 'switchboard_metrics_collection_errors_total', { collector: 'doorbell_rings' })) === errorsBefore + 1,
        'the collection error',
      );
    } finally {
      await db.sql`alter table doorbell_rings drop constraint test_ring_store_down`;
    }
    const meta = a.heard[0]!.params.meta;
    expect(meta).toMatchObject({ todo_id: todoId, ring_id: expect.stringMatching(/^rg_/) });
    expect(await ringsOf(todoId)).toEqual([]);
    const logged = logs.filter((l) => l.msg === 'could not record a doorbell ring' && l.todo_id === todoId);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 50, stage: 'ring record', slug: e.slug, ring_id: meta.ring_id, err: expect.stringMatching(/test_ring_store_down/) });
    // The pump is unaffected: the next doorbell is recorded as usual.
    app.clock.advance(1000);
    const next = await ringOne(e, a, 'after the store is back');
    expect(next.ring.kind).toBe('todo');
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore + 2);
  });
});

describe('acknowledgement (REQ-3)', () => {
  it("a claim by another session acknowledges the ring in the claim's own transaction", async () => {
    const e = await vend();
    const s = await agent(e);
    const { todoId, ring } = await ringOne(e, s, 'rung to S');
    const t = await agent(e, app, 'worker');
    const ackedBefore = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' });

    // While acknowledging is impossible, the claim cannot take the lease either: they commit together.
    await db.sql`alter table doorbell_rings add constraint test_no_claim_acks check (ack_via is distinct from 'claim') not valid`;
    try {
      expect((await t.call('claim', { id: todoId })).error).toMatch(/^internal: /);
    } finally {
      await db.sql`alter table doorbell_rings drop constraint test_no_claim_acks`;
    }
    expect(await todoRow(todoId)).toMatchObject({ state: 'pending', owner: null, claimed_at: null });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: null, ack_via: null });

    app.clock.advance(5000);
    const claimed = await t.call('claim', { id: todoId });
    expect(claimed).toMatchObject({ id: todoId, state: 'claimed' });
    const row = await todoRow(todoId);
    expect(row).toMatchObject({ state: 'claimed', claimed_at: app.clock.now(), claimed_session_id: t.sessionId });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: app.clock.now(), ack_via: 'claim', acked_session_id: t.sessionId, unheard_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' })).toBe(ackedBefore + 1);
  });

  it('claim_next acknowledges every open ring of the todo it takes, and only that todo', async () => {
    const e = await vend();
    const a = await agent(e);
    const first = await ringOne(e, a, 'first');
    app.clock.advance(1000);
    const second = await ringOne(e, a, 'second');
    // A second ring of the same todo (the heartbeat sweep's re-ring).
    const again = app.doorbell.ring({ id: first.todoId, endpoint_id: e.id, queue: 'reviews', title: 'first', kind: null });
    expect(again.rung).toBe(true);
    await until(async () => (await ringsOf(first.todoId)).length === 2, 'the re-ring record');
    app.clock.advance(1000);
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: first.todoId } });
    for (const r of await ringsOf(first.todoId)) expect(r).toMatchObject({ acked_at: app.clock.now(), ack_via: 'claim', acked_session_id: a.sessionId });
    expect(await ringById(second.ring.ring_id)).toMatchObject({ acked_at: null });
  });

  it('a digest ring is acknowledged by any claim after it was sent', async () => {
    const e = await vend();
    const a = await agent(e);
    await a.call('clock_out');
    const held = await push(e, 'held');
    await a.call('clock_in');
    await until(() => a.heard.length === 1, 'the digest');
    const ringId = a.heard[0]!.params.meta.ring_id!;
    await until(async () => (await ringById(ringId)) !== undefined, 'the digest ring');
    const t = await agent(e, app, 'worker');
    const before = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' });
    app.clock.advance(2000);
    expect(await t.call('claim', { id: held })).toMatchObject({ id: held, state: 'claimed' });
    expect(await ringById(ringId)).toMatchObject({ kind: 'digest', acked_at: app.clock.now(), ack_via: 'claim', acked_session_id: t.sessionId });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' })).toBe(before + 1);
  });

  it('ack_doorbell acknowledges without claiming, idempotently', async () => {
    const e = await vend();
    const a = await agent(e);
    const { todoId, ring } = await ringOne(e, a, 'busy worker');
    const before = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'ack' });
    app.clock.advance(3000);
    const ackedAt = app.clock.now();
    expect(await a.call('ack_doorbell', { ring_id: ring.ring_id })).toEqual({ ring_id: ring.ring_id, state: 'acknowledged' });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: ackedAt, ack_via: 'ack', acked_session_id: a.sessionId, unheard_at: null });
    expect(await todoRow(todoId)).toMatchObject({ state: 'pending', owner: null });
    app.clock.advance(3000);
    expect(await a.call('ack_doorbell', { ring_id: ring.ring_id })).toEqual({ ring_id: ring.ring_id, state: 'acknowledged' });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: ackedAt, ack_via: 'ack' });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'ack' })).toBe(before + 1);
    // A later claim of the todo changes nothing on the already acknowledged ring.
    expect(await a.call('claim', { id: todoId })).toMatchObject({ state: 'claimed' });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: ackedAt, ack_via: 'ack' });
  });

  it("another endpoint's ring and a missing one get the identical not_found; a malformed id is invalid_argument", async () => {
    const owner = await vend();
    const other = await vend();
    const a = await agent(owner);
    const b = await agent(other);
    const { ring } = await ringOne(owner, a, "A's work");
    const missing = 'rg_' + '7'.repeat(26);
    const foreign = await b.call('ack_doorbell', { ring_id: ring.ring_id });
    const unknown = await b.call('ack_doorbell', { ring_id: missing });
    expect(foreign.error).toMatch(/^not_found: /);
    expect(foreign.error.replace(ring.ring_id, '<ring>')).toBe(unknown.error.replace(missing, '<ring>'));
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: null, ack_via: null, acked_session_id: null });
    for (const bad of ['rg_short', 'td_' + '0'.repeat(26), 'rg_' + 'a'.repeat(26), "rg_' or 1=1 --"]) {
      expect((await b.call('ack_doorbell', { ring_id: bad })).error).toMatch(/^invalid_argument: ring_id/);
    }
    expect((await b.call('ack_doorbell', {})).error).toMatch(/^invalid_argument: ring_id/);
    expect((await b.call('ack_doorbell', { ring_id: ring.ring_id, endpoint: owner.slug })).error).toMatch(/^invalid_argument/);
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: null });
  });
});

describe('unheard rings (REQ-4, REQ-12)', () => {
  it('a ring nobody acts on by the end of its window is unheard at the next sweep, counted once; a late claim changes no state or counter', async () => {
    app.clock.set('2026-10-01T10:00:00Z');
    const e = await vend();
    const a = await agent(e);
    const { todoId, ring } = await ringOne(e, a, 'nobody acts');
    expect(ring.sent_at).toEqual(new Date('2026-10-01T10:00:00Z'));
    const unheardBefore = await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' });

    app.clock.set('2026-10-01T10:14:59Z');
    expect(await app.acks.sweep()).toBe(0);
    app.clock.set('2026-10-01T10:15:00Z');
    expect(await app.acks.sweep()).toBe(0);
    expect(await ringById(ring.ring_id)).toMatchObject({ unheard_at: null, acked_at: null });

    app.clock.set('2026-10-01T10:15:30Z');
    expect(await app.acks.sweep()).toBe(1);
    expect(await ringById(ring.ring_id)).toMatchObject({ unheard_at: new Date('2026-10-01T10:15:30Z'), acked_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(unheardBefore + 1);
    app.clock.set('2026-10-01T10:16:00Z');
    expect(await app.acks.sweep()).toBe(0);
    expect(await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(unheardBefore + 1);

    const counters = await doorbellCounters(app);
    app.clock.set('2026-10-01T10:20:00Z');
    expect(await a.call('claim', { id: todoId })).toMatchObject({ state: 'claimed' });
    expect(await ringById(ring.ring_id)).toMatchObject({
      acked_at: new Date('2026-10-01T10:20:00Z'),
      ack_via: 'claim',
      acked_session_id: a.sessionId,
      unheard_at: new Date('2026-10-01T10:15:30Z'),
    });
    expect(await doorbellCounters(app)).toEqual(counters);
    // A late ack_doorbell of an unheard ring answers its terminal state and moves nothing either.
    const late = await ringOne(e, a, 'late ack');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.acks.sweep()).toBe(1);
    const afterSweep = await doorbellCounters(app);
    expect(await a.call('ack_doorbell', { ring_id: late.ring.ring_id })).toEqual({ ring_id: late.ring.ring_id, state: 'unheard' });
    expect(await ringById(late.ring.ring_id)).toMatchObject({ ack_via: 'ack', acked_at: app.clock.now(), unheard_at: expect.any(Date) });
    expect(await doorbellCounters(app)).toEqual(afterSweep);
  });

  it('two instances sweeping the same expired rings: each ring is claimed by exactly one, counted once in total', async () => {
    const b = instrument(await startTestApp(db.url, new ManualClock(app.clock.now())));
    extraApps.push(b);
    const e = await vend();
    const a = await agent(e);
    const rings: RingRow[] = [];
    for (let i = 0; i < 5; i++) rings.push((await ringOne(e, a, `expiring ${i}`)).ring);
    const before = (await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })) + (await metric(b, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' }));
    app.clock.advance(WINDOW_MS + 1000);
    b.clock.set(app.clock.now());
    const [fromA, fromB] = await Promise.all([app.acks.sweep(), b.acks.sweep()]);
    expect(fromA + fromB).toBe(5);
    const after = (await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })) + (await metric(b, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' }));
    expect(after - before).toBe(5);
    for (const r of rings) expect((await ringById(r.ring_id))!.unheard_at).toEqual(app.clock.now());
    // Sweeping again, anywhere, changes nothing.
    expect(await Promise.all([app.acks.sweep(), b.acks.sweep()])).toEqual([0, 0]);
  });

  it('a claim racing the unheard sweep ends each ring in exactly one terminal state with exactly one counter increment', async () => {
    const e = await vend();
    const a = await agent(e);
    const before = await doorbellCounters(app);
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      app.clock.advance(60_000);
      const { todoId, ring } = await ringOne(e, a, `race ${i}`);
      app.clock.advance(WINDOW_MS + 1);
      const claim = () => a.call('claim', { id: todoId });
      const sweep = () => app.acks.sweep();
      const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
      // The claim travels over HTTP first; stagger the sweep across its flight so that each side wins some rounds.
      const [claimed] = await Promise.all([claim(), delay(i % 10).then(sweep)]);
      expect(claimed).toMatchObject({ id: todoId, state: 'claimed' });
      const r = (await ringById(ring.ring_id))!;
      expect(r.acked_at).toEqual(app.clock.now());
      expect(r.ack_via).toBe('claim');
      outcomes.push(r.unheard_at === null ? 'acknowledged' : 'unheard');
      // An unheard ring stays unheard; an acknowledged one is never swept afterwards.
      expect(await app.acks.sweep()).toBe(0);
    }
    const after = await doorbellCounters(app);
    const delta = (k: string) => after[k]! - (before[k] ?? 0);
    const acknowledged = outcomes.filter((o) => o === 'acknowledged').length;
    const unheard = outcomes.filter((o) => o === 'unheard').length;
    expect(acknowledged + unheard).toBe(20);
    expect(delta('switchboard_doorbell_rings_acknowledged_total{kind=todo,via=claim}')).toBe(acknowledged);
    expect(delta('switchboard_doorbell_rings_unheard_total{kind=todo}')).toBe(unheard);
    expect(delta('switchboard_doorbell_rings_total{kind=todo}')).toBe(20);
    for (const [k, v] of Object.entries(after)) {
      if (!/acknowledged_total\{kind=todo,via=claim\}|unheard_total\{kind=todo\}|rings_total\{kind=todo\}/.test(k)) expect(v, k).toBe(before[k]);
    }
  });

  it('SWITCHBOARD_DOORBELL_ACK_WINDOW sets the window of the rings an instance sends', async () => {
    const w = instrument(await startTestApp(db.url, new ManualClock(app.clock.now()), { env: { SWITCHBOARD_DOORBELL_ACK_WINDOW: '1m' } }));
    extraApps.push(w);
    const viaW = apiCaller(w.url, human.token);
    const e = await vend(['reviews'], viaW);
    const a = await agent(e, w);
    const { ring } = await ringOne(e, a, 'one-minute window', viaW, w);
    expect(ring.window_seconds).toBe(60);
    w.clock.advance(60_000);
    expect(await w.acks.sweep()).toBe(0);
    w.clock.advance(1000);
    expect(await w.acks.sweep()).toBe(1);
    expect(await ringById(ring.ring_id)).toMatchObject({ unheard_at: w.clock.now() });
    expect(await metric(w, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(1);
    expect(await ringsOfEndpoint(e.id)).toHaveLength(1);
    await w.stop();
  });
});

describe('per-session unheard detection (REQ-5)', () => {
  it('a session whose last 3 rings went unheard is marked once, listed, gauged, and cleared by an ack', async () => {
    const captured = capturingLogger();
    const u = instrument(await startTestApp(db.url, new ManualClock(app.clock.now()), { log: captured.log }));
    extraApps.push(u);
    const viaU = apiCaller(u.url, human.token);
    const e = await vend(['reviews'], viaU);
    const a = await agent(e, u);
    const rings: RingRow[] = [];
    for (let i = 0; i < 3; i++) {
      u.clock.advance(1000);
      rings.push((await ringOne(e, a, `ignored ${i}`, viaU, u)).ring);
    }
    const session = () => u.sessions.all().find((s) => s.id === a.sessionId)!;
    const marks = () => captured.lines.filter((l) => l.msg === 'session marked unheard: its last 3 doorbells reached it but nothing acted on them');
    const listed = async () => (await viaU('GET', '/api/v1/endpoints')).json.find((x: { slug: string }) => x.slug === e.slug);
    expect(await listed()).toMatchObject({ sessions: 1, unheard_sessions: 0 });

    // Two unheard is not yet a mark.
    u.clock.advance(WINDOW_MS - 500);
    expect(await u.acks.sweep()).toBe(2);
    expect(session().unheard).toBe(false);
    u.clock.advance(1000);
    expect(await u.acks.sweep()).toBe(1);
    expect(session().unheard).toBe(true);
    expect(marks()).toHaveLength(1);
    expect(marks()[0]).toMatchObject({ level: 40, slug: e.slug, session: a.sessionId, client: { name: 'claude-code', version: '2.1.0' } });
    expect(await listed()).toMatchObject({ sessions: 1, unheard_sessions: 1 });
    expect(await metric(u, 'switchboard_doorbell_unheard_sessions')).toBe(1);
    // One warning per marking, however often the sweep runs.
    u.clock.advance(30_000);
    await u.acks.sweep();
    expect(marks()).toHaveLength(1);

    // Any acknowledgement clears the mark, and the sweep does not put it back.
    expect(await a.call('ack_doorbell', { ring_id: rings[0]!.ring_id })).toEqual({ ring_id: rings[0]!.ring_id, state: 'unheard' });
    expect(session().unheard).toBe(false);
    expect(await listed()).toMatchObject({ unheard_sessions: 0 });
    expect(await metric(u, 'switchboard_doorbell_unheard_sessions')).toBe(0);
    u.clock.advance(30_000);
    await u.acks.sweep();
    expect(session().unheard).toBe(false);
    expect(marks()).toHaveLength(1);
  });

  it('a busy worker with two unheard rings that claims any todo is not marked by the third', async () => {
    const e = await vend();
    const a = await agent(e);
    const session = () => app.sessions.all().find((s) => s.id === a.sessionId)!;
    // A todo that never rings (its delivery was not verified): claiming it acknowledges no ring.
    const quiet = await insertEventAndTodo(
      db.sql,
      { source: 'github', family: 'webhook', trustMode: 'signed', verified: false },
      { endpointId: e.id, queue: 'reviews', title: 'never rung' },
      app.clock.now(),
    );
    for (let i = 0; i < 2; i++) {
      app.clock.advance(1000);
      await ringOne(e, a, `ignored ${i}`);
    }
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.acks.sweep()).toBe(2);
    app.clock.advance(1000);
    expect(await a.call('claim', { id: quiet.todo.id })).toMatchObject({ id: quiet.todo.id, state: 'claimed' });
    app.clock.advance(1000);
    await ringOne(e, a, 'ignored 2');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.acks.sweep()).toBe(1);
    expect(session().unheard).toBe(false);
    expect(logs.filter((l) => l.msg?.startsWith('session marked unheard') && l.session === a.sessionId)).toEqual([]);
    // Three more unheard rings after that claim do mark it.
    for (let i = 3; i < 6; i++) {
      app.clock.advance(1000);
      await ringOne(e, a, `ignored ${i}`);
    }
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.acks.sweep()).toBe(3);
    expect(session().unheard).toBe(true);
  });

  it('a session that claims a rung todo late is not marked by its next unheard rings', async () => {
    const e = await vend();
    const a = await agent(e);
    const session = () => app.sessions.all().find((s) => s.id === a.sessionId)!;
    const first = await ringOne(e, a, 'first');
    app.clock.advance(1000);
    await ringOne(e, a, 'second');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.acks.sweep()).toBe(2);
    expect(await a.call('claim_next')).toMatchObject({ todo: { id: first.todoId } });
    app.clock.advance(1000);
    await ringOne(e, a, 'third');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.acks.sweep()).toBe(1);
    expect(session().unheard).toBe(false);
  });
});

describe('GET /metrics (REQ-6)', () => {
  let m: TestApp;
  const scrape = (token?: string, on: App = m) =>
    fetch(`${on.url}/metrics`, { headers: token === undefined ? {} : { authorization: token } }).then(async (r) => ({ status: r.status, body: await r.text(), headers: r.headers }));

  beforeAll(async () => {
    m = instrument(await startTestApp(db.url, new ManualClock(app.clock.now()), { env: { SWITCHBOARD_METRICS_TOKEN: METRICS_TOKEN } }));
    extraApps.push(m);
  });

  it('the first scrape has every doorbell series, and each collection-error series at 0', async () => {
    const r = await scrape(`Bearer ${METRICS_TOKEN}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    for (const line of [
      'switchboard_metrics_collection_errors_total{collector="doorbell_rings"} 0',
      'switchboard_metrics_collection_errors_total{collector="queue"} 0',
      'switchboard_doorbell_rings_total{kind="todo"} 0',
      'switchboard_doorbell_rings_total{kind="digest"} 0',
      'switchboard_doorbell_rings_acknowledged_total{kind="todo",via="claim"} 0',
      'switchboard_doorbell_rings_acknowledged_total{kind="digest",via="ack"} 0',
      'switchboard_doorbell_rings_unheard_total{kind="todo"} 0',
      'switchboard_doorbell_rings_unheard_total{kind="digest"} 0',
      'switchboard_doorbell_unheard_sessions 0',
    ]) {
      expect(r.body.split('\n')).toContain(line);
    }
    for (const type of ['# TYPE switchboard_doorbell_rings_total counter', '# TYPE switchboard_doorbell_unheard_sessions gauge', '# TYPE switchboard_doorbell_rings_unheard_total counter']) {
      expect(r.body).toContain(type);
    }
  });

  it('answers the same empty 401 without a token, with a wrong one, and when no token is configured', async () => {
    const refusals = [
      await scrape(undefined),
      await scrape(`Bearer ${'x'.repeat(40)}`),
      await scrape(`Bearer ${METRICS_TOKEN}x`),
      await scrape(`Basic ${METRICS_TOKEN}`),
      await scrape(`Bearer ${METRICS_TOKEN}`, app),
      await scrape('Bearer ', app),
    ];
    for (const r of refusals) {
      expect(r.status).toBe(401);
      expect(r.body).toBe('');
    }
  });

  it('names no endpoint, session, ring, todo or slug, whatever rang', async () => {
    const viaM = apiCaller(m.url, human.token);
    const e = await vend(['reviews'], viaM);
    const a = await agent(e, m);
    const acked = await ringOne(e, a, 'acked', viaM, m);
    await a.call('ack_doorbell', { ring_id: acked.ring.ring_id });
    m.clock.advance(1000);
    const claimed = await ringOne(e, a, 'claimed', viaM, m);
    await a.call('claim', { id: claimed.todoId });
    m.clock.advance(1000);
    const ignored = await ringOne(e, a, 'ignored', viaM, m);
    m.clock.advance(WINDOW_MS + 1000);
    await m.acks.sweep();
    const r = await scrape(`Bearer ${METRICS_TOKEN}`);
    expect(r.status).toBe(200);
    expect(r.body).toContain('switchboard_doorbell_rings_total{kind="todo"} 3');
    expect(r.body).toContain('switchboard_doorbell_rings_acknowledged_total{kind="todo",via="ack"} 1');
    expect(r.body).toContain('switchboard_doorbell_rings_acknowledged_total{kind="todo",via="claim"} 1');
    expect(r.body).toContain('switchboard_doorbell_rings_unheard_total{kind="todo"} 1');
    const identifiers = [e.id, e.slug, a.sessionId, ...[acked, claimed, ignored].flatMap((x) => [x.todoId, x.ring.ring_id])];
    const [agentRow] = await db.sql`select agent_id::text as agent_id from endpoints where id = ${e.id}`;
    identifiers.push(agentRow!.agent_id);
    for (const id of identifiers) expect(r.body).not.toContain(id);
    expect(r.body).not.toMatch(/rg_[0-9A-Z]{26}|td_[0-9a-f-]{36}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/);
    for (const line of r.body.split('\n').filter((l) => l.startsWith('switchboard_doorbell_'))) {
      expect(line).toMatch(/^switchboard_doorbell_[a-z_]+(\{(kind|via)="[a-z]+"(,via="[a-z]+")?\})? \d+$/);
    }
  });
});

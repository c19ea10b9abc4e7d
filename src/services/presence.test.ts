import { beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, startTestApp } from '../../test/support/app.ts';
import { push as pushVia, vend as vendVia, withApp, type Api, type TestDb } from '../../test/support/fixtures.ts';
import type { App } from '../app.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLogger } from '../lib/log.ts';
import { sweepOnce } from './maintenance/doorbell-sweep.ts';
import { connectAgent, settle, until, type Agent, type Vended } from '../../test/support/agents.ts';
import { capturingLogger } from '../../test/support/doorbell-acks.ts';

/** Presence end to end (SPEC-0022): SDK clients, two instances on one database, a fake clock. */

type TestApp = App & { clock: ManualClock };

const MONDAY_0800 = '2026-09-21T08:00:00Z';
const fixture = withApp({ clock: new ManualClock(MONDAY_0800) });
let db: TestDb;
let app: TestApp;
let api: Api;
const clients = fixture.clients;
const agent = (e: Vended, on: App = app, name = 'claude-code'): Promise<Agent> => connectAgent(on, e, { name, track: clients });
beforeAll(() => void ({ db, app, api } = fixture));


async function vend(body: Record<string, unknown> = {}): Promise<Vended> {
  app.clock.advance(1000);
  return vendVia(api, { name: 'agent', queues: ['reviews', 'inbox'], ...body });
}

const push = async (e: Vended, title: string, queue = 'reviews'): Promise<string> => (await pushVia(api, e, { title, queue })).id;

const settleLonger = () => settle(200);



const todoRow = async (id: string) =>
  (await db.sql<{ ring_attempts: number; last_ringed_at: Date | null; last_ringed_by: string | null; state: string }[]>`
    select ring_attempts, last_ringed_at, last_ringed_by, state from todos where id = ${id}`)[0]!;
const sweep = (on: TestApp = app) => sweepOnce({ sql: db.sql, clock: on.clock, log: createLogger('silent'), doorbell: on.services.doorbell });

describe('self verbs', () => {
  it('are listed for an endpoint vended with only list_todos and claim, and clock_out works there', async () => {
    const e = await vend({ verbs: ['list_todos', 'claim'] });
    const a = await agent(e);
    expect((await a.client.listTools()).tools.map((t) => t.name)).toEqual(['list_todos', 'claim', 'clock_in', 'clock_out', 'presence', 'ack_doorbell', 'test_doorbell', 'get_doorbell_test', 'whoami']);
    expect(await a.call('clock_out')).toMatchObject({ presence: 'out', source: 'agent', until: null, shift: null, pending: 0 });
    const [row] = await db.sql`select scope_verbs from endpoints where id = ${e.id}`;
    expect(row!.scope_verbs).toEqual(['list_todos', 'claim']);
  });

  it('refuse any identifier argument and change nothing', async () => {
    const e = await vend();
    const other = await vend();
    const a = await agent(e);
    const attempts: [string, Record<string, unknown>][] = [
      ['clock_out', { endpoint: other.slug }],
      ['clock_out', { endpoint_id: other.id }],
      ['clock_in', { queue: 'reviews' }],
      ['clock_in', { id: 'td_00000000-0000-4000-8000-000000000000' }],
      ['presence', { slug: other.slug }],
      ['clock_in', { for: '1h', endpoint: other.slug }],
    ];
    for (const [verb, args] of attempts) {
      expect((await a.call(verb, args)).error).toMatch(/^invalid_argument: /);
    }
    const rows = await db.sql`select presence_override from endpoints where id in (${e.id}, ${other.id})`;
    expect(rows.every((r) => r.presence_override === null)).toBe(true);
  });

  it('clock_in refuses a bad duration and leaves presence unchanged', async () => {
    const e = await vend();
    const a = await agent(e);
    await a.call('clock_out');
    for (const bad of ['9h', '0', '0m', '-1h', 'abc', '8h1m']) {
      expect((await a.call('clock_in', { for: bad })).error).toMatch(/^invalid_argument: for/);
    }
    expect(await a.call('presence')).toMatchObject({ presence: 'out', source: 'agent' });
  });
});

describe('held doorbells', () => {
  it('a todo arriving while out rings nobody and keeps its ring budget; pulling works as usual', async () => {
    const e = await vend();
    const a = await agent(e);
    await a.call('clock_out');
    const id = await push(e, 'held');
    await settleLonger();
    expect(a.heard).toEqual([]);
    app.clock.advance(30 * 60_000);
    await sweep();
    expect(await todoRow(id)).toMatchObject({ ring_attempts: 0, last_ringed_at: null, state: 'pending' });
    expect((await a.call('list_todos')).todos.map((t: { id: string }) => t.id)).toEqual([id]);
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id } });
  });

  it('a repeated clock_out changes nothing and sends nothing, with todos waiting', async () => {
    const e = await vend();
    const a = await agent(e);
    const first = await a.call('clock_out');
    const ids = [await push(e, 'held one'), await push(e, 'held two')];
    const [before] = await db.sql`select override_set_at from endpoints where id = ${e.id}`;
    app.clock.advance(60_000);
    expect(await a.call('clock_out')).toEqual({ ...first, pending: 2 });
    const [after] = await db.sql`select override_set_at from endpoints where id = ${e.id}`;
    expect(after!.override_set_at).toEqual(before!.override_set_at);
    await app.services.presence.evaluate({ endpointId: e.id });
    await settleLonger();
    expect(a.heard).toEqual([]);
    for (const id of ids) expect(await todoRow(id)).toMatchObject({ ring_attempts: 0, last_ringed_at: null });
  });
});

describe('the clock-in digest', () => {
  it('clock_in sends one digest counting what waited, marks exactly those todos, spends no ring', async () => {
    const e = await vend();
    const a = await agent(e);
    await a.call('clock_out');
    const ids = [await push(e, 'one'), await push(e, 'two', 'inbox'), await push(e, 'three')];
    app.clock.advance(60_000);
    const back = await a.call('clock_in');
    expect(back).toMatchObject({ presence: 'in', pending: 3 });
    await until(() => a.digests().length === 1, 'the digest');
    const d = a.digests()[0]!;
    expect(d.params.meta).toEqual({ kind: 'digest', pending: '3', queues: 'inbox,reviews', reason: 'clock_in', ring_id: expect.stringMatching(/^rg_[0-9A-Z]{26}$/) });
    expect(d.params.meta.todo_id).toBeUndefined();
    expect(d.params.content).not.toMatch(/one|two|three|td_/);
    // The mark follows the write: wait for it, then check it is exactly the digest time and no charge.
    await until(async () => (await todoRow(ids[2]!)).last_ringed_at !== null, 'the digest mark');
    for (const id of ids) expect(await todoRow(id)).toMatchObject({ ring_attempts: 0, last_ringed_at: app.clock.now() });
    // The sweep waits a full backoff from the digest before ringing any of them.
    app.clock.advance(4 * 60_000);
    await sweep();
    for (const id of ids) expect((await todoRow(id)).ring_attempts).toBe(0);
    await settleLonger();
    expect(a.digests()).toHaveLength(1);
  });

  it('sends no digest when nothing is waiting', async () => {
    const e = await vend();
    const a = await agent(e);
    await a.call('clock_out');
    await a.call('clock_in');
    await settleLonger();
    expect(a.heard).toEqual([]);
  });

  it('does not mark a todo created after the count, and a failed write marks nothing (SPEC-0022: only a written digest marks the rows it counted)', async () => {
    // An instance of its own, to read its log.
    const captured = capturingLogger();
    const logged = await startTestApp(db.url, new ManualClock(app.clock.now()), { log: captured.log });
    try {
      const e = await vend();
      const a = await agent(e, logged);
      const counted = await push(e, 'counted');
      await settleLonger();
      await db.sql`update todos set last_ringed_at = null, last_ringed_by = null where id = ${counted}`;
      // The digest's count and mark wait behind a lock on the counted row; a todo created meanwhile
      // commits after the count began, so it is neither counted nor marked.
      const since = logged.clock.now();
      let late = '';
      await db.sql.begin(async (tx) => {
        await tx`select 1 from todos where id = ${counted} for update`;
        const sent = logged.services.presence.sendDigest(e.id, 'operator', { since });
        await settle(100);
        late = await push(e, 'late');
        return { sent };
      }).then(({ sent }) => expect(sent).resolves.toBe(true));
      expect(await todoRow(counted)).toMatchObject({ last_ringed_at: logged.clock.now(), last_ringed_by: 'digest', ring_attempts: 0 });
      // The late todo was announced by its own ring, never by the digest.
      await until(async () => (await todoRow(late)).last_ringed_by === 'ring', 'the late todo rung singly');
      const lateRung = await todoRow(late);
      await until(() => a.digests().length === 1, 'the digest');
      expect(a.digests()[0]!.params.meta).toMatchObject({ pending: '1' });

      // The next digest's count waits behind a lock while the client's stream closes: when it comes
      // to write, no stream is left, and its count and mark are rolled back.
      logged.clock.advance(60_000);
      const session = logged.services.sessions.all().find((s) => s.id === a.sessionId)!;
      const unsent = await db.sql.begin(async (tx) => {
        await tx`select 1 from todos where id = ${late} for update`;
        const sent = logged.services.presence.sendDigest(e.id, 'operator', { since: logged.clock.now() });
        await a.client.close();
        await until(() => session.stream === null, 'the stream to close');
        return { sent };
      });
      expect(await unsent.sent).toBe(false);
      expect(await todoRow(late)).toEqual(lateRung);
      expect(await todoRow(counted)).toMatchObject({ last_ringed_at: new Date(logged.clock.now().getTime() - 60_000), last_ringed_by: 'digest' });
      expect(captured.lines.filter((l) => l.msg === 'digest not delivered')).toEqual([
        expect.objectContaining({ endpoint_id: e.id, reason: 'operator', pending: 2, cause: 'no_session' }),
      ]);
    } finally {
      await logged.stop();
    }
  });
});

describe('shifts', () => {
  it('a shift start sends one shift_start digest and no individual ring until the backoff from it', async () => {
    app.clock.set('2026-09-22T08:30:00Z'); // Tuesday
    const e = await vend();
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'Mon-Fri 09:00-13:00' })).json).toMatchObject({
      presence: 'out',
      source: 'shift',
      shift: 'TZ=UTC Mon 09:00-13:00; Tue 09:00-13:00; Wed 09:00-13:00; Thu 09:00-13:00; Fri 09:00-13:00',
    });
    const a = await agent(e);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await push(e, `todo ${i}`));
    await settleLonger();
    expect(a.heard).toEqual([]);
    app.clock.set('2026-09-22T09:00:00Z');
    expect(await app.services.presence.evaluate()).toBeGreaterThanOrEqual(1);
    await until(() => a.digests().length === 1, 'the shift_start digest');
    expect(a.digests()[0]!.params.meta).toMatchObject({ reason: 'shift_start', pending: '7' });
    await until(async () => (await todoRow(ids[6]!)).last_ringed_at !== null, 'the digest mark');
    await sweep();
    for (const id of ids) expect((await todoRow(id)).ring_attempts).toBe(0);
    app.clock.set('2026-09-22T09:05:00Z');
    expect(await sweep()).toBe(3);
    await settleLonger();
    expect(a.digests()).toHaveLength(1);
  });

  it('refuses an invalid shift naming the field and keeps the stored one', async () => {
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'Mon-Fri 09:00-13:00' });
    const r = await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'Mon 09:00-09:00' });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ code: 'invalid_argument', field: 'shift' });
    const [row] = await db.sql`select shift from endpoints where id = ${e.id}`;
    expect(row!.shift).toMatch(/^TZ=UTC Mon 09:00-13:00/);
  });
});

describe('reconnect digest', () => {
  it('a session opening its stream with work waiting gets one reconnect digest instead of individual rings', async () => {
    const e = await vend();
    const ids = [await push(e, 'a'), await push(e, 'b'), await push(e, 'c')];
    app.clock.advance(12 * 3_600_000);
    const a = await agent(e);
    await until(() => a.digests().length === 1, 'the reconnect digest');
    expect(a.digests()[0]!.params.meta).toMatchObject({ reason: 'reconnect', pending: '3' });
    expect(a.heard).toHaveLength(1);
    await until(async () => (await todoRow(ids[2]!)).last_ringed_at !== null, 'the digest mark');
    for (const id of ids) expect(await todoRow(id)).toMatchObject({ ring_attempts: 0, last_ringed_at: app.clock.now() });
  });

  it('a crashing agent reconnecting every 30 s gets at most one reconnect digest per 10 minutes', async () => {
    const e = await vend();
    await push(e, 'waiting');
    let digests = 0;
    for (let i = 0; i < 25; i++) {
      const a = await agent(e);
      await settleLonger();
      digests += a.digests().length;
      await a.client.close();
      await until(() => !app.services.sessions.sessionsOf(e.id).some((s) => s.stream), 'the stream to close');
      app.clock.advance(30_000);
    }
    // 25 reconnects over 12.5 minutes: one digest at the start, one more after 10 minutes.
    expect(digests).toBe(2);
  }, 60_000);

  it('counts what was waiting when the stream attached, not a todo that became ready while the digest was decided', async () => {
    const e = await vend();
    const attachAt = app.clock.now();
    const waiting = await push(e, 'waiting');
    // The digest is decided asynchronously after the attach. A todo that became ready after the
    // attach but before the digest's read stands here as one pushed at a later moment of the clock.
    app.clock.set(new Date(attachAt.getTime() + 50));
    const late = await push(e, 'ready after the attach');
    app.clock.set(attachAt);
    const a = await agent(e);
    await until(() => a.digests().length === 1, 'the reconnect digest');
    expect(a.digests()[0]!.params.meta).toMatchObject({ reason: 'reconnect', pending: '1' });
    await until(async () => (await todoRow(waiting)).last_ringed_at !== null, 'the digest mark');
    expect((await todoRow(late)).last_ringed_at).toBeNull();
  });
});

describe('operator presence controls', () => {
  it('PUT presence out sets an operator override; DELETE clears it; GET reads it', async () => {
    const e = await vend();
    const put = await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null });
    expect(put.status).toBe(200);
    expect(put.json).toMatchObject({ presence: 'out', source: 'operator', until: null });
    const [row] = await db.sql`select override_by, presence_seen, presence_changed_by from endpoints where id = ${e.id}`;
    expect(row!.override_by).toMatch(/^operator:[0-9a-f-]{36}$/);
    expect(row).toMatchObject({ presence_seen: 'out' });
    expect((await api('GET', `/api/v1/endpoints/${e.slug}/presence`)).json).toMatchObject({ presence: 'out', source: 'operator' });
    expect((await api('GET', '/api/v1/endpoints')).json.find((x: { slug: string }) => x.slug === e.slug).presence).toMatchObject({ presence: 'out' });
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`)).json).toMatchObject({ presence: 'in', source: 'default' });
  });

  it('answers 404 for a foreign endpoint, 409 for a revoked one, 400 naming until', async () => {
    const e = await vend();
    const stranger = apiCaller(app.url, (await humanWithToken(db.sql)).token);
    const foreign = await stranger('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null });
    expect(foreign.status).toBe(404);
    expect((await db.sql`select presence_override from endpoints where id = ${e.id}`)[0]!.presence_override).toBeNull();
    const past = await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: '2020-01-01T00:00:00Z' });
    expect(past.status).toBe(400);
    expect(past.json).toMatchObject({ code: 'invalid_argument', field: 'until' });
    const garbage = await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'sideways' });
    expect(garbage.json).toMatchObject({ code: 'invalid_argument', field: 'presence' });
    await api('POST', `/api/v1/endpoints/${e.slug}/revoke`);
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null })).status).toBe(409);
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: null })).status).toBe(409);
  });
});

describe('two instances', () => {
  it('a clock-out made through A holds doorbells on B within 5 seconds', async () => {
    const b = await startTestApp(db.url, new ManualClock(app.clock.now()));
    try {
      const e = await vend();
      const onB = await agent(e, b);
      const put = await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null });
      expect(put.status).toBe(200);
      await until(() => b.services.presence.presenceOf(e.id) === 'out', "B's cache to see the clock-out", 5000);
      await push(e, 'held on B too');
      await settleLonger();
      expect(onB.heard).toEqual([]);
    } finally {
      await b.stop();
    }
  });

  it('one shift start evaluated by both: exactly one claims, and each instance gives its own session one digest (SPEC-0022)', async () => {
    const b = await startTestApp(db.url, new ManualClock(app.clock.now()));
    try {
      app.clock.set('2026-09-23T08:00:00Z');
      b.clock.set('2026-09-23T08:00:00Z');
      const e = await vend();
      await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'TZ=UTC Mon-Fri 09:00-13:00' });
      const onA = await agent(e, app);
      const onB = await agent(e, b);
      await push(e, 'waiting');
      // Its ring wakeups are handled before 09:00: one arriving later would claim the return itself.
      await settleLonger();
      app.clock.set('2026-09-23T09:00:00Z');
      b.clock.set('2026-09-23T09:00:00Z');
      const claims = await Promise.all([app.services.presence.evaluate({ endpointId: e.id }), b.services.presence.evaluate({ endpointId: e.id })]);
      expect(claims.reduce((x, y) => x + y, 0)).toBe(1);
      await until(() => onA.digests().length >= 1 && onB.digests().length >= 1, 'a digest on each instance');
      await settleLonger();
      expect([onA.digests().length, onB.digests().length]).toEqual([1, 1]);
    } finally {
      await b.stop();
    }
  });

  it('an override that expires while the only instance is down is decided once when it is back', async () => {
    app.clock.set('2026-09-24T10:00:00Z');
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: '2026-09-24T11:00:00Z' });
    // Another instance comes up after the override ended; it evaluates, then a third does too.
    const later = new ManualClock('2026-09-24T11:30:00Z');
    const b = await startTestApp(db.url, later);
    const c = await startTestApp(db.url, new ManualClock(later.now()));
    try {
      expect(await b.services.presence.evaluate({ endpointId: e.id })).toBe(1);
      expect(await c.services.presence.evaluate({ endpointId: e.id })).toBe(0);
      const [row] = await db.sql`select presence_seen, presence_changed_by, presence_override from endpoints where id = ${e.id}`;
      expect(row).toEqual({ presence_seen: 'in', presence_changed_by: 'shift', presence_override: null });
    } finally {
      await Promise.all([b.stop(), c.stop()]);
    }
  });
});

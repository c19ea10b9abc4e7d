import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.ts';
import { connect, type Sql } from '../src/db/connect.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { createLogger } from '../src/lib/log.ts';
import { reapOnce } from '../src/services/maintenance/reaper.ts';
import { READY_EFFECTS, type BecameReady } from '../src/services/todo-events.ts';
import { apiCaller, humanWithToken, startTestApp } from './support/app.ts';
import { connectAgent, settle, until, type Agent } from './support/agents.ts';
import { createTestDatabase, type TestDatabase } from './support/database.ts';
import { push, vend, type Api, type Vended } from './support/fixtures.ts';

// TodoEvents is the one owner of "todos became claimable" (issue 35): every path that makes a
// todo claimable (push, the operator's retry, the reaper, release) tells the same listeners, by
// the one table READY_EFFECTS. Two instances on one database: the path runs on A; B's long polls
// wake, B's agent is rung (or not, as the table says), and A's notify hooks fire with the table's
// reason.

type TestApp = App & { clock: ManualClock };
let db: TestDatabase;
let sql: Sql;
let a: TestApp;
let b: TestApp;
let viaA: Api;
const agents: Agent[] = [];
const silent = createLogger('silent');

/** What each instance's listeners heard, by todo or by endpoint and queue. */
const heard = { wokenOnB: [] as string[], hookedOnA: [] as { id: string; reason: string }[] };

beforeAll(async () => {
  db = await createTestDatabase();
  const clock = new ManualClock('2026-12-01T09:00:00Z');
  [a, b] = await Promise.all([startTestApp(db.url, clock), startTestApp(db.url, clock)]);
  sql = connect(db.url, { max: 2 });
  viaA = apiCaller(a.url, (await humanWithToken(sql)).token);
  const waiters = b.services.todoWork.waiters;
  const ready = waiters.ready.bind(waiters);
  waiters.ready = (endpointId, queue) => {
    heard.wokenOnB.push(`${endpointId}:${queue}`);
    ready(endpointId, queue);
  };
  const hooks = a.services.hooks;
  const announce = hooks.announceTodo.bind(hooks);
  hooks.announceTodo = (todo, reason) => {
    heard.hookedOnA.push({ id: todo.id, reason });
    announce(todo, reason);
  };
});
afterAll(async () => {
  await Promise.all(agents.map((g) => g.client.close().catch(() => {})));
  await Promise.all([a?.stop(), b?.stop()]);
  await sql?.end({ timeout: 5 });
  await db.drop();
});

/** Past the ready rings' local gate and the API's write limit. */
const later = () => a.clock.advance(120_000);

/** The doorbells of one todo heard by any of the agents since `from` (their heard counts then). */
const ringsOf = (agents: Agent[], from: number[], todoId: string) =>
  agents.flatMap((g, i) => g.heard.slice(from[i]).filter((n) => n.params.meta.todo_id === todoId));

/**
 * Runs one path on A and checks what was heard of its todo against READY_EFFECTS[how]: B's long
 * polls wake; the todo is rung once across the cluster (on A's or B's agent) or not at all; A's
 * notify hooks fire with the table's reason or not at all.
 */
async function expectHeardAlike(e: Vended, both: Agent[], how: BecameReady, path: () => Promise<string>): Promise<string> {
  const woken = heard.wokenOnB.length;
  const hooked = heard.hookedOnA.length;
  const rungFrom = both.map((g) => g.heard.length);
  const todoId = await path();
  await until(() => heard.wokenOnB.slice(woken).includes(`${e.id}:reviews`), `B's long polls to wake (${how})`);
  const { ring, hook } = READY_EFFECTS[how];
  if (ring) await until(() => ringsOf(both, rungFrom, todoId).length > 0, `the todo to be rung (${how})`);
  await settle(100);
  expect(ringsOf(both, rungFrom, todoId), `rings on ${how}`).toHaveLength(ring ? 1 : 0);
  expect(heard.hookedOnA.slice(hooked), `A's hooks on ${how}`).toEqual(hook ? [{ id: todoId, reason: hook }] : []);
  return todoId;
}

describe('TodoEvents: every path that makes a todo claimable tells the same listeners', () => {
  it('push, retry, the reaper and release, run on A: B wakes and rings, A hooks, as READY_EFFECTS says', async () => {
    const e = await vend(viaA, { name: 'alike', queues: ['reviews'] });
    const onA = await connectAgent(a, e);
    const onB = await connectAgent(b, e);
    agents.push(onA, onB);

    const id = await expectHeardAlike(e, [onA, onB], 'created', async () => (await push(viaA, e, { title: 'work', queue: 'reviews', max_attempts: 2 })).id);

    // The reaper: a lapsed lease back to pending.
    expect(await onB.call('claim', { id, lease_ttl_seconds: 30 })).toMatchObject({ id, state: 'claimed' });
    later();
    await expectHeardAlike(e, [onA, onB], 'requeued', async () => {
      const { reaped } = await reapOnce({ sql: a.sql, clock: a.clock, log: silent, events: a.services.events });
      expect(reaped.map((m) => m.id)).toContain(id);
      return id;
    });

    // The operator's retry of a dead letter.
    later();
    expect(await onB.call('claim', { id })).toMatchObject({ id, state: 'claimed' });
    expect(await onB.call('fail', { id })).toMatchObject({ id, dead: true });
    later();
    await expectHeardAlike(e, [onA, onB], 'requeued', async () => {
      const res = await viaA('POST', `/api/v1/endpoints/${e.slug}/todos/${id}/retry`);
      expect(res.status, res.text).toBe(200);
      return id;
    });

    // Release by its holder on A.
    later();
    expect(await onA.call('claim', { id })).toMatchObject({ id, state: 'claimed' });
    await expectHeardAlike(e, [onA, onB], 'released', async () => {
      expect(await onA.call('release', { id })).toMatchObject({ id, state: 'pending' });
      return id;
    });
  });

  it('a release on A wakes a long poll waiting on B at once, not at its look-again', async () => {
    const e = await vend(viaA, { name: 'release-wakes', queues: ['reviews'] });
    const onA = await connectAgent(a, e);
    const onB = await connectAgent(b, e);
    agents.push(onA, onB);
    later();
    const { id } = await push(viaA, e, { title: 'handed back', queue: 'reviews' });
    expect(await onA.call('claim', { id })).toMatchObject({ id, state: 'claimed' });
    const waiting = onB.call('claim_next', { wait: '20s' });
    await until(() => b.services.sessions.all().some((s) => s.id === onB.sessionId && s.inFlight > 0), 'the call to wait on B');
    await settle(50);
    const t = performance.now();
    expect(await onA.call('release', { id })).toMatchObject({ state: 'pending' });
    expect(await waiting).toMatchObject({ empty: false, todo: { id, state: 'claimed' } });
    // The look-again interval would show as ~5,000 ms; the todo_claimable wakeup is tens of ms.
    expect(performance.now() - t).toBeLessThan(1_000);
  });
});

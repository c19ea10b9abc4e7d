import { beforeAll, describe, expect, it } from 'vitest';
import { connectAgent, settle, until, type Agent, type Vended } from './support/agents.ts';
import { push, vend, withApp, type Api, type TestApp, type TestDb } from './support/fixtures.ts';
import { createLogger } from '../src/lib/log.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { sweepOnce } from '../src/services/maintenance/doorbell-sweep.ts';
import { pushEligibleTodosByIds } from '../src/store/todos/index.ts';

/**
 * SPEC-0022, "Reconnect digest replaces individual rings": a todo waiting when a stream attaches is
 * announced by the reconnect digest or by its own ring, never both (issue 34 item 3). Each race is
 * run on several endpoints, so both orders of the digest and the ring happen.
 */

const fixture = withApp({ clock: new ManualClock('2026-11-16T10:00:00Z') });
let db: TestDb;
let app: TestApp;
let api: Api;
beforeAll(() => void ({ db, app, api } = fixture));

const ROUNDS = 6;

/** How many times the agent was told of `todoId`: its own doorbells plus the digests that counted it. */
async function announcements(a: Agent, todoId: string): Promise<number> {
  const rings = a.heard.filter((n) => n.params.meta.todo_id === todoId).length;
  const [row] = await db.sql<{ last_ringed_by: string | null }[]>`select last_ringed_by from todos where id = ${todoId}`;
  const digests = a.digests().length;
  // A digest counts one todo here (each endpoint has one), and marks it 'digest' when it did.
  expect(digests).toBe(row!.last_ringed_by === 'digest' ? 1 : 0);
  return rings + digests;
}

/** While the stream's attach is being handled (the reconnect digest just started), run `race`. */
function onNextAttach(e: Vended, race: () => void): void {
  const listener = (endpointId: string) => {
    if (endpointId !== e.id) return;
    app.services.sessions.off('endpointStreamAttached', listener);
    race();
  };
  app.services.sessions.on('endpointStreamAttached', listener);
}

async function waitingTodo(): Promise<{ e: Vended; id: string }> {
  app.clock.advance(1000);
  const e = await vend(api, { name: 'reconnecting', queues: ['reviews'] });
  const { id } = await push(api, e, { title: 'waiting', queue: 'reviews' });
  return { e, id };
}

describe('a todo waiting when a stream attaches', () => {
  it('whose todo_ready arrives after the reconnect digest is not rung singly', async () => {
    const { e, id } = await waitingTodo();
    const a = await connectAgent(app, e, { track: fixture.clients });
    await until(() => a.digests().length === 1, 'the reconnect digest');
    expect(a.digests()[0]!.params.meta).toMatchObject({ reason: 'reconnect', pending: '1' });
    // What the todo's todo_ready wakeup does when it reaches this instance late.
    app.services.readyRings.ringFresh(e.id, 'reviews');
    await settle(200);
    expect(await announcements(a, id)).toBe(1);
  });

  it('whose ready ring races the reconnect digest is announced once, by one or the other', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const { e, id } = await waitingTodo();
      const [todo] = await pushEligibleTodosByIds(db.sql, [id]);
      onNextAttach(e, () => app.services.readyRings.ringReady(todo!));
      const a = await connectAgent(app, e, { track: fixture.clients });
      await until(async () => (await announcements(a, id)) >= 1, 'the announcement');
      await settle(150);
      expect(await announcements(a, id), `round ${i}`).toBe(1);
    }
  });

  it('that a sweep tick between the attach and the digest finds due is announced once, by one or the other', async () => {
    const sweep = () => void sweepOnce({ sql: db.sql, clock: app.clock, log: createLogger('silent'), doorbell: app.services.doorbell, presence: app.services.presence });
    for (let i = 0; i < ROUNDS; i++) {
      const { e, id } = await waitingTodo();
      app.clock.advance(6 * 60_000); // due for its first ring
      onNextAttach(e, sweep);
      const a = await connectAgent(app, e, { track: fixture.clients });
      await until(async () => (await announcements(a, id)) >= 1, 'the announcement');
      await settle(150);
      expect(await announcements(a, id), `round ${i}`).toBe(1);
    }
  });
});

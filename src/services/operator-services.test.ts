import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { humanWithToken, migratedDatabase } from '../../test/support/app.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLogger } from '../lib/log.ts';
import { EndpointService, mustStillBeActive, type Endpoint } from './endpoints.ts';
import { OperatorPresence } from './presence-operator.ts';
import { newStandalonePresence } from './presence.ts';
import { TodoEvents } from './todo-events.ts';
import { TodoService, type TodoRow } from './todos.ts';

/** The operator services against a real database, without HTTP: the rules every surface now shares. */

let db: Awaited<ReturnType<typeof migratedDatabase>>;
const clock = new ManualClock('2026-09-21T08:00:00Z');
let base: { sql: Awaited<ReturnType<typeof migratedDatabase>>['sql']; clock: ManualClock; log: ReturnType<typeof createLogger> };
let endpoints: EndpointService;
let todos: TodoService;
let presence: OperatorPresence;
const revoked: string[] = [];
const ready: TodoRow[] = [];
let owner = { id: '', handle: '', display_name: null as string | null, email: null as string | null };
let stranger = '';

const refusal = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (err) {
    return err as { code: string; details: Record<string, unknown>; message: string };
  }
  throw new Error('expected a refusal');
};

beforeAll(async () => {
  db = await migratedDatabase();
  base = { sql: db.sql, clock, log: createLogger('silent') };
  endpoints = new EndpointService(base, { onRevoked: (id) => revoked.push(id) });
  // Only the ring is watched: a push-eligible todo is offered its ready ring.
  todos = new TodoService(base, { events: new TodoEvents({ sql: base.sql, log: base.log, rings: { ringReady: (t) => void ready.push(t as TodoRow) } }) });
  presence = new OperatorPresence(base, newStandalonePresence(base));
  const h = await humanWithToken(db.sql);
  owner = { id: h.id, handle: h.handle, display_name: null, email: null };
  stranger = (await humanWithToken(db.sql)).id;
});
afterAll(async () => db.drop());

const vend = async (queues = ['inbox']): Promise<Endpoint> => (await endpoints.vend(owner.id, { name: 'svc-agent', queues })).endpoint;

describe('EndpointService', () => {
  it('resolves the owner endpoints by slug or id; another human gets the same not_found as a missing one', async () => {
    const e = await vend();
    expect((await endpoints.requireOwn(owner.id, e.slug)).id).toBe(e.id);
    expect((await endpoints.requireOwnActive(owner.id, e.id)).slug).toBe(e.slug);
    const foreign = await refusal(endpoints.requireOwn(stranger, e.id));
    const missing = await refusal(endpoints.requireOwn(stranger, 'no-such-endpoint'));
    expect(foreign).toMatchObject({ code: 'not_found' });
    expect(foreign.message).toBe(missing.message);
  });

  it('revoke fans out once; afterwards the endpoint is 409 revoked, and a second revoke fans out nothing', async () => {
    const e = await vend();
    const before = revoked.length;
    const { endpoint } = await endpoints.revoke(owner.id, e.slug);
    expect(endpoint.state).toBe('revoked');
    expect(revoked.slice(before)).toEqual([e.id]);
    expect(await refusal(endpoints.requireOwnActive(owner.id, e.slug))).toMatchObject({ code: 'conflict', details: { slug: e.slug, state: 'revoked' } });
    expect(await refusal(endpoints.revoke(owner.id, e.slug))).toMatchObject({ code: 'conflict' });
    expect(revoked.length).toBe(before + 1);
  });

  it('a write that lost the race with revocation answers like the revocation', () => {
    expect(() => mustStillBeActive(true, { slug: 'a' })).not.toThrow();
    expect(() => mustStillBeActive(false, { slug: 'a' })).toThrow(expect.objectContaining({ code: 'conflict', details: { slug: 'a', state: 'revoked' } }));
  });
});

describe('TodoService', () => {
  it('rings once for a new push-eligible todo, and not for the duplicate that collapses onto it', async () => {
    const e = await vend();
    const before = ready.length;
    const first = await todos.pushByOperator(owner, e, { title: '  Review PR 7 ', key: 'pr-7' });
    expect(first).toMatchObject({ created: true, todo: { title: 'Review PR 7', queue: 'inbox', kind: 'operator' } });
    const again = await todos.pushByOperator(owner, e, { title: 'Review PR 7', key: 'pr-7' });
    expect(again).toMatchObject({ created: false, todo: { id: first.todo.id } });
    expect(ready.slice(before).map((t) => t.id)).toEqual([first.todo.id]);
  });

  it('refuses a revoked endpoint and invalid input before writing anything', async () => {
    const e = await vend(['inbox', 'reviews']);
    expect(await refusal(todos.pushByOperator(owner, e, { title: 'x' }))).toMatchObject({ code: 'invalid_argument', details: { field: 'queue' } });
    expect(await refusal(todos.pushByOperator(owner, e, { title: 'two\nlines', queue: 'inbox' }))).toMatchObject({ details: { field: 'title' } });
    const { endpoint: gone } = await endpoints.revoke(owner.id, e.id);
    expect(await refusal(todos.pushByOperator(owner, gone, { title: 'late', queue: 'inbox' }))).toMatchObject({ code: 'conflict' });
    const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from todos where endpoint_id = ${e.id}`;
    expect(row!.n).toBe(0);
  });

  it('a push that lost the race with revocation writes nothing: the insert itself sees the endpoint revoked', async () => {
    const e = await vend();
    // `e` is the still-active row a surface resolved before the revocation committed.
    await endpoints.revoke(owner.id, e.id);
    const before = ready.length;
    expect(await refusal(todos.pushByOperator(owner, e, { title: 'too late', key: 'late' }))).toMatchObject({
      code: 'conflict',
      details: { slug: e.slug, state: 'revoked' },
    });
    const [row] = await db.sql<{ todos: number; events: number }[]>`
      select (select count(*)::int from todos where endpoint_id = ${e.id}) as todos,
             (select count(*)::int from events where endpoint_id = ${e.id}) as events`;
    expect(row).toEqual({ todos: 0, events: 0 });
    expect(ready.length).toBe(before);
  });
});

describe('OperatorPresence', () => {
  it('sets and clears an override; on an endpoint revoked since it was resolved, answers 409 revoked', async () => {
    const e = await vend();
    await presence.set(owner.id, e, 'out', null);
    expect(await presence.view(e)).toMatchObject({ presence: 'out', source: 'operator' });
    await presence.clear(owner.id, e);
    expect(await presence.view(e)).toMatchObject({ presence: 'in' });
    await presence.setShift(owner.id, e, null);

    await endpoints.revoke(owner.id, e.id);
    // `e` is the stale, still-active row the route resolved before the revocation committed.
    for (const write of [() => presence.set(owner.id, e, 'out', null), () => presence.clear(owner.id, e), () => presence.setShift(owner.id, e, null)]) {
      expect(await refusal(write())).toMatchObject({ code: 'conflict', details: { slug: e.slug, state: 'revoked' } });
    }
  });

  it('refuses an until that is not in the future, from the one plan', async () => {
    const e = await vend();
    expect(await refusal(presence.set(owner.id, e, 'out', clock.now()))).toMatchObject({ code: 'invalid_argument', details: { field: 'until' } });
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { claimNextTodo, claimTodo, completeTodo, failTodo } from '../store/todos/index.ts';
import {
  agentOf,
  app,
  counts,
  expectError,
  expectInvalid,
  operator,
  type Operator,
  push,
  pushPath,
  sql,
  useOperatorApiSuite,
  vend,
  type Vended,
  wire,
} from '../../test/support/operator-api.ts';

// /api/v1 over real HTTP: one todo (show, cancel, retry), push options (delay, priority,
// max_attempts), the dead and canceled filters and paging.

useOperatorApiSuite();

const NO_SUCH_TODO = 'td_00000000-0000-4000-8000-000000000000';
const todoPath = (ref: string, id: string, action = '') => `/api/v1/endpoints/${encodeURIComponent(ref)}/todos/${id}${action ? `/${action}` : ''}`;

/** A failed todo with no retry left, through the agent's own statements. */
async function deadLetter(op: Operator, ep: Vended, title: string): Promise<string> {
  const { id } = await push(op, ep.slug, { title, max_attempts: 1 });
  const agent = await agentOf(ep.id);
  await claimTodo(sql, agent, id, 60, app.clock.now());
  await failTodo(sql, agent, id, { error: 'boom' }, app.clock.now());
  return id;
}

describe('GET /api/v1/endpoints/{ref}/todos/{id}', () => {
  let op: Operator;
  let ep: Vended;
  beforeAll(async () => {
    op = await operator();
    ep = await vend(op, { name: 'show' });
  });

  it('answers the todo in full: payload, result, attempts, priority, run_at and the dead flag', async () => {
    const { id } = await push(op, ep.slug, { title: 'later', payload: { pr: 7 }, priority: 3, delay: '10m', max_attempts: 2 });
    const res = await op.call('GET', todoPath(ep.slug, id));
    expect(res.status, res.text).toBe(200);
    const now = app.clock.now();
    expect(res.json).toEqual({
      id,
      endpoint_id: ep.id,
      queue: 'inbox',
      source: 'operator',
      kind: 'operator',
      title: 'later',
      state: 'pending',
      attempt: 0,
      max_attempts: 2,
      priority: 3,
      run_at: wire(new Date(now.getTime() + 600_000)),
      dead: false,
      next_retry_at: null,
      lease_expires_at: null,
      claimed_at: null,
      completed_at: null,
      created_at: wire(now),
      updated_at: wire(now),
      payload_size: 9,
      payload: { pr: 7 },
      result: null,
      // An operator's push: no webhook rule made it.
      routing: null,
    });
    const dead = await deadLetter(op, ep, 'dead');
    expect((await op.call('GET', todoPath(ep.id, dead))).json).toMatchObject({ state: 'failed', dead: true, attempt: 1, result: { error: 'boom' } });
  });

  it("answers 404 for another endpoint's todo, a missing one and another human's endpoint; 400 for a malformed id", async () => {
    const mine = await push(op, ep.slug, { title: 'mine' });
    const sibling = await vend(op, { name: 'sibling' });
    expectError(await op.call('GET', todoPath(sibling.slug, mine.id)), 404, 'not_found');
    expectError(await op.call('GET', todoPath(ep.slug, NO_SUCH_TODO)), 404, 'not_found');
    const other = await operator();
    expectError(await other.call('GET', todoPath(ep.slug, mine.id)), 404, 'not_found');
    expectInvalid(await op.call('GET', todoPath(ep.slug, 'not-a-todo')), 'id');
  });
});

describe('POST /api/v1/endpoints/{ref}/todos/{id}/cancel', () => {
  let op: Operator;
  let ep: Vended;
  beforeAll(async () => {
    op = await operator({ displayName: 'Grace Hopper' });
    ep = await vend(op, { name: 'cancel' });
  });

  it("cancels a claimed todo: the holder's complete then gets a conflict, and the result names who canceled", async () => {
    const { id } = await push(op, ep.slug, { title: 'in progress' });
    const agent = await agentOf(ep.id);
    await claimTodo(sql, agent, id, 300, app.clock.now());
    const res = await op.call('POST', todoPath(ep.slug, id, 'cancel'));
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({
      id,
      state: 'canceled',
      completed_at: wire(app.clock.now()),
      lease_expires_at: null,
      result: { canceled_by: { id: op.id, handle: op.handle }, detail: `canceled by Grace Hopper (${op.id})`, previous_state: 'claimed' },
    });
    await expect(completeTodo(sql, agent, id, { ok: true }, app.clock.now())).rejects.toMatchObject({ code: 'conflict' });
    expect((await op.call('GET', todoPath(ep.slug, id))).json.state).toBe('canceled');
  });

  it('cancels pending and dead todos; done or canceled answers 409 naming the state and changes nothing', async () => {
    const pending = await push(op, ep.slug, { title: 'pending' });
    expect((await op.call('POST', todoPath(ep.slug, pending.id, 'cancel'))).json.state).toBe('canceled');
    const dead = await deadLetter(op, ep, 'dead');
    expect((await op.call('POST', todoPath(ep.slug, dead, 'cancel'))).json).toMatchObject({ state: 'canceled', dead: false });
    const again = await op.call('POST', todoPath(ep.slug, pending.id, 'cancel'));
    expectError(again, 409, 'conflict', { state: 'canceled' });
    expect(again.json.error).toContain('already canceled');

    const done = await push(op, ep.slug, { title: 'done' });
    const agent = await agentOf(ep.id);
    await claimTodo(sql, agent, done.id, 60, app.clock.now());
    await completeTodo(sql, agent, done.id, { ok: 1 }, app.clock.now());
    expectError(await op.call('POST', todoPath(ep.slug, done.id, 'cancel')), 409, 'conflict', { state: 'done' });
    expect((await op.call('GET', todoPath(ep.slug, done.id))).json).toMatchObject({ state: 'done', result: { ok: 1 } });
  });

  it('answers 404 for a foreign or missing todo and 400 for a body with fields, changing nothing', async () => {
    const { id } = await push(op, ep.slug, { title: 'keep me' });
    const other = await operator();
    const theirs = await vend(other);
    expectError(await other.call('POST', todoPath(theirs.slug, id, 'cancel')), 404, 'not_found');
    expectError(await op.call('POST', todoPath(ep.slug, NO_SUCH_TODO, 'cancel')), 404, 'not_found');
    expectInvalid(await op.call('POST', todoPath(ep.slug, id, 'cancel'), { reason: 'x' }), 'reason');
    expect((await op.call('GET', todoPath(ep.slug, id))).json.state).toBe('pending');
  });
});

describe('POST /api/v1/endpoints/{ref}/todos/{id}/retry', () => {
  let op: Operator;
  let ep: Vended;
  beforeAll(async () => {
    op = await operator();
    ep = await vend(op, { name: 'retry' });
  });

  it('puts a dead letter back to pending with attempt 0, claimable again', async () => {
    const dead = await deadLetter(op, ep, 'dead');
    const res = await op.call('POST', todoPath(ep.slug, dead, 'retry'));
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ id: dead, state: 'pending', attempt: 0, max_attempts: 1, dead: false, next_retry_at: null, completed_at: null });
    expect((await claimNextTodo(sql, await agentOf(ep.id), ['inbox'], 60, app.clock.now()))?.id).toBe(dead);
  });

  it('answers 409 naming the state for pending, claimed, done and canceled todos; 404 for a foreign one', async () => {
    const pending = await push(op, ep.slug, { title: 'pending' });
    expectError(await op.call('POST', todoPath(ep.slug, pending.id, 'retry')), 409, 'conflict', { state: 'pending' });
    await op.call('POST', todoPath(ep.slug, pending.id, 'cancel'));
    expectError(await op.call('POST', todoPath(ep.slug, pending.id, 'retry')), 409, 'conflict', { state: 'canceled' });
    const sibling = await vend(op, { name: 'sibling-retry' });
    const dead = await deadLetter(op, ep, 'dead');
    expectError(await op.call('POST', todoPath(sibling.slug, dead, 'retry')), 404, 'not_found');
    expect((await op.call('GET', todoPath(ep.slug, dead))).json).toMatchObject({ state: 'failed', dead: true });
  });
});

describe('push options', () => {
  let op: Operator;
  let ep: Vended;
  beforeAll(async () => {
    op = await operator();
    ep = await vend(op, { name: 'options' });
  });

  it('claims by priority, then age; a delayed todo is refused until it is due', async () => {
    const low = await push(op, ep.slug, { title: 'low' });
    app.clock.advance(1000);
    const high = await push(op, ep.slug, { title: 'high', priority: 1000 });
    const later = await push(op, ep.slug, { title: 'later', priority: 1000, delay: '1h' });
    const agent = await agentOf(ep.id);
    const claim = () => claimNextTodo(sql, agent, ['inbox'], 86_400, app.clock.now());
    expect((await claim())?.id).toBe(high.id);
    expect((await claim())?.id).toBe(low.id);
    expect(await claim()).toBeNull();
    await expect(claimTodo(sql, agent, later.id, 60, app.clock.now())).rejects.toMatchObject({ code: 'conflict', message: expect.stringMatching(/not claimable until/) });
    app.clock.advance(3600_000);
    expect((await claim())?.id).toBe(later.id);
  });

  it.each([
    [{ delay: 'soon' }, 'delay'],
    [{ delay: '721h' }, 'delay'],
    [{ delay: 10 }, 'delay'],
    [{ priority: 1001 }, 'priority'],
    [{ priority: -1001 }, 'priority'],
    [{ priority: 1.5 }, 'priority'],
    [{ priority: '5' }, 'priority'],
    [{ max_attempts: 0 }, 'max_attempts'],
    [{ max_attempts: 101 }, 'max_attempts'],
    [{ max_attempts: 2.5 }, 'max_attempts'],
  ])('refuses %j with 400 naming %s, and writes nothing', async (extra, field) => {
    const before = await counts();
    expectInvalid(await op.call('POST', pushPath(ep.slug), { title: 'bad', ...extra }), field);
    expect(await counts()).toEqual(before);
  });
});

describe('GET /api/v1/endpoints/{ref}/todos: dead, canceled, pages', () => {
  it('filters ?state=dead (rows say dead: true) apart from ?state=failed and ?state=canceled', async () => {
    const op = await operator();
    const ep = await vend(op, { name: 'filters' });
    const dead = await deadLetter(op, ep, 'dead');
    const canceled = await push(op, ep.slug, { title: 'canceled' });
    await op.call('POST', todoPath(ep.slug, canceled.id, 'cancel'));
    const list = async (q: string) => (await op.call('GET', `${pushPath(ep.slug)}${q}`)).json.todos as { id: string; dead?: boolean }[];
    expect(await list('?state=dead')).toEqual([expect.objectContaining({ id: dead, state: 'failed', dead: true })]);
    expect((await list('?state=canceled')).map((t) => t.id)).toEqual([canceled.id]);
    expect((await list('?state=failed')).map((t) => t.id)).toEqual([dead]);
    expect((await list('')).find((t) => t.id === canceled.id)).not.toHaveProperty('dead');
  });

  it('walks three pages with next_cursor, unmoved by a push between pages; null after the last', async () => {
    const op = await operator();
    const ep = await vend(op, { name: 'pages' });
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      app.clock.advance(1000);
      ids.push((await push(op, ep.slug, { title: `t${i}` })).id);
    }
    const page = async (cursor: string | null) => {
      const res = await op.call('GET', `${pushPath(ep.slug)}?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status, res.text).toBe(200);
      return res.json as { todos: { id: string }[]; next_cursor: string | null };
    };
    const one = await page(null);
    await push(op, ep.slug, { title: 'pushed between pages' });
    const two = await page(one.next_cursor);
    const three = await page(two.next_cursor);
    const newest = [...ids].reverse();
    expect([one, two, three].map((p) => p.todos.map((t) => t.id))).toEqual([newest.slice(0, 3), newest.slice(3, 6), newest.slice(6)]);
    expect(one.next_cursor).toEqual(expect.any(String));
    expect(three.next_cursor).toBeNull();
  });

  it.each(['abc', 'djE6eDp5', '%00', 'x'.repeat(200)])('refuses the cursor %s with 400 naming cursor', async (cursor) => {
    const op = await operator();
    const ep = await vend(op, { name: 'bad-cursor' });
    expectInvalid(await op.call('GET', `${pushPath(ep.slug)}?cursor=${cursor}`), 'cursor');
  });
});

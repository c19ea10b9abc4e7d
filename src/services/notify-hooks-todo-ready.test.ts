import { describe, expect, it } from 'vitest';
import { retryBackoffSeconds } from '../domain/lifecycle.ts';
import { createLogger } from '../lib/log.ts';
import { reapOnce } from './maintenance/reaper.ts';
import { TodoEvents } from './todo-events.ts';
import { insertEventAndTodo, type TodoRow } from '../store/todos/index.ts';
import { VERSION } from '../lib/version.ts';
import {
  api,
  apiB,
  app,
  appB,
  clock,
  connect,
  createHook,
  db,
  expectSigned,
  health,
  hookView,
  push,
  settle,
  signatureEntries,
  target,
  until,
  useNotifyHooksSuite,
  vend,
} from '../../test/support/notify-hooks.ts';

// Notify hooks end to end: which todos fire todo.ready, and how presence gates them.

useNotifyHooksSuite();

const silent = createLogger('silent');

const dbTodo = async (id: string) => (await db.sql<TodoRow[]>`select * from todos where id = ${id}`)[0]!;
const rfc3339 = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

describe('todo.ready', () => {
  it('an operator push fires exactly one signed todo.ready (created) with identifiers only', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const id = await push(e, 'Review PR 12', { payload: { note: 'payload-must-not-leak', token: 'hdr-must-not-leak' } });
    await until(() => t.got().length === 1, 'the notification');
    const r = t.got()[0]!;
    await settle();
    expect(t.got()).toHaveLength(1);

    await expectSigned([r], h.signing_secret);
    expect(signatureEntries(r)).toHaveLength(1);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['user-agent']).toBe(`switchboard/${VERSION}`);
    expect(r.headers['webhook-id']).toMatch(/^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(r.headers['webhook-timestamp']).toBe(String(Math.floor(clock.now().getTime() / 1000)));
    expect(r.raw.length).toBeLessThanOrEqual(4096);
    const todo = await dbTodo(id);
    expect(r.body).toEqual({
      type: 'todo.ready',
      reason: 'created',
      todo_id: id,
      queue: 'reviews',
      kind: 'operator',
      source: 'operator',
      summary: 'Review PR 12',
      endpoint: e.slug,
      attempt: 0,
      created_at: rfc3339(todo.created_at),
    });
    expect(r.raw.toString()).not.toMatch(/must-not-leak|payload/);
    // The health columns record the delivery.
    await until(async () => (await health(h.hook_id)).last_status === 200, 'the recorded outcome');
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 0, last_error: null, enabled: true, last_attempt_at: expect.any(String) });
  });

  it('a webhook delivery fires created once; its redelivery fires nothing', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const w = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
    expect(w.status).toBe(201);
    const deliver = () =>
      fetch(w.json.ingest_url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-event-type': 'build.failed', 'x-delivery-id': 'build-981' },
        body: JSON.stringify({ title: 'Nightly build failed', secret_field: 'payload-must-not-leak' }),
      });
    const first = await deliver();
    expect(first.status).toBe(202);
    const { id } = (await first.json()) as { id: string };
    await until(() => t.got().length === 1, 'the notification');
    expect((await deliver()).status).toBe(202);
    await settle();
    expect(t.got()).toHaveLength(1);
    await expectSigned(t.got(), h.signing_secret);
    expect(t.got()[0]!.body).toMatchObject({ type: 'todo.ready', reason: 'created', todo_id: id, queue: 'inbox', kind: 'build.failed', source: 'generic', summary: 'Nightly build failed' });
    expect(t.got()[0]!.raw.toString()).not.toContain('must-not-leak');
  });

  it('a lease expiry and an elapsed retry each fire once with reason requeued (the reaper wired as app.ts wires it)', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const id = await push(e, 'requeue me');
    await until(() => t.got().length === 1, 'the created notification');

    const agent = await connect(e);
    expect(await agent.call('claim', { id, lease_ttl_seconds: 60 })).toMatchObject({ id, state: 'claimed' });
    const reap = () => reapOnce({ sql: app.sql, clock: app.clock, log: silent, events: app.services.events });
    await reap();
    await settle();
    expect(t.got()).toHaveLength(1); // The lease has not run out yet.
    clock.advance(61_000);
    const { reaped } = await reap();
    expect(reaped.map((m) => m.id)).toContain(id);
    await until(() => t.got().length === 2, 'the requeued notification');
    expect(t.got()[1]!.body).toMatchObject({ type: 'todo.ready', reason: 'requeued', todo_id: id, queue: 'reviews', attempt: 1 });
    expect(t.got()[1]!.headers['webhook-id']).not.toBe(t.got()[0]!.headers['webhook-id']);

    // Claimed again and failed: the retry window elapsing is the other requeue.
    expect(await agent.call('claim', { id })).toMatchObject({ id, state: 'claimed' });
    await agent.call('fail', { id });
    await reap();
    await settle();
    expect(t.got()).toHaveLength(2); // Still waiting out its backoff.
    clock.advance((retryBackoffSeconds(2) + 1) * 1000);
    await reap();
    await until(() => t.got().length === 3, 'the second requeued notification');
    expect(t.got()[2]!.body).toMatchObject({ reason: 'requeued', todo_id: id, attempt: 2 });
    await settle();
    expect(t.got()).toHaveLength(3);
    await expectSigned(t.got(), h.signing_secret);
  });

  it('a requeued todo that fails the sender gate (an unverified signed delivery) fires nothing', async () => {
    const e = await vend();
    const t = target();
    await createHook(e, { url: t.url });
    const { todo, pushEligible } = await insertEventAndTodo(
      app.sql,
      { source: 'github', family: 'webhook', trustMode: 'signed', verified: false, verifyDetail: 'bad signature (test)' },
      { endpointId: e.id, queue: 'reviews', title: 'unverified', source: 'github', kind: 'push' },
      clock.now(),
    );
    expect(pushEligible).toBe(false);
    const agent = await connect(e);
    expect(await agent.call('claim', { id: todo.id, lease_ttl_seconds: 30 })).toMatchObject({ id: todo.id, state: 'claimed' });
    clock.advance(31_000);
    const requeued: string[] = [];
    const hooks = { announceTodo: (row: TodoRow, reason: 'created' | 'requeued') => (requeued.push(row.id), app.services.hooks.announceTodo(row, reason)) };
    const { reaped } = await reapOnce({ sql: app.sql, clock: app.clock, log: silent, events: new TodoEvents({ sql: app.sql, log: silent, hooks }) });
    expect(reaped.map((m) => m.id)).toContain(todo.id);
    expect(requeued).not.toContain(todo.id);
    // A real todo afterwards is the first and only thing the receiver hears.
    const id = await push(e, 'verified work');
    await until(() => t.got().length === 1, 'the real notification');
    await settle();
    expect(t.got().map((r) => r.body.todo_id)).toEqual([id]);
  });

  it('a synthetic self-test todo fires nothing', async () => {
    const e = await vend();
    const t = target();
    await createHook(e, { url: t.url });
    const started = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, {});
    expect(started.status).toBe(201);
    const synthetic = await dbTodo(started.json.todo_id);
    expect(synthetic.synthetic).toBe(true);
    await settle();
    // Even handed straight to the hooks, a synthetic todo is refused.
    await app.services.hooks.todoReady(synthetic, 'created');
    await settle();
    expect(t.got()).toEqual([]);
    // A real todo afterwards is the first and only thing the receiver hears.
    const id = await push(e, 'real work');
    await until(() => t.got().length === 1, 'the real notification');
    await settle();
    expect(t.got().map((r) => r.body.todo_id)).toEqual([id]);
  });

  it('queues narrow a hook; without queues it takes every scoped queue', async () => {
    const e = await vend();
    const inboxOnly = target();
    const all = target();
    expect((await createHook(e, { url: inboxOnly.url, queues: ['inbox'] })).queues).toEqual(['inbox']);
    await createHook(e, { url: all.url });
    const review = await push(e, 'a review', { queue: 'reviews' });
    const inbox = await push(e, 'an inbox item', { queue: 'inbox' });
    await until(() => all.got().length === 2 && inboxOnly.got().length === 1, 'the notifications');
    await settle();
    expect(inboxOnly.got().map((r) => r.body.todo_id)).toEqual([inbox]);
    expect(all.got().map((r) => r.body.todo_id).sort()).toEqual([review, inbox].sort());
  });

  it('two instances on one database: a push through either fires once in total', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const viaA = await push(e, 'through A');
    await until(() => t.got().length === 1, 'the notification from A');
    await settle();
    expect(t.got()).toHaveLength(1);
    const viaB = await push(e, 'through B', { via: apiB });
    await until(() => t.got().length === 2, 'the notification from B');
    await settle();
    expect(t.got().map((r) => r.body.todo_id)).toEqual([viaA, viaB]);
    await expectSigned(t.got(), h.signing_secret);
  });
});

describe('presence', () => {
  it('while out: no todo.ready except for ignore_presence hooks; on clock-in one todos.backlog per respecting hook', async () => {
    const e = await vend();
    const respecting = target();
    const ignoring = target();
    const hr = await createHook(e, { url: respecting.url });
    const hi = await createHook(e, { url: ignoring.url, ignore_presence: true });
    expect(hi.ignore_presence).toBe(true);
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out' })).json).toMatchObject({ presence: 'out' });
    const a = await push(e, 'alpha-title', { queue: 'reviews' });
    const b = await push(e, 'beta-title', { queue: 'inbox' });
    await until(() => ignoring.got().length === 2, 'the ignore_presence notifications');
    await settle();
    expect(respecting.got()).toEqual([]);
    expect(ignoring.got().map((r) => r.body.todo_id)).toEqual([a, b]);

    const back = await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'in' });
    expect(back.json).toMatchObject({ presence: 'in', pending: 2 });
    await until(() => respecting.got().length === 1, 'the backlog');
    // The other instance evaluating afterwards finds nothing to claim: still one backlog.
    await appB.services.presence.evaluate();
    await settle();
    expect(respecting.got()).toHaveLength(1);
    expect(ignoring.got()).toHaveLength(2);
    const r = respecting.got()[0]!;
    await expectSigned([r], hr.signing_secret);
    const oldest = await dbTodo(a);
    expect(r.body).toEqual({
      type: 'todos.backlog',
      reason: 'operator',
      endpoint: e.slug,
      pending: 2,
      queues: ['inbox', 'reviews'],
      oldest_pending_seconds: Math.round((clock.now().getTime() - oldest.created_at.getTime()) / 1000),
      created_at: rfc3339(clock.now()),
    });
    expect(r.raw.toString()).not.toMatch(/alpha-title|beta-title|td_/);
  });

  it('clearing the override (DELETE presence) also sends the backlog, counting only each hook\'s queues', async () => {
    const e = await vend();
    const all = target();
    const inboxOnly = target();
    const reviewsOnly = target();
    await createHook(e, { url: all.url });
    await createHook(e, { url: inboxOnly.url, queues: ['inbox'] });
    await createHook(e, { url: reviewsOnly.url, queues: ['reviews'] });
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out' })).status).toBe(200);
    await push(e, 'one', { queue: 'reviews' });
    await push(e, 'two', { queue: 'reviews' });
    await settle();
    expect([...all.got(), ...inboxOnly.got(), ...reviewsOnly.got()]).toEqual([]);
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`)).json).toMatchObject({ presence: 'in', source: 'default' });
    await until(() => all.got().length === 1 && reviewsOnly.got().length === 1, 'the backlogs');
    // Clearing again is no transition: nothing more.
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`)).status).toBe(200);
    await settle();
    expect(all.got().map((r) => r.body)).toEqual([expect.objectContaining({ type: 'todos.backlog', pending: 2, queues: ['reviews'] })]);
    expect(reviewsOnly.got().map((r) => r.body)).toEqual([expect.objectContaining({ type: 'todos.backlog', pending: 2, queues: ['reviews'] })]);
    expect(inboxOnly.got()).toEqual([]);
  });
});
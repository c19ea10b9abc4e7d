import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import type { Sql } from '../../db/connect.ts';
import { SwitchboardError } from '../../domain/errors.ts';
import { ManualClock } from '../../lib/clock.ts';
import { createLogger } from '../../lib/log.ts';
import { TodoEvents } from '../../services/todo-events.ts';
import { TodoService, type PushAuthor } from '../../services/todos.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import {
  RETURN_DIGEST_GRACE_SECONDS,
  announceByDigest,
  cancelTodo,
  chargeDueRingsUnscoped,
  claimNextTodo,
  claimTodo,
  completeTodo,
  failTodo,
  getTodo,
  heartbeatTodo,
  insertEventAndTodo,
  listTodos,
  releaseDueDelayedUnscoped,
  retryTodo,
  type Caller,
  type EventInput,
  type NewTodo,
  type TodoRow,
} from './index.ts';

// The todo operations of issue 18: priority order, delayed todos, cancel, retry, dead letters and
// keyset pages, against a real PostgreSQL with a clock the tests move.

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');
const operatorEvent: EventInput = { source: 'operator', family: 'operator', trustMode: 'operator', verified: true };
const canceler = { id: '00000000-0000-4000-8000-000000000001', handle: 'ops', detail: 'canceled by ops' };

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'ops-tester' })).id;
});
afterAll(async () => db.drop());

async function newEndpoint(queues = ['reviews', 'inbox']): Promise<Caller> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues }, clock.now());
  return { endpointId: endpoint.id, owner: `agent:${endpoint.agent_id}`, queues };
}

/** A todo one second after the previous one, so ages differ; `delayMs` makes it a delayed todo due that long after its push. */
async function push(c: Caller, title: string, extra: Partial<NewTodo> = {}, delayMs?: number): Promise<TodoRow> {
  clock.advance(1000);
  const runAt = delayMs === undefined ? null : later(delayMs);
  const r = await insertEventAndTodo(sql, operatorEvent, { endpointId: c.endpointId, queue: c.queues[0]!, title, runAt, ...extra }, clock.now());
  return r.todo;
}

async function refusal(p: Promise<unknown>): Promise<SwitchboardError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof SwitchboardError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

const later = (ms: number) => new Date(clock.now().getTime() + ms);

describe('claim order', () => {
  it('takes the highest priority first, then the oldest, across queues', async () => {
    const c = await newEndpoint();
    const oldLow = await push(c, 'old low', { priority: -5 });
    const oldPlain = await push(c, 'old plain');
    const newHigh = await push(c, 'new high', { priority: 10 });
    const newPlain = await push(c, 'new plain');
    const otherQueueHigh = await push(c, 'inbox high', { queue: 'inbox', priority: 10 });
    const order: string[] = [];
    for (;;) {
      const t = await claimNextTodo(sql, c, c.queues, 60, clock.now());
      if (!t) break;
      order.push(t.id);
    }
    // Equal priority across queues: the older first.
    expect(order).toEqual([newHigh.id, otherQueueHigh.id, oldPlain.id, newPlain.id, oldLow.id]);
  });

  it('an expired lease and a due retry compete by the same order as pending todos', async () => {
    const c = await newEndpoint();
    const lapsed = await push(c, 'lapsed', { priority: 5 });
    const retried = await push(c, 'retried', { priority: 3 });
    await claimTodo(sql, c, lapsed.id, 1, clock.now());
    await claimTodo(sql, c, retried.id, 60, clock.now());
    await failTodo(sql, c, retried.id, null, clock.now());
    const plain = await push(c, 'plain');
    const high = await push(c, 'high', { priority: 4 });
    clock.advance(3600_000);
    const order: string[] = [];
    for (let t = await claimNextTodo(sql, c, c.queues, 60, clock.now()); t; t = await claimNextTodo(sql, c, c.queues, 60, clock.now())) order.push(t.id);
    expect(order).toEqual([lapsed.id, high.id, retried.id, plain.id]);
  });

  it('a priority outside -1000..1000 is refused by the database too', async () => {
    const c = await newEndpoint();
    await expect(push(c, 'too high', { priority: 1001 })).rejects.toThrow(/todos_priority_range/);
  });
});

describe('delayed todos', () => {
  it('are not claimable, nor push-eligible, until the clock passes run_at; then the reaper releases and wakes them', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'later', {}, 10 * 60_000);
    expect(t.run_at).toEqual(later(10 * 60_000));
    expect(await claimNextTodo(sql, c, c.queues, 60, clock.now())).toBeNull();
    const early = await refusal(claimTodo(sql, c, t.id, 60, clock.now()));
    expect(early.code).toBe('conflict');
    expect(early.message).toBe(`todo ${t.id} is delayed: it is not claimable until ${later(10 * 60_000).toISOString().replace('.000', '')}`);
    expect(await releaseDueDelayedUnscoped(sql, clock.now())).toEqual([]);

    clock.advance(10 * 60_000 - 1);
    expect(await claimNextTodo(sql, c, c.queues, 60, clock.now())).toBeNull();
    clock.advance(1);
    // Due: claimable at once, before any reaper pass.
    expect((await claimNextTodo(sql, c, c.queues, 60, clock.now()))?.id).toBe(t.id);
    const { id: otherId } = await push(c, 'due already', {}, -500);
    // The reaper's release clears run_at and moves updated_at (what todo_ready's fresh read sees).
    const released = await releaseDueDelayedUnscoped(sql, clock.now());
    expect(released).toEqual([{ id: otherId, endpoint_id: c.endpointId, queue: 'reviews', state: 'pending' }]);
    expect(await getTodo(sql, c.endpointId, otherId)).toMatchObject({ run_at: null, updated_at: clock.now() });
  });

  it('the doorbell sweep never rings a delayed todo before it is released', async () => {
    const c = await newEndpoint();
    await sql`update endpoints set presence_seen = 'in' where id = ${c.endpointId}`;
    const t = await push(c, 'delayed', {}, 3600_000);
    clock.advance(30 * 60_000);
    expect((await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).map((r) => r.id)).not.toContain(t.id);
    clock.advance(31 * 60_000);
    await releaseDueDelayedUnscoped(sql, clock.now());
    expect((await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).map((r) => r.id)).toContain(t.id);
  });
});

describe("the doorbell sweep's charge", () => {
  /** An endpoint out with a todo waiting half an hour, whose return to in is claimed now. */
  async function heldThenBackIn() {
    const c = await newEndpoint();
    await sql`update endpoints set presence_seen = 'out' where id = ${c.endpointId}`;
    const held = await push(c, 'held while out');
    clock.advance(30 * 60_000);
    await sql`update endpoints set presence_seen = 'in', presence_changed_at = ${clock.now()} where id = ${c.endpointId}`;
    return { c, held };
  }

  it('holds what the return digest has not marked for the grace after a return to in, then rings it on its own schedule (issue 34 item 6)', async () => {
    // The return is claimed; its digest has not marked the backlog yet (DESIGN decision 9).
    const { c, held } = await heldThenBackIn();
    expect(await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).toEqual([]);
    clock.advance(RETURN_DIGEST_GRACE_SECONDS * 1000 - 1000);
    expect(await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).toEqual([]);
    // No digest was written: the todo is due from its creation, not a full backoff after the return.
    clock.advance(1000);
    expect((await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).map((r) => [r.id, r.ring_attempts])).toEqual([[held.id, 1]]);
  });

  it('a todo the return digest marked waits a full backoff from the digest', async () => {
    const { c, held } = await heldThenBackIn();
    expect(await announceByDigest(sql, c.endpointId, { since: clock.now() }, clock.now(), () => true)).toHaveLength(1);
    clock.advance(5 * 60_000 - 1000);
    expect(await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).toEqual([]);
    clock.advance(1000);
    expect((await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).map((r) => [r.id, r.ring_attempts, r.last_ringed_by])).toEqual([[held.id, 1, 'ring']]);
  });
});

describe('cancel', () => {
  it("fences off a claimed todo's lease: the holder's heartbeat and complete get a conflict, nothing changes", async () => {
    const c = await newEndpoint();
    const t = await push(c, 'in progress');
    const claimed = await claimTodo(sql, c, t.id, 300, clock.now(), 'token-hash');
    expect(claimed.state).toBe('claimed');
    const canceled = await cancelTodo(sql, c.endpointId, t.id, canceler, clock.now());
    expect(canceled).toMatchObject({ state: 'canceled', lease_expires_at: null, lease_token_hash: null, completed_at: clock.now() });
    expect(canceled.result).toEqual({ canceled_by: { id: canceler.id, handle: 'ops' }, detail: 'canceled by ops', previous_state: 'claimed' });
    for (const attempt of [
      completeTodo(sql, c, t.id, { ok: true }, clock.now(), 'token-hash'),
      heartbeatTodo(sql, c, t.id, 300, clock.now(), 'token-hash'),
    ]) {
      const e = await refusal(attempt);
      expect(e.code).toBe('conflict');
      expect(e.message).toMatch(/it was canceled/);
    }
    expect(await getTodo(sql, c.endpointId, t.id)).toMatchObject({ state: 'canceled', result: canceled.result });
  });

  it('takes pending and failed todos (dead letters too); done and canceled answer a conflict naming the state', async () => {
    const c = await newEndpoint();
    const pending = await push(c, 'pending');
    const dead = await push(c, 'dead', { maxAttempts: 1 });
    await claimTodo(sql, c, dead.id, 60, clock.now());
    expect(await failTodo(sql, c, dead.id, { why: 'x' }, clock.now())).toMatchObject({ state: 'failed', next_retry_at: null });
    const done = await push(c, 'done');
    await claimTodo(sql, c, done.id, 60, clock.now());
    await completeTodo(sql, c, done.id, null, clock.now());

    expect((await cancelTodo(sql, c.endpointId, pending.id, canceler, clock.now())).state).toBe('canceled');
    expect((await cancelTodo(sql, c.endpointId, dead.id, canceler, clock.now())).result).toMatchObject({ previous_state: 'failed' });
    for (const [id, state] of [
      [done.id, 'done'],
      [pending.id, 'canceled'],
    ] as const) {
      const e = await refusal(cancelTodo(sql, c.endpointId, id, canceler, clock.now()));
      expect({ code: e.code, state: e.details.state }).toEqual({ code: 'conflict', state });
      expect(e.message).toContain(`is already ${state}`);
    }
    const other = await newEndpoint();
    expect((await refusal(cancelTodo(sql, other.endpointId, pending.id, canceler, clock.now()))).code).toBe('not_found');
  });

  it('a canceled todo is never rung again by the doorbell sweep', async () => {
    const c = await newEndpoint();
    await sql`update endpoints set presence_seen = 'in' where id = ${c.endpointId}`;
    const rung = await push(c, 'rung once');
    const quiet = await push(c, 'canceled');
    await cancelTodo(sql, c.endpointId, quiet.id, canceler, clock.now());
    clock.advance(10 * 60_000);
    expect((await chargeDueRingsUnscoped(sql, [c.endpointId], clock.now())).map((r) => r.id)).toEqual([rung.id]);
  });

  it('gives the idempotency key up: the same key then makes a new todo', async () => {
    const c = await newEndpoint();
    const first = await push(c, 'keyed', { idempotencyKey: 'k-1' });
    const canceled = await cancelTodo(sql, c.endpointId, first.id, canceler, clock.now());
    expect(canceled).toMatchObject({ idempotency_key: null, result: expect.objectContaining({ idempotency_key: 'k-1' }) });
    clock.advance(1000);
    const again = await insertEventAndTodo(sql, operatorEvent, { endpointId: c.endpointId, queue: 'reviews', title: 'keyed', idempotencyKey: 'k-1' }, clock.now());
    expect(again.created).toBe(true);
    expect(again.todo.id).not.toBe(first.id);
  });
});

describe('retry', () => {
  const author: PushAuthor = { id: canceler.id, handle: 'ops', display_name: null, email: null };

  it('puts a dead letter back to pending with attempt 0 and a full ring budget, and rings it through the push fan-out', async () => {
    const c = await newEndpoint();
    const rung: string[] = [];
    const log = createLogger('silent');
    const service = new TodoService({ sql, clock, log }, { events: new TodoEvents({ sql, log, rings: { ringReady: (t) => void rung.push(t.id) } }) });
    const dead = await push(c, 'dead', { maxAttempts: 2 });
    for (let i = 0; i < 2; i++) {
      await claimTodo(sql, c, dead.id, 60, clock.now());
      await failTodo(sql, c, dead.id, { attempt: i }, clock.now());
      clock.advance(3600_000);
    }
    expect(await getTodo(sql, c.endpointId, dead.id)).toMatchObject({ state: 'failed', attempt: 2, next_retry_at: null });
    const retried = await service.retry(c.endpointId, dead.id);
    expect(retried).toMatchObject({ state: 'pending', attempt: 0, next_retry_at: null, completed_at: null, ring_attempts: 0, updated_at: clock.now() });
    expect(rung).toEqual([dead.id]);
    expect((await claimNextTodo(sql, c, c.queues, 60, clock.now()))?.id).toBe(dead.id);

    // Only failed todos: a claimed one is a conflict naming its state, and nothing rings.
    const e = await refusal(service.retry(c.endpointId, dead.id));
    expect({ code: e.code, state: e.details.state }).toEqual({ code: 'conflict', state: 'claimed' });
    const canceled = await push(c, 'canceled');
    await service.cancel(c.endpointId, canceled.id, author);
    expect((await refusal(service.retry(c.endpointId, canceled.id))).details.state).toBe('canceled');
    expect(rung).toEqual([dead.id]);
  });

  it('also takes a failed todo waiting for its retry, and refuses when a newer live todo holds its key', async () => {
    const c = await newEndpoint();
    const waiting = await push(c, 'waiting', { idempotencyKey: 'w-1' });
    await claimTodo(sql, c, waiting.id, 60, clock.now());
    expect((await failTodo(sql, c, waiting.id, null, clock.now())).next_retry_at).not.toBeNull();
    expect(await retryTodo(sql, c.endpointId, waiting.id, clock.now())).toMatchObject({ todo: { state: 'pending', attempt: 0 }, pushEligible: true });

    const dead = await push(c, 'dead', { idempotencyKey: 'd-1', maxAttempts: 1 });
    await claimTodo(sql, c, dead.id, 60, clock.now());
    await failTodo(sql, c, dead.id, null, clock.now());
    await push(c, 'newer', { idempotencyKey: 'd-1' });
    const e = await refusal(retryTodo(sql, c.endpointId, dead.id, clock.now()));
    expect(e.code).toBe('conflict');
    expect(e.message).toMatch(/already holds its idempotency key/);
    expect(await getTodo(sql, c.endpointId, dead.id)).toMatchObject({ state: 'failed', attempt: 1 });
  });
});

describe('listing', () => {
  it('filters dead letters apart from failed todos waiting for a retry, and canceled ones', async () => {
    const c = await newEndpoint();
    const dead = await push(c, 'dead', { maxAttempts: 1 });
    const waiting = await push(c, 'waiting');
    for (const t of [dead, waiting]) {
      await claimTodo(sql, c, t.id, 60, clock.now());
      await failTodo(sql, c, t.id, null, clock.now());
    }
    const canceled = await push(c, 'canceled');
    await cancelTodo(sql, c.endpointId, canceled.id, canceler, clock.now());
    const ids = async (state: 'dead' | 'failed' | 'canceled') => (await listTodos(sql, c.endpointId, { state, limit: 50 })).rows.map((t) => t.id);
    expect(await ids('dead')).toEqual([dead.id]);
    expect(await ids('failed')).toEqual([waiting.id, dead.id]);
    expect(await ids('canceled')).toEqual([canceled.id]);
  });

  it('pages newest first by keyset: todos pushed meanwhile never shift a page, and the last page has no next key', async () => {
    const c = await newEndpoint();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await push(c, `t${i}`)).id);
    // Two todos with the same created_at: seq breaks the tie.
    const same = clock.now();
    for (const title of ['same a', 'same b']) {
      ids.push((await insertEventAndTodo(sql, operatorEvent, { endpointId: c.endpointId, queue: 'reviews', title }, same)).todo.id);
    }
    const newestFirst = [...ids].reverse();
    const first = await listTodos(sql, c.endpointId, { limit: 3 });
    expect(first.rows.map((t) => t.id)).toEqual(newestFirst.slice(0, 3));
    await push(c, 'pushed while paging');
    const second = await listTodos(sql, c.endpointId, { limit: 3, after: first.next });
    expect(second.rows.map((t) => t.id)).toEqual(newestFirst.slice(3, 6));
    const third = await listTodos(sql, c.endpointId, { limit: 3, after: second.next });
    expect(third.rows.map((t) => t.id)).toEqual(newestFirst.slice(6));
    expect(third.next).toBeNull();
  });
});

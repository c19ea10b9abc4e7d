import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { ManualClock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import { SwitchboardError } from '../../domain/errors.ts';
import { DEFAULT_LEASE_SECONDS, retryBackoffSeconds } from '../../domain/lifecycle.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import {
  claimNextTodo,
  claimTodo,
  completeTodo,
  failTodo,
  freshReadyTodos,
  freshReadyTodosOf,
  getTodo,
  heartbeatTodo,
  insertEventAndTodo,
  listTodos,
  reapExpiredLeasesUnscoped,
  releaseTodo,
  requeueDueRetriesUnscoped,
  type Caller,
  type EventInput,
} from './index.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');
const operatorEvent: EventInput = { source: 'operator', family: 'operator', trustMode: 'operator', verified: true };

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'todo-tester' })).id;
});
afterAll(async () => db.drop());

async function newEndpoint(queues = ['reviews', 'inbox']): Promise<Caller> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues }, clock.now());
  return { endpointId: endpoint.id, owner: `agent:${endpoint.agent_id}`, queues };
}

async function push(caller: Caller, title: string, extra: { queue?: string; key?: string } = {}) {
  clock.advance(1000);
  const r = await insertEventAndTodo(
    sql,
    { ...operatorEvent, externalId: extra.key ?? null },
    { endpointId: caller.endpointId, queue: extra.queue ?? caller.queues[0]!, title, idempotencyKey: extra.key ?? null, payload: { title } },
    clock.now(),
  );
  return r;
}

const codeOf = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    if (e instanceof SwitchboardError) return e.code;
    throw e;
  }
  return 'ok';
};

describe('insertEventAndTodo', () => {
  it('creates a pending todo with a td_ uuid id, its event, and the payload size', async () => {
    const c = await newEndpoint();
    const { todo, created, eventId } = await push(c, 'first');
    expect(created).toBe(true);
    expect(todo.id).toMatch(/^td_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(todo).toMatchObject({ state: 'pending', attempt: 0, max_attempts: 5, queue: 'reviews', ring_attempts: 0 });
    // jsonb's own rendering of the stored payload
    expect(todo.payload_size).toBe(Buffer.byteLength('{"title": "first"}'));
    const [ev] = await sql`select trust_mode, verified from events where id = ${eventId}`;
    expect(ev).toEqual({ trust_mode: 'operator', verified: true });
  });

  it('stores any JSON payload as it came, arrays of booleans and bare scalars included', async () => {
    const c = await newEndpoint();
    for (const payload of [[true, false], true, 7, 'text', [['nested'], { a: null }], { '': [false] }]) {
      const { todo } = await insertEventAndTodo(sql, operatorEvent, { endpointId: c.endpointId, queue: 'reviews', title: 'json', payload }, clock.now());
      expect(todo.payload).toEqual(payload);
    }
  });

  it('collapses a repeated key onto the live todo and writes nothing', async () => {
    const c = await newEndpoint();
    const a = await push(c, 'keyed', { key: 'k1' });
    const before = (await sql<{ events: number }[]>`select count(*)::int as events from events`)[0]!.events;
    const b = await push(c, 'keyed again', { key: 'k1' });
    expect(b.created).toBe(false);
    expect(b.todo.id).toBe(a.todo.id);
    const after = (await sql<{ events: number }[]>`select count(*)::int as events from events`)[0]!.events;
    expect(after).toBe(before);
  });

  it('scopes keys per endpoint: the same key on two endpoints makes two todos', async () => {
    const a = await push(await newEndpoint(), 't', { key: 'shared' });
    const b = await push(await newEndpoint(), 't', { key: 'shared' });
    expect(a.created && b.created).toBe(true);
    expect(a.todo.id).not.toBe(b.todo.id);
  });

  it('lets a done todo free its key, but a todo waiting on a retry keeps it', async () => {
    const c = await newEndpoint();
    const first = await push(c, 'job', { key: 'job-1' });
    await claimTodo(sql, c, first.todo.id, 60, clock.now());
    await failTodo(sql, c, first.todo.id, { why: 'flaky' }, clock.now());
    expect((await push(c, 'job', { key: 'job-1' })).created).toBe(false);
    clock.advance(retryBackoffSeconds(1) * 1000 + 1);
    await claimTodo(sql, c, first.todo.id, 60, clock.now());
    await completeTodo(sql, c, first.todo.id, { ok: true }, clock.now());
    const again = await push(c, 'job', { key: 'job-1' });
    expect(again.created).toBe(true);
    expect(again.todo.id).not.toBe(first.todo.id);
  });
});

describe('insertEventAndTodo: the todo_ready wakeup', () => {
  /** The todo_ready payloads heard while `run` pushes, on a LISTEN connection of the test's own. */
  async function heardDuring(run: () => Promise<unknown>): Promise<string[]> {
    const heard: string[] = [];
    const listener = await sql.listen('todo_ready', (payload) => void heard.push(payload));
    try {
      await run();
      await sql`select pg_notify('todo_ready', 'marker')`;
      const deadline = Date.now() + 5000;
      while (!heard.includes('marker') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      return heard.filter((p) => p !== 'marker');
    } finally {
      await listener.unlisten();
    }
  }
  const pushAs = (c: Caller, instanceId: string | null) =>
    insertEventAndTodo(sql, operatorEvent, { endpointId: c.endpointId, queue: 'reviews', title: 'wake' }, clock.now(), instanceId);

  it('is broadcast when another instance is registered, or when the pusher does not say which it is', async () => {
    const c = await newEndpoint();
    await sql`insert into instances (id, started_at, heartbeat_at, version) values ('i_other', now(), now(), 'test')`;
    try {
      expect(await heardDuring(() => pushAs(c, 'i_me'))).toEqual([`${c.endpointId}:reviews`]);
    } finally {
      await sql`delete from instances where id = 'i_other'`;
    }
    expect(await heardDuring(() => pushAs(c, null))).toEqual([`${c.endpointId}:reviews`]);
  });

  it('is not broadcast while the pushing instance is the only one registered; the push still reports it ready', async () => {
    const c = await newEndpoint();
    await sql`insert into instances (id, started_at, heartbeat_at, version) values ('i_me', now(), now(), 'test')`;
    try {
      let pushed: Awaited<ReturnType<typeof pushAs>> | undefined;
      expect(await heardDuring(async () => (pushed = await pushAs(c, 'i_me')))).toEqual([]);
      expect(pushed).toMatchObject({ created: true, pushEligible: true });
    } finally {
      await sql`delete from instances where id = 'i_me'`;
    }
  });
});

describe('freshReadyTodos / freshReadyTodosOf: what a todo_ready wakeup and the LISTEN catch-up ring', () => {
  const pushed = async (c: Caller, n: number) => {
    const titles = Array.from({ length: n }, (_, i) => `ready ${i}`);
    for (const t of titles) await push(c, t);
    return titles;
  };

  it('with more unclaimed todos than the limit, take the latest to become ready (the one just pushed among them), oldest first', async () => {
    const c = await newEndpoint();
    const titles = await pushed(c, 20);
    expect((await freshReadyTodos(sql, c.endpointId, 'reviews', clock.now(), { limit: 16 })).map((t) => t.title)).toEqual(titles.slice(4));
    const other = await newEndpoint();
    const fewer = await pushed(other, 2);
    const all = await freshReadyTodosOf(sql, [c.endpointId, other.endpointId], clock.now(), { limit: 3 });
    expect(all.filter((t) => t.endpoint_id === c.endpointId).map((t) => t.title)).toEqual(titles.slice(17));
    expect(all.filter((t) => t.endpoint_id === other.endpointId).map((t) => t.title)).toEqual(fewer);
  });
});

describe('claimTodo / claimNextTodo', () => {
  it('claims the oldest pending todo first and sets owner, lease and attempt', async () => {
    const c = await newEndpoint();
    const a = await push(c, 'a');
    await push(c, 'b');
    const got = await claimNextTodo(sql, c, c.queues, DEFAULT_LEASE_SECONDS, clock.now());
    expect(got?.id).toBe(a.todo.id);
    expect(got).toMatchObject({ state: 'claimed', owner: c.owner, attempt: 1 });
    expect(got!.lease_expires_at!.getTime()).toBe(clock.now().getTime() + DEFAULT_LEASE_SECONDS * 1000);
  });

  it('returns null when nothing is claimable', async () => {
    const c = await newEndpoint();
    expect(await claimNextTodo(sql, c, c.queues, 60, clock.now())).toBeNull();
  });

  it('gives concurrent claimers different todos (SKIP LOCKED), never one todo twice', async () => {
    const c = await newEndpoint();
    for (let i = 0; i < 10; i++) await push(c, `job ${i}`);
    const results = await Promise.all(Array.from({ length: 10 }, () => claimNextTodo(sql, c, c.queues, 60, clock.now())));
    const ids = results.map((r) => r?.id).filter(Boolean);
    expect(new Set(ids).size).toBe(ids.length);
    const claimed = (await sql<{ claimed: number }[]>`select count(*)::int as claimed from todos where endpoint_id = ${c.endpointId} and state = 'claimed'`)[0]!.claimed;
    expect(claimed).toBe(ids.length);
    expect(await claimNextTodo(sql, c, c.queues, 60, clock.now())).toBeNull();
  });

  for (const planMode of ['force_custom_plan', 'force_generic_plan'] as const) {
    it(`locks only the todo it takes: a claim held open leaves the next one claimable, oldest first (${planMode})`, async () => {
      const c = await newEndpoint();
      // A history to walk past and pending work in both queues, interleaved in age.
      for (let i = 0; i < 30; i++) {
        const done = await push(c, `old ${i}`, { queue: i % 2 ? 'inbox' : 'reviews' });
        await sql`update todos set state = 'done', completed_at = now() where id = ${done.todo.id}`;
      }
      const pending = [];
      // The pool holds 5 connections: 3 claimers and a late one.
      for (let i = 0; i < 3; i++) pending.push((await push(c, `job ${i}`, { queue: i % 2 ? 'inbox' : 'reviews' })).todo.id);
      const holders = [];
      const taken: string[] = [];
      try {
        // Each claimer keeps its transaction open, as a slow commit would: the next must still find work.
        for (let i = 0; i < pending.length; i++) {
          const conn = await sql.reserve();
          holders.push(conn);
          await conn`begin`;
          await conn.unsafe(`set local plan_cache_mode = ${planMode}`);
          const got = await claimNextTodo(conn as unknown as Sql, c, c.queues, 60, clock.now());
          expect(got?.id, `claimer ${i}`).toBe(pending[i]);
          taken.push(got!.id);
        }
        const late = await sql.reserve();
        holders.push(late);
        expect(await claimNextTodo(late as unknown as Sql, c, c.queues, 60, clock.now())).toBeNull();
      } finally {
        for (const h of holders) {
          await h`commit`.catch(() => {});
          h.release();
        }
      }
      expect(taken).toEqual(pending);
    });
  }

  it('only claims from the queues asked for', async () => {
    const c = await newEndpoint();
    await push(c, 'in inbox', { queue: 'inbox' });
    expect(await claimNextTodo(sql, c, ['reviews'], 60, clock.now())).toBeNull();
    expect((await claimNextTodo(sql, c, ['inbox'], 60, clock.now()))?.title).toBe('in inbox');
  });

  it('answers not_found for another endpoint\'s todo, exactly as for an unknown id', async () => {
    const mine = await newEndpoint();
    const theirs = await newEndpoint();
    const t = await push(theirs, 'not yours');
    expect(await codeOf(claimTodo(sql, mine, t.todo.id, 60, clock.now()))).toBe('not_found');
    expect(await codeOf(claimTodo(sql, mine, 'td_00000000-0000-4000-8000-000000000000', 60, clock.now()))).toBe('not_found');
    expect((await getTodo(sql, theirs.endpointId, t.todo.id))?.state).toBe('pending');
  });

  it('refuses a todo in a queue the caller is not granted (forbidden) and a held todo (conflict)', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x', { queue: 'inbox' });
    expect(await codeOf(claimTodo(sql, { ...c, queues: ['reviews'] }, t.todo.id, 60, clock.now()))).toBe('forbidden');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    expect(await codeOf(claimTodo(sql, c, t.todo.id, 60, clock.now()))).toBe('conflict');
  });

  it('takes over an expired lease before the reaper runs, spending an attempt', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    clock.advance(61_000);
    const again = await claimTodo(sql, c, t.todo.id, 60, clock.now());
    expect(again.attempt).toBe(2);
  });
});

describe('heartbeat, complete, fail, release', () => {
  it('heartbeat resets the lease from now', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    clock.advance(30_000);
    const hb = await heartbeatTodo(sql, c, t.todo.id, 120, clock.now());
    expect(hb.lease_expires_at!.getTime()).toBe(clock.now().getTime() + 120_000);
    expect(hb.attempt).toBe(1);
  });

  it('complete and fail store any JSON result as given; no result, or JSON null, stores none', async () => {
    const c = await newEndpoint();
    for (const [result, stored] of [[[true, false], [true, false]], ['text', 'text'], [0, 0], [null, null], [undefined, null]] as const) {
      for (const finish of [completeTodo, failTodo]) {
        const t = await push(c, 'x');
        await claimTodo(sql, c, t.todo.id, 60, clock.now());
        expect((await finish(sql, c, t.todo.id, result, clock.now())).result).toEqual(stored);
      }
    }
  });

  it('heartbeat, complete, fail and release, and a listing, answer without the payload (none of them shows it)', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    const beat = await heartbeatTodo(sql, c, t.todo.id, 60, clock.now());
    expect(beat).not.toHaveProperty('payload');
    expect(beat).toMatchObject({ id: t.todo.id, state: 'claimed', payload_size: t.todo.payload_size });
    const released = await releaseTodo(sql, c, t.todo.id, clock.now());
    expect(released).not.toHaveProperty('payload');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    expect(await failTodo(sql, c, t.todo.id, null, clock.now())).not.toHaveProperty('payload');
    const { rows } = await listTodos(sql, c.endpointId, { limit: 10, after: null });
    expect(rows.map((r) => r.id)).toEqual([t.todo.id]);
    expect(rows[0]).not.toHaveProperty('payload');
  });

  it('complete finishes the todo with its result; a second complete is a conflict', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    const done = await completeTodo(sql, c, t.todo.id, { merged: true }, clock.now());
    expect(done).toMatchObject({ state: 'done', result: { merged: true }, lease_expires_at: null });
    expect(await codeOf(completeTodo(sql, c, t.todo.id, null, clock.now()))).toBe('conflict');
  });

  it('fail schedules retries at 30 s doubling to a 15 min cap, and dead-letters at the attempt cap', async () => {
    expect([1, 2, 3, 4, 5, 6, 9].map(retryBackoffSeconds)).toEqual([30, 60, 120, 240, 480, 900, 900]);
    const c = await newEndpoint();
    const t = await push(c, 'x');
    for (let attempt = 1; attempt <= 5; attempt++) {
      const claimed = await claimTodo(sql, c, t.todo.id, 60, clock.now());
      expect(claimed.attempt).toBe(attempt);
      const failed = await failTodo(sql, c, t.todo.id, { attempt }, clock.now());
      if (attempt < 5) {
        expect(failed.next_retry_at!.getTime() - clock.now().getTime()).toBe(retryBackoffSeconds(attempt) * 1000);
        // Not claimable until the wait is over.
        expect(await codeOf(claimTodo(sql, c, t.todo.id, 60, clock.now()))).toBe('conflict');
        clock.advance(retryBackoffSeconds(attempt) * 1000);
      } else {
        expect(failed).toMatchObject({ state: 'failed', next_retry_at: null });
        expect(failed.completed_at).not.toBeNull();
      }
    }
    clock.advance(3_600_000);
    expect(await codeOf(claimTodo(sql, c, t.todo.id, 60, clock.now()))).toBe('conflict');
    expect(await requeueDueRetriesUnscoped(sql, clock.now())).not.toContainEqual(expect.objectContaining({ id: t.todo.id }));
  });

  it('release hands the todo back without refunding the attempt', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    const released = await releaseTodo(sql, c, t.todo.id, clock.now());
    expect(released).toMatchObject({ state: 'pending', owner: null, attempt: 1, lease_expires_at: null });
  });

  it('refuses transitions by an owner that does not hold the claim', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    expect(await codeOf(completeTodo(sql, c, t.todo.id, null, clock.now()))).toBe('conflict');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    expect(await codeOf(heartbeatTodo(sql, { ...c, owner: 'agent:someone-else' }, t.todo.id, 60, clock.now()))).toBe('conflict');
  });
});

describe('reaper sweeps', () => {
  it('returns expired leases to pending, and dead-letters them on the last attempt', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    clock.advance(59_000);
    expect((await reapExpiredLeasesUnscoped(sql, clock.now())).map((m) => m.id)).not.toContain(t.todo.id);
    clock.advance(2_000);
    const moved = await reapExpiredLeasesUnscoped(sql, clock.now());
    expect(moved).toContainEqual({ id: t.todo.id, endpoint_id: c.endpointId, queue: 'reviews', state: 'pending' });
    expect((await getTodo(sql, c.endpointId, t.todo.id))).toMatchObject({ state: 'pending', owner: null, attempt: 1 });

    await sql`update todos set attempt = max_attempts - 1 where id = ${t.todo.id}`;
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    clock.advance(61_000);
    await reapExpiredLeasesUnscoped(sql, clock.now());
    expect(await getTodo(sql, c.endpointId, t.todo.id)).toMatchObject({ state: 'failed', next_retry_at: null, result: { error: 'lease_expired' } });
  });

  it('requeues failed todos whose retry wait is over', async () => {
    const c = await newEndpoint();
    const t = await push(c, 'x');
    await claimTodo(sql, c, t.todo.id, 60, clock.now());
    await failTodo(sql, c, t.todo.id, null, clock.now());
    clock.advance(29_000);
    expect((await requeueDueRetriesUnscoped(sql, clock.now())).map((m) => m.id)).not.toContain(t.todo.id);
    clock.advance(1_000);
    expect((await requeueDueRetriesUnscoped(sql, clock.now())).map((m) => m.id)).toContain(t.todo.id);
    expect(await getTodo(sql, c.endpointId, t.todo.id)).toMatchObject({ state: 'pending', owner: null, next_retry_at: null });
  });
});

describe('listTodos', () => {
  it('lists newest first within one endpoint, filtered by state and queue, never synthetic rows', async () => {
    const c = await newEndpoint();
    const other = await newEndpoint();
    const a = await push(c, 'a');
    const b = await push(c, 'b', { queue: 'inbox' });
    await push(other, 'other');
    await insertEventAndTodo(sql, operatorEvent, { endpointId: c.endpointId, queue: 'reviews', title: 'self-test', synthetic: true }, clock.now());
    expect((await listTodos(sql, c.endpointId, { limit: 50 })).rows.map((t) => t.id)).toEqual([b.todo.id, a.todo.id]);
    expect((await listTodos(sql, c.endpointId, { limit: 50, queue: 'inbox' })).rows.map((t) => t.id)).toEqual([b.todo.id]);
    await claimTodo(sql, c, a.todo.id, 60, clock.now());
    expect((await listTodos(sql, c.endpointId, { limit: 50, state: 'claimed' })).rows.map((t) => t.id)).toEqual([a.todo.id]);
    expect((await listTodos(sql, c.endpointId, { limit: 1 })).rows).toHaveLength(1);
  });
});

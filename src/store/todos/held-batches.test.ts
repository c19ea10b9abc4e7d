import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { countingPool as countingPoolOf } from '../../../test/support/counting-pool.ts';
import { ManualClock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import { SwitchboardError } from '../../domain/errors.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import { HeldTransitions, MAX_TRANSITIONS_PER_STATEMENT, claimTodo, insertEventAndTodo, type Caller } from './index.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'held-tester' })).id;
});
afterAll(async () => db.drop());

async function newEndpoint(): Promise<Caller> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues: ['reviews'] }, clock.now());
  return { endpointId: endpoint.id, owner: `agent:${endpoint.agent_id}`, queues: ['reviews'] };
}

/** A pending todo, claimed by `c` with the fence hash given. */
async function claimed(c: Caller, title: string, hash: string | null = null): Promise<string> {
  const { todo } = await insertEventAndTodo(
    sql,
    { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
    { endpointId: c.endpointId, queue: 'reviews', title, payload: { title } },
    clock.now(),
  );
  await claimTodo(sql, c, todo.id, 60, clock.now(), hash);
  return todo.id;
}

/** A pool that counts the transition statements sent through it. */
const countingPool = () => countingPoolOf(sql, (text) => text.includes('lease_hash'));

const failure = async (p: Promise<unknown>): Promise<SwitchboardError> => {
  try {
    await p;
  } catch (err) {
    if (err instanceof SwitchboardError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
};

describe('HeldTransitions', () => {
  it('completes made in one turn go together in one statement, each with its own result and time', async () => {
    const c = await newEndpoint();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await claimed(c, `job ${i}`));
    const { pool, statements } = countingPool();
    const held = new HeldTransitions(pool);
    const done = await Promise.all(
      ids.map((id, i) => held.complete(c, { id, result: { job: i }, now: new Date(clock.now().getTime() + i * 1000), leaseTokenHash: null })),
    );
    // The six of one turn went together (gatheredRuns).
    expect(statements()).toBe(1);
    for (const [i, t] of done.entries()) {
      expect(t).toMatchObject({ id: ids[i], state: 'done', result: { job: i }, lease_expires_at: null, lease_token_hash: null });
      expect(t.completed_at?.getTime()).toBe(clock.now().getTime() + i * 1000);
    }
    const rows = await sql<{ id: string; state: string; result: unknown }[]>`select id, state, result from todos where id = any(${ids})`;
    expect(rows.map((r) => [r.id, r.state, r.result]).sort()).toEqual(ids.map((id, i) => [id, 'done', { job: i }]).sort());
  });

  it('refuses, within a shared statement, only the calls whose todo the caller does not hold, each as a lone call is refused', async () => {
    const c = await newEndpoint();
    const other = await newEndpoint();
    const first = await claimed(c, 'held');
    const good = await claimed(c, 'fenced', 'right-hash');
    const fenced = await claimed(c, 'fenced, wrong token', 'right-hash');
    const foreign = await claimed(other, 'another endpoint');
    const { pool, statements } = countingPool();
    const held = new HeldTransitions(pool);
    const now = clock.now();
    const calls = [
      held.complete(c, { id: first, result: null, now, leaseTokenHash: null }),
      held.complete(c, { id: good, result: 'ok', now, leaseTokenHash: 'right-hash' }),
      held.complete(c, { id: fenced, result: 'ok', now, leaseTokenHash: 'wrong-hash' }),
      held.complete(c, { id: foreign, result: 'ok', now, leaseTokenHash: null }),
    ];
    const [alone, right, wrong, elsewhere] = await Promise.allSettled(calls);
    expect(statements()).toBe(1);
    expect(alone).toMatchObject({ status: 'fulfilled', value: { id: first, state: 'done', result: null } });
    expect(right).toMatchObject({ status: 'fulfilled', value: { id: good, state: 'done', result: 'ok' } });
    expect(await failure(calls[2]!)).toMatchObject({ code: 'conflict', message: `cannot complete todo ${fenced}: its claim is fenced and lease_token is missing or wrong` });
    expect(await failure(calls[3]!)).toMatchObject({ code: 'not_found' });
    expect(wrong!.status).toBe('rejected');
    expect(elsewhere!.status).toBe('rejected');
    const [row] = await sql<{ state: string }[]>`select state from todos where id = ${fenced}`;
    expect(row?.state).toBe('claimed');
  });

  it('never puts two calls on one todo in one statement: the later finds what the first left', async () => {
    const c = await newEndpoint();
    const blocker = await claimed(c, 'another todo in the first statement');
    const id = await claimed(c, 'completed twice');
    const { pool, statements } = countingPool();
    const held = new HeldTransitions(pool);
    const now = clock.now();
    const [, once, twice] = await Promise.allSettled([
      held.complete(c, { id: blocker, result: null, now, leaseTokenHash: null }),
      held.complete(c, { id, result: 1, now, leaseTokenHash: null }),
      held.complete(c, { id, result: 2, now, leaseTokenHash: null }),
    ]);
    // The second call on the todo waited for the statement that took the first.
    expect(statements()).toBe(2);
    expect(once).toMatchObject({ status: 'fulfilled', value: { result: 1 } });
    expect(twice).toMatchObject({ status: 'rejected', reason: { code: 'conflict', message: `cannot complete todo ${id}: it is already finished (state done), so no claim on it is left`, details: { state: 'done' } } });
  });

  it('heartbeats extend each lease from its own time; fail and release go by kind, not with completes', async () => {
    const c = await newEndpoint();
    const ids = await Promise.all(['a', 'b', 'c', 'd'].map((t) => claimed(c, t)));
    const { pool, statements } = countingPool();
    const held = new HeldTransitions(pool);
    const now = clock.now().getTime();
    const [beat1, beat2, failed, released] = await Promise.all([
      held.heartbeat(c, { id: ids[0]!, lease: 600, now: new Date(now), leaseTokenHash: null }),
      held.heartbeat(c, { id: ids[1]!, lease: 120, now: new Date(now + 5000), leaseTokenHash: null }),
      held.fail(c, { id: ids[2]!, result: { error: 'boom' }, now: new Date(now), leaseTokenHash: null }),
      held.release(c, { id: ids[3]!, now: new Date(now), leaseTokenHash: null }),
    ]);
    // Each kind's calls of this turn go together: three statements, the two heartbeats in one.
    expect(statements()).toBe(3);
    expect(beat1.lease_expires_at?.getTime()).toBe(now + 600_000);
    expect(beat2.lease_expires_at?.getTime()).toBe(now + 5000 + 120_000);
    expect(failed).toMatchObject({ state: 'failed', result: { error: 'boom' } });
    expect(failed.next_retry_at).not.toBeNull();
    expect(released).toMatchObject({ state: 'pending', owner: null });
  });

  it(`takes at most ${MAX_TRANSITIONS_PER_STATEMENT} calls in one statement`, async () => {
    const c = await newEndpoint();
    const ids: string[] = [];
    for (let i = 0; i < MAX_TRANSITIONS_PER_STATEMENT + 2; i++) ids.push(await claimed(c, `job ${i}`));
    const { pool, statements } = countingPool();
    const held = new HeldTransitions(pool);
    const done = await Promise.all(ids.map((id) => held.complete(c, { id, result: null, now: clock.now(), leaseTokenHash: null })));
    // MAX in one statement, then the two left over.
    expect(statements()).toBe(2);
    expect(done.every((t) => t.state === 'done')).toBe(true);
  });
});

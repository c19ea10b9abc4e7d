import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { countingPool as countingPoolOf } from '../../../test/support/counting-pool.ts';
import { ManualClock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import { FinishThenClaim, claimTodo, insertEventAndTodo, type Caller } from './index.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'finish-tester' })).id;
});
afterAll(async () => db.drop());

async function newEndpoint(): Promise<Caller> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues: ['reviews', 'inbox'] }, clock.now());
  return { endpointId: endpoint.id, owner: `agent:${endpoint.agent_id}`, queues: ['reviews', 'inbox'], sessionId: 'ses_finisher' };
}

/** A pending todo of `c`, created a second after the last one (so creation order is claim order). */
async function pending(c: Caller, title: string, queue = 'reviews'): Promise<string> {
  clock.advance(1000);
  const { todo } = await insertEventAndTodo(
    sql,
    { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
    { endpointId: c.endpointId, queue, title, payload: { title } },
    clock.now(),
  );
  return todo.id;
}

async function held(c: Caller, title: string, leaseSecs = 60): Promise<string> {
  const id = await pending(c, title);
  await claimTodo(sql, c, id, leaseSecs, clock.now());
  return id;
}

const stateOf = async (id: string) => (await sql<{ state: string; claimed_session_id: string | null; lease_token_hash: string | null }[]>`
  select state, claimed_session_id, lease_token_hash from todos where id = ${id}`)[0]!;

/** A pool that counts the finish-then-claim statements sent through it. */
const countingPool = () => countingPoolOf(sql, (text) => text.includes('finished as ('));

const next = (queues = ['reviews'], leaseTokenHash: string | null = null) => ({ queues, leaseSecs: 300, session: 'ses_finisher', leaseTokenHash });

describe('FinishThenClaim', () => {
  it('finishes the calls of one turn and claims a todo for each, oldest first, in one statement', async () => {
    const c = await newEndpoint();
    const finishing = [await held(c, 'a'), await held(c, 'b'), await held(c, 'c')];
    const waiting = [await pending(c, 'd'), await pending(c, 'e'), await pending(c, 'f'), await pending(c, 'g')];
    const { pool, statements } = countingPool();
    const batch = new FinishThenClaim(pool);
    const now = clock.now();
    const answers = await Promise.all(finishing.map((id, i) => batch.add(c, 'complete', { id, result: { i }, now, leaseTokenHash: null }, next())!));
    expect(statements()).toBe(1);
    expect(answers.map((a) => [a.finished.id, a.finished.state, a.finished.result])).toEqual(finishing.map((id, i) => [id, 'done', { i }]));
    expect(answers.map((a) => a.claimed?.id)).toEqual(waiting.slice(0, 3));
    expect(answers[0]!.claimed).toMatchObject({ state: 'claimed', attempt: 1, claimed_session_id: 'ses_finisher', payload: { title: 'd' }, acked_rings: [] });
    expect(await stateOf(waiting[3]!)).toMatchObject({ state: 'pending' });
  });

  it('claims nothing for a refused finish, and seats the claims of the others in call order', async () => {
    const c = await newEndpoint();
    const first = await held(c, 'held first');
    const notHeld = await pending(c, 'never claimed');
    const last = await held(c, 'held last');
    const waiting = [await pending(c, 'next 1'), await pending(c, 'next 2')];
    const { pool, statements } = countingPool();
    const batch = new FinishThenClaim(pool);
    const now = clock.now();
    const [one, refused, two] = await Promise.allSettled([
      batch.add(c, 'complete', { id: first, result: null, now, leaseTokenHash: null }, next())!,
      batch.add(c, 'complete', { id: notHeld, result: null, now, leaseTokenHash: null }, next())!,
      batch.add(c, 'complete', { id: last, result: null, now, leaseTokenHash: null }, next())!,
    ]);
    expect(statements()).toBe(1);
    expect(refused).toMatchObject({ status: 'rejected', reason: { code: 'conflict' } });
    // Two finishes took, so two claims, of the two oldest pending todos (the refused call's own
    // pending todo is one of them); the third oldest stays pending.
    expect(one).toMatchObject({ status: 'fulfilled', value: { finished: { id: first, state: 'done' }, claimed: { id: notHeld } } });
    expect(two).toMatchObject({ status: 'fulfilled', value: { finished: { id: last, state: 'done' }, claimed: { id: waiting[0] } } });
    expect(await stateOf(waiting[1]!)).toMatchObject({ state: 'pending' });
  });

  it('never claims back the todo it finishes, even one whose lease ran out (claimable in the same snapshot)', async () => {
    const c = await newEndpoint();
    const expired = await held(c, 'lease runs out', 1);
    clock.advance(5_000);
    const batch = new FinishThenClaim(sql);
    const answer = await batch.add(c, 'complete', { id: expired, result: 'late', now: clock.now(), leaseTokenHash: null }, next())!;
    expect(answer).toMatchObject({ finished: { id: expired, state: 'done', result: 'late' }, claimed: null });
    expect(await stateOf(expired)).toMatchObject({ state: 'done' });
  });

  it('answers claimed: null when nothing is claimable on the queues asked for, and fences the claim it makes', async () => {
    const c = await newEndpoint();
    const a = await held(c, 'a');
    const inbox = await pending(c, 'in the inbox', 'inbox');
    const batch = new FinishThenClaim(sql);
    const empty = await batch.add(c, 'fail', { id: a, result: { why: 'x' }, now: clock.now(), leaseTokenHash: null }, next(['reviews']))!;
    // Failed: retried after its backoff, so not claimable now, and nothing else waits on reviews.
    expect(empty).toMatchObject({ finished: { id: a, state: 'failed' }, claimed: null });
    const b = await held(c, 'b');
    const fenced = await batch.add(c, 'complete', { id: b, result: null, now: clock.now(), leaseTokenHash: null }, next(['inbox'], 'hash-of-token'))!;
    expect(fenced.claimed).toMatchObject({ id: inbox, queue: 'inbox' });
    expect(await stateOf(inbox)).toEqual({ state: 'claimed', claimed_session_id: 'ses_finisher', lease_token_hash: 'hash-of-token' });
  });

  it('is not offered when only the reserved queue is asked for', async () => {
    const c = await newEndpoint();
    expect(new FinishThenClaim(sql).add(c, 'complete', { id: 'td_x', result: null, now: clock.now(), leaseTokenHash: null }, next(['quarantine']))).toBeNull();
  });
});

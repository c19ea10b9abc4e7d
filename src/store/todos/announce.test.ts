import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import type { Sql } from '../../db/connect.ts';
import { ManualClock } from '../../lib/clock.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import { announceByDigest, chargeDueRingsUnscoped, insertEventAndTodo, ringReadyOnce, type BacklogTodo, type EventInput } from './index.ts';

// A ring that reaches no session must never hide its todo from a reconnect digest that counts the
// endpoint at the same moment (another instance's new stream): the digest waits for the ring's
// outcome and counts the todo. Before the ring and its withdrawal shared one transaction, the
// digest could run between them, skip the todo as "its ring's", and the new stream heard of it
// neither way (the announce-once fault test's "told 0 times (dropped: no_stream)").

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');
const operatorEvent: EventInput = { source: 'operator', family: 'operator', trustMode: 'operator', verified: true };

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'announce-tester' })).id;
});
afterAll(async () => db.drop());

async function endpointWithTodo(): Promise<{ endpointId: string; todoId: string }> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues: ['reviews'] }, clock.now());
  await sql`update endpoints set presence_seen = 'in' where id = ${endpoint.id}`;
  const { todo } = await insertEventAndTodo(sql, operatorEvent, { endpointId: endpoint.id, queue: 'reviews', title: 'waiting' }, clock.now());
  return { endpointId: endpoint.id, todoId: todo.id };
}

/** A reconnect digest of a stream that attached at `attachedAt`, started now and written successfully. */
const digestOf = (endpointId: string, attachedAt: Date): Promise<BacklogTodo[] | null> =>
  announceByDigest(sql, endpointId, { since: attachedAt, readyBy: attachedAt }, clock.now(), () => true);

describe('a ring that reached no session and a digest at the same moment', () => {
  it('chargeDueRingsUnscoped: the digest started while the sweep rings counts the todo the sweep could not ring', async () => {
    const { endpointId, todoId } = await endpointWithTodo();
    clock.advance(10 * 60_000);
    const attachedAt = clock.now();
    let digest: Promise<BacklogTodo[] | null> | undefined;
    const charged = await chargeDueRingsUnscoped(sql, [endpointId], clock.now(), {
      ring: (todos) => {
        digest = digestOf(endpointId, attachedAt);
        return todos.map((t) => t.id);
      },
    });
    expect(charged.map((t) => [t.id, t.ring_attempts])).toEqual([[todoId, 1]]);
    expect((await digest)?.map((t) => t.id)).toEqual([todoId]);
    const [row] = await sql`select ring_attempts, last_ringed_by from todos where id = ${todoId}`;
    expect(row).toEqual({ ring_attempts: 1, last_ringed_by: 'digest' });
  });

  it('chargeDueRingsUnscoped: a todo the sweep did ring is its ring\'s, and the digest leaves it', async () => {
    const { endpointId, todoId } = await endpointWithTodo();
    clock.advance(10 * 60_000);
    const attachedAt = clock.now();
    let digest: Promise<BacklogTodo[] | null> | undefined;
    await chargeDueRingsUnscoped(sql, [endpointId], clock.now(), {
      ring: () => {
        digest = digestOf(endpointId, attachedAt);
        return [];
      },
    });
    expect(await digest).toEqual([]);
    expect((await sql`select last_ringed_by from todos where id = ${todoId}`)[0]).toEqual({ last_ringed_by: 'ring' });
  });

  it('ringReadyOnce: the digest started while the ready ring is written counts the todo when the write did not land', async () => {
    const { endpointId, todoId } = await endpointWithTodo();
    clock.advance(1000);
    const attachedAt = clock.now();
    let digest: Promise<BacklogTodo[] | null> | undefined;
    const outcome = await ringReadyOnce(sql, todoId, clock.now(), () => {
      digest = digestOf(endpointId, attachedAt);
      return false;
    });
    expect(outcome).toBe('unheard');
    expect((await digest)?.map((t) => t.id)).toEqual([todoId]);
  });

  it('ringReadyOnce: a written ready ring keeps the todo, and a second caller is refused', async () => {
    const { endpointId, todoId } = await endpointWithTodo();
    clock.advance(1000);
    const attachedAt = clock.now();
    let digest: Promise<BacklogTodo[] | null> | undefined;
    expect(
      await ringReadyOnce(sql, todoId, clock.now(), () => {
        digest = digestOf(endpointId, attachedAt);
        return true;
      }),
    ).toBe('rung');
    expect(await digest).toEqual([]);
    expect(await ringReadyOnce(sql, todoId, clock.now(), () => true)).toBe('not_claimed');
  });
});

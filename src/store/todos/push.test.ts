import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import type { Sql } from '../../db/connect.ts';
import { ManualClock } from '../../lib/clock.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import { freshReadyTodos, freshReadyTodosOf, insertEventAndTodo } from './index.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'fresh-ready-tester' })).id;
});
afterAll(async () => db.drop());

/** An endpoint with `n` pending todos on `inbox`, pushed a second apart; their titles in order. */
async function endpointWith(n: number): Promise<{ endpointId: string; titles: string[] }> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues: ['inbox'] }, clock.now());
  const titles: string[] = [];
  for (let i = 0; i < n; i++) {
    clock.advance(1000);
    const title = `todo ${i}`;
    await insertEventAndTodo(
      sql,
      { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
      { endpointId: endpoint.id, queue: 'inbox', title },
      clock.now(),
    );
    titles.push(title);
  }
  return { endpointId: endpoint.id, titles };
}

describe('freshReadyTodos', () => {
  it('with more unclaimed todos than its limit, returns the latest to become ready (the one just pushed among them), oldest first', async () => {
    const { endpointId, titles } = await endpointWith(20);
    const got = await freshReadyTodos(sql, endpointId, 'inbox', clock.now(), { limit: 16 });
    expect(got.map((t) => t.title)).toEqual(titles.slice(4));
  });
});

describe('freshReadyTodosOf', () => {
  it('per endpoint and queue, the latest `limit` to become ready, oldest first', async () => {
    const one = await endpointWith(5);
    const two = await endpointWith(2);
    const got = await freshReadyTodosOf(sql, [one.endpointId, two.endpointId], clock.now(), { limit: 3 });
    expect(got.filter((t) => t.endpoint_id === one.endpointId).map((t) => t.title)).toEqual(one.titles.slice(2));
    expect(got.filter((t) => t.endpoint_id === two.endpointId).map((t) => t.title)).toEqual(two.titles);
  });
});

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { countingPool as countingPoolOf } from '../../../test/support/counting-pool.ts';
import { ManualClock } from '../../lib/clock.ts';
import { connect, type Sql } from '../../db/connect.ts';
import { Lanes } from '../../lib/lanes.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import { createWebhook } from '../webhooks.ts';
import { DeliveryBatches, MAX_DELIVERIES_PER_STATEMENT, type EventInput } from './index.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');
const WINDOW_MS = 86_400_000;

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'delivery-batch-tester' })).id;
});
afterAll(async () => db.drop());

async function newTarget(): Promise<{ endpointId: string; webhookId: string }> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues: ['inbox'] }, clock.now());
  const { webhook } = await createWebhook(
    sql,
    { endpointId: endpoint.id, source: 'github', queue: 'inbox', createdBy: humanId, ceiling: 5, seal: (s) => `plain:${s}` },
    clock.now(),
  );
  return { endpointId: endpoint.id, webhookId: webhook.id };
}

/** A signed GitHub delivery of `body` to the target's webhook, keyed by its delivery id. */
function delivery(target: { endpointId: string; webhookId: string }, deliveryId: string, body: string, title = `issue ${deliveryId}`) {
  const bytes = Buffer.from(body);
  const now = clock.now();
  const event: EventInput = {
    source: 'github',
    family: 'webhook',
    eventType: 'issues',
    externalId: deliveryId,
    trustMode: 'signed',
    verified: true,
    headers: { 'x-github-event': 'issues' },
    payload: bytes,
    webhookId: target.webhookId,
    endpointId: target.endpointId,
    replay: { bodySha256: createHash('sha256').update(bytes).digest(), since: new Date(now.getTime() - WINDOW_MS) },
  };
  const todo = { endpointId: target.endpointId, queue: 'inbox', title, source: 'github', kind: 'issues', payload: { body }, idempotencyKey: `wh:${deliveryId}` };
  return { event, todo, now };
}

/** A pool that counts the delivery statements sent through it. */
const countingPool = () => countingPoolOf(sql, (text) => text.includes('insert into todos'));

describe('DeliveryBatches', () => {
  it('pushes that arrive while one runs go together in the next statement, each its own event and todo', async () => {
    const target = await newTarget();
    const { pool, statements } = countingPool();
    const batches = new DeliveryBatches(pool);
    const got = await Promise.all(Array.from({ length: 6 }, (_, i) => batches.insert(delivery(target, `d${i}`, `{"n":${i}}`))));
    expect(statements()).toBe(2);
    expect(got.every((g) => g.created && g.pushEligible)).toBe(true);
    expect(new Set(got.map((g) => g.eventId)).size).toBe(6);
    const rows = await sql<{ title: string; event_id: string; external_id: string; body: string }[]>`
      select t.title, t.event_id::text as event_id, e.external_id, convert_from(e.payload, 'UTF8') as body
      from todos t join events e on e.id = t.event_id where t.endpoint_id = ${target.endpointId} order by t.seq`;
    expect(rows.map((r) => [r.title, r.external_id, r.body])).toEqual(Array.from({ length: 6 }, (_, i) => [`issue d${i}`, `d${i}`, `{"n":${i}}`]));
    for (const [i, g] of got.entries()) expect(rows[i]!.event_id).toBe(g.eventId);
  });

  it("passes each push of a shared statement through the sender gate on its own: a delayed one is not rung, the others are", async () => {
    const target = await newTarget();
    const { pool, statements } = countingPool();
    const batches = new DeliveryBatches(pool);
    const delayed = delivery(target, 'later', '{"later":true}');
    const [, before, later, after] = await Promise.all([
      batches.insert(delivery(target, 'lone', '{"lone":true}')),
      batches.insert(delivery(target, 'now-1', '{"now":1}')),
      batches.insert({ ...delayed, todo: { ...delayed.todo, runAt: new Date(clock.now().getTime() + 60_000) } }),
      batches.insert(delivery(target, 'now-2', '{"now":2}')),
    ]);
    expect(statements()).toBe(2);
    expect([before!.pushEligible, later!.pushEligible, after!.pushEligible]).toEqual([true, false, true]);
    expect(later!.todo.run_at?.getTime()).toBe(clock.now().getTime() + 60_000);
  });

  it('keeps the same body and the same idempotency key out of one statement: the copy answers with the first todo', async () => {
    const target = await newTarget();
    const { pool, statements } = countingPool();
    const batches = new DeliveryBatches(pool);
    const [first, original, replay, sameKey] = await Promise.all([
      batches.insert(delivery(target, 'lone', '{"lone":true}')),
      batches.insert(delivery(target, 'a', '{"body":"a"}')),
      // The same signed body under a new delivery id: a replay.
      batches.insert(delivery(target, 'a-again', '{"body":"a"}')),
      // The same delivery id (so the same key) with another body: a duplicate by key.
      batches.insert(delivery(target, 'a', '{"body":"other"}')),
    ]);
    expect(statements()).toBe(3);
    expect(first.created && original.created).toBe(true);
    expect(replay).toMatchObject({ created: false, pushEligible: false, todo: { id: original.todo.id } });
    expect(sameKey).toMatchObject({ created: false, pushEligible: false, todo: { id: original.todo.id } });
    const [counts] = await sql<{ todos: number; events: number }[]>`
      select (select count(*) from todos where endpoint_id = ${target.endpointId})::int as todos,
             (select count(*) from events where endpoint_id = ${target.endpointId})::int as events`;
    expect(counts).toEqual({ todos: 2, events: 2 });
  });

  it('a statement PostgreSQL refuses fails only the push at fault: the others go again alone and land', async () => {
    const target = await newTarget();
    const { pool, statements } = countingPool();
    const batches = new DeliveryBatches(pool);
    const results = await Promise.allSettled([
      batches.insert(delivery(target, 'ok-1', '{"ok":1}')),
      batches.insert(delivery(target, 'ok-2', '{"ok":2}')),
      // A NUL character: text and jsonb cannot hold it.
      batches.insert(delivery(target, 'bad', '{"bad":true}', 'nul \u0000 title')),
      batches.insert(delivery(target, 'ok-3', '{"ok":3}')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    // ok-1 alone; ok-2, bad, ok-3 together (refused); then each of those three alone.
    expect(statements()).toBe(5);
    const titles = await sql<{ title: string }[]>`select title from todos where endpoint_id = ${target.endpointId} order by seq`;
    expect(titles.map((t) => t.title)).toEqual(['issue ok-1', 'issue ok-2', 'issue ok-3']);
  });

  it(`takes at most ${MAX_DELIVERIES_PER_STATEMENT} pushes in one statement, and other endpoints' in statements of their own`, async () => {
    const target = await newTarget();
    const other = await newTarget();
    const { pool, statements } = countingPool();
    const batches = new DeliveryBatches(pool);
    const pushes = Array.from({ length: MAX_DELIVERIES_PER_STATEMENT + 2 }, (_, i) => batches.insert(delivery(target, `m${i}`, `{"m":${i}}`)));
    pushes.push(batches.insert(delivery(other, 'elsewhere', '{"elsewhere":true}')));
    const got = await Promise.all(pushes);
    // This endpoint: one alone, MAX together, the one left over; the other endpoint: its own.
    expect(statements()).toBe(4);
    expect(got.every((g) => g.created)).toBe(true);
    expect(got.at(-1)!.todo.endpoint_id).toBe(other.endpointId);
  });

  it("on lanes of one connection each, sends an endpoint's statements to its lane, one behind another in arrival order; a second endpoint shares that lane and a third takes the next", async () => {
    const target = await newTarget();
    const other = await newTarget();
    const third = await newTarget();
    const connections = [connect(db.url, { max: 1 }), connect(db.url, { max: 1 })];
    try {
      const lanes = connections.map((c) => countingPoolOf(c, (text) => text.includes('insert into todos')));
      const batches = new DeliveryBatches(sql, () => null, new Lanes(lanes.map((l) => l.pool)));
      const pushes = Array.from({ length: MAX_DELIVERIES_PER_STATEMENT + 2 }, (_, i) => batches.insert(delivery(target, `p${i}`, `{"p":${i}}`)));
      pushes.push(batches.insert(delivery(other, 'beside', '{"beside":true}')));
      pushes.push(batches.insert(delivery(third, 'next', '{"next":true}')));
      const got = await Promise.all(pushes);
      expect(got.every((g) => g.created)).toBe(true);
      // One alone, then a second statement sent behind it once half a statement waited, then the
      // rest; the second endpoint's beside them on the same lane (KINDS_PER_LANE), the third's on the next.
      expect(lanes.map((l) => l.statements())).toEqual([4, 1]);
      // One connection runs them one after the other: the todos are in the order the pushes came.
      const titles = await sql<{ title: string }[]>`select title from todos where endpoint_id = ${target.endpointId} order by seq`;
      expect(titles.map((t) => t.title)).toEqual(Array.from({ length: MAX_DELIVERIES_PER_STATEMENT + 2 }, (_, i) => `issue p${i}`));
    } finally {
      await Promise.all(connections.map((c) => c.end()));
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { connectAgent, type Agent } from '../../test/support/agents.ts';
import { push, vend, type Api, type TestApp, type TestDb } from '../../test/support/fixtures.ts';
import { ManualClock } from '../lib/clock.ts';

// complete with next on two instances over one database: agents on both drain one endpoint's
// queue, each finishing a todo and claiming the next in one statement, and every todo is claimed
// exactly once.

let db: TestDb;
let a: TestApp;
let b: TestApp;
let api: Api;
const clients: Client[] = [];
const UNLIMITED = { rate: 1e9, burst: 1e9 };

beforeAll(async () => {
  db = await migratedDatabase();
  const clock = new ManualClock('2026-11-02T09:00:00Z');
  const start = () => startTestApp(db.url, clock, { mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED } });
  [a, b] = await Promise.all([start(), start()]);
  api = apiCaller(a.url, (await humanWithToken(db.sql)).token);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await Promise.all([a?.stop(), b?.stop()]);
  await db?.drop();
});

/** One agent's loop: claim_next once, then complete with next until it answers empty; the ids it claimed. */
async function drainWithNext(agent: Agent): Promise<string[]> {
  const claimed: string[] = [];
  let next = await agent.call('claim_next');
  while (!next.empty) {
    claimed.push(next.todo.id);
    next = (await agent.call('complete', { id: next.todo.id, result: { by: agent.sessionId }, next: true })).next;
  }
  return claimed;
}

describe('complete with next on two instances', () => {
  it('drains one queue from agents on both instances, each todo claimed and completed exactly once', async () => {
    const e = await vend(api, { name: 'two-instance-drain', queues: ['work'] });
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      // The API's write limit per token refills on the (manual) clock.
      if (i % 10 === 9) a.clock.advance(2_000);
      ids.push((await push(api, e, { queue: 'work', title: `job ${i}` })).id);
    }
    const agents = await Promise.all([a, a, a, b, b, b].map((app) => connectAgent(app, e, { track: clients })));

    const claims = (await Promise.all(agents.map(drainWithNext))).flat();
    expect(claims).toHaveLength(ids.length);
    expect(new Set(claims)).toEqual(new Set(ids));
    const rows = await db.sql<{ state: string; attempt: number; by: string; claimed_session_id: string }[]>`
      select state, attempt, result->>'by' as by, claimed_session_id from todos where id = any(${ids})`;
    expect(rows.every((r) => r.state === 'done' && r.attempt === 1 && r.by === r.claimed_session_id)).toBe(true);
    // Both instances did work.
    const sessionsOf = (app: TestApp) => new Set(agents.filter((_, i) => (i < 3 ? a : b) === app).map((x) => x.sessionId));
    expect(rows.some((r) => sessionsOf(a).has(r.claimed_session_id))).toBe(true);
    expect(rows.some((r) => sessionsOf(b).has(r.claimed_session_id))).toBe(true);
  });
});

import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Sql } from '../src/db/connect.ts';
import { connectAgent, settle, until } from './support/agents.ts';
import { apiCaller, humanWithToken, startTestApp } from './support/app.ts';
import { createTestDatabase, type TestDatabase } from './support/database.ts';
import { push, vend, type TestApp } from './support/fixtures.ts';

/**
 * SPEC-0022: a transition yields one digest to one session on each instance that hosts an
 * open-stream session of the endpoint and claimed the transition or heard its broadcast, and never
 * two on one instance. With streams on two instances each sends its own; neither depends on the
 * other's write.
 */
let db: TestDatabase;
let sql: Sql;
let a: TestApp;
let b: TestApp;
const clients: Client[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  [a, b] = await Promise.all([startTestApp(db.url), startTestApp(db.url)]);
  sql = connect(db.url, { max: 2 });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await Promise.all([a?.stop(), b?.stop()]);
  await sql?.end({ timeout: 5 });
  await db.drop();
});

describe('the return digest with streams on two instances', () => {
  it('is sent once by each hosting instance, for each return', async () => {
    const human = await humanWithToken(sql);
    const api = apiCaller(a.url, human.token);
    const e = await vend(api, { name: 'two-homes', queues: ['reviews'] });
    const onA = await connectAgent(a, e, { track: clients });
    const onB = await connectAgent(b, e, { track: clients });
    const presencePath = `/api/v1/endpoints/${e.slug}/presence`;

    for (let round = 1; round <= 2; round++) {
      for (const app of [a, b]) app.clock.advance(60_000);
      expect((await api('PUT', presencePath, { presence: 'out', until: null })).status).toBe(200);
      await push(api, e, { title: `Review PR ${round}`, payload: { pr: round } });
      expect((await api('PUT', presencePath, { presence: 'in', until: null })).status).toBe(200);
      await until(() => onA.digests().length >= round && onB.digests().length >= round, `digest ${round} on both instances`);
      // Both instances have heard of the transition by now; a second digest on either would have landed.
      await settle(500);
      for (const [name, on] of [['A', onA], ['B', onB]] as const) {
        expect(on.digests(), `the digests on ${name} after return ${round}`).toHaveLength(round);
        expect(on.digests()[round - 1]!.params.meta).toMatchObject({ reason: 'operator', pending: String(round) });
      }
    }
    expect([...onA.heard, ...onB.heard].filter((n) => n.params.meta.kind !== 'digest')).toEqual([]);
  });
});

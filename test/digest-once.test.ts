import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Sql } from '../src/db/connect.ts';
import { connectAgent, settle, until } from './support/agents.ts';
import { apiCaller, humanWithToken, startTestApp } from './support/app.ts';
import { createTestDatabase, type TestDatabase } from './support/database.ts';
import { push, vend, type TestApp } from './support/fixtures.ts';

/**
 * "On return the agent gets one digest": with the endpoint's streams open on two instances, the
 * instance that claims the transition and the one that hears of it both reach the digest; exactly
 * one of them sends it.
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
  it('is sent once, by one instance, for each return', async () => {
    const human = await humanWithToken(sql);
    const api = apiCaller(a.url, human.token);
    const e = await vend(api, { name: 'two-homes', queues: ['reviews'] });
    const onA = await connectAgent(a, e, { track: clients });
    const onB = await connectAgent(b, e, { track: clients });
    const presencePath = `/api/v1/endpoints/${e.slug}/presence`;
    const digests = () => [...onA.digests(), ...onB.digests()];

    const heardBefore = new Set<unknown>();
    for (let round = 1; round <= 2; round++) {
      for (const app of [a, b]) app.clock.advance(60_000);
      expect((await api('PUT', presencePath, { presence: 'out', until: null })).status).toBe(200);
      await push(api, e, { title: `Review PR ${round}`, payload: { pr: round } });
      expect((await api('PUT', presencePath, { presence: 'in', until: null })).status).toBe(200);
      await until(() => digests().length >= round, `digest ${round}`);
      // Both instances have heard of the transition by now; a second digest would have landed.
      await settle(500);
      // Either instance may send a round's digest: the new one is the one not heard before.
      const fresh = digests().filter((d) => !heardBefore.has(d));
      expect(fresh.map((d) => d.params.meta), `the digests of return ${round}`).toHaveLength(1);
      expect(fresh[0]!.params.meta.pending).toBe(String(round));
      heardBefore.add(fresh[0]);
    }
  });
});

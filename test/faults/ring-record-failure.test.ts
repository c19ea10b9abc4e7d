import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import type { ManualClock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/lib/log.ts';
import { connectAgent, until, type Agent, type Vended } from '../support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../support/app.ts';
import { push as pushVia } from '../support/fixtures.ts';

/**
 * Fault: the ring record cannot be written. The doorbell goes out first and its record is
 * inserted after, never awaited by the writer; here the insert fails for real (a CHECK (false)
 * NOT VALID constraint on doorbell_rings, then the table renamed away) and the doorbell must still
 * reach the SDK client, the failure must be counted in
 * switchboard_metrics_collection_errors_total{collector="doorbell_rings"}, and the todo must still
 * be claimable.
 */

const METRICS_TOKEN = randomBytes(32).toString('hex');
let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: App & { clock: ManualClock };
let api: ReturnType<typeof apiCaller>;
let logged = '';
const clients: Client[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, undefined, {
    env: { SWITCHBOARD_METRICS_TOKEN: METRICS_TOKEN },
    log: createLogger('info', new Writable({ write: (c, _e, done) => void ((logged += c.toString()), done()) })),
  });
  api = apiCaller(app.url, (await humanWithToken(db.sql)).token);
});
beforeEach(() => void app.clock.advance(60_000));
afterAll(async () => {
  // Whatever happened, the table is put back before the database goes.
  await db.sql`alter table if exists doorbell_rings_away rename to doorbell_rings`.catch(() => {});
  await db.sql`alter table doorbell_rings drop constraint if exists fault_no_rings`.catch(() => {});
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app.stop();
  await db.drop();
});

async function ringRecordErrors(): Promise<number> {
  const res = await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.status).toBe(200);
  const m = /^switchboard_metrics_collection_errors_total\{collector="doorbell_rings"\} (\d+)$/m.exec(await res.text());
  return Number(m![1]);
}

const push = async (e: Vended, title: string): Promise<string> => (await pushVia(api, e, { title })).id;

/** Pushes a todo and returns the ring id of the doorbell the agent heard for it. */
async function pushAndHear(e: Vended, agent: Agent, title: string): Promise<{ todoId: string; ringId: string }> {
  const todoId = await push(e, title);
  await until(() => agent.heard.some((n) => n.params.meta.todo_id === todoId), `the doorbell for "${title}"`);
  const ringId = agent.heard.find((n) => n.params.meta.todo_id === todoId)!.params.meta.ring_id!;
  expect(ringId).toMatch(/^rg_/);
  return { todoId, ringId };
}

const ringRows = async (ringId: string) => (await db.sql`select 1 from doorbell_rings where ring_id = ${ringId}`).length;

describe('the database refuses the ring record while a doorbell is written', () => {
  it('delivers the doorbell anyway, counts each failed record, and leaves the todo claimable', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'agent', queues: ['reviews'] });
    expect(r.status).toBe(201);
    const e = r.json as Vended;
    const agent = await connectAgent(app, e, { track: clients });
    const before = await ringRecordErrors();

    // 1. Every new row violates a constraint the existing rows are not checked against.
    await db.sql`alter table doorbell_rings add constraint fault_no_rings check (false) not valid`;
    const refused = await pushAndHear(e, agent, 'ring record refused by a constraint');
    await until(async () => (await ringRecordErrors()) === before + 1, 'the collection error to be counted');
    expect(await ringRows(refused.ringId)).toBe(0);
    await db.sql`alter table doorbell_rings drop constraint fault_no_rings`;

    // 2. The table is not there at all.
    await db.sql`alter table doorbell_rings rename to doorbell_rings_away`;
    const missing = await pushAndHear(e, agent, 'ring record with no table');
    await until(async () => (await ringRecordErrors()) === before + 2, 'the second collection error to be counted');
    await db.sql`alter table doorbell_rings_away rename to doorbell_rings`;
    expect(await ringRows(missing.ringId)).toBe(0);

    // Each failure was logged with its ring id, and nothing else broke.
    const failures = logged.split('\n').filter((l) => l.includes('could not record a doorbell ring'));
    expect(failures).toHaveLength(2);
    expect(failures[0]).toContain(refused.ringId);
    expect(failures[1]).toContain(missing.ringId);

    // 3. Back to normal: the next doorbell is recorded and nothing more is counted.
    const healthy = await pushAndHear(e, agent, 'ring record written');
    await until(async () => (await ringRows(healthy.ringId)) === 1, 'the ring record');
    expect(await ringRecordErrors()).toBe(before + 2);

    // The todos whose ring was never recorded are claimed and completed like any other.
    for (const { todoId } of [refused, missing, healthy]) {
      expect(await agent.call('claim', { id: todoId })).toMatchObject({ id: todoId, state: 'claimed' });
      expect(await agent.call('complete', { id: todoId })).toMatchObject({ id: todoId, state: 'done' });
    }
    expect(agent.heard.filter((n) => n.params.meta.todo_id)).toHaveLength(3);
    console.info(`[faults] ring record refused twice (CHECK (false) NOT VALID, table renamed): both doorbells delivered, collection errors ${before} → ${before + 2}`);
  });
});

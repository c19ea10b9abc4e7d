// The background loops running on their own: an app started with its loops on (their real timers,
// shortened to 50 ms) and nothing driven by hand. The injected clock still decides what is due;
// the loops only decide when someone looks. One pass each of the reaper, the doorbell sweep and
// the presence evaluator is seen end to end, through the database and a real MCP client.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { createLogger } from '../src/lib/log.ts';
import { connectAgent, settle, until, type Agent } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, push, vend, type Api, type TestDb } from './support/fixtures.ts';

const clock = new ManualClock('2026-01-05T09:00:00Z');
let db: TestDb;
let app: App;
let api: Api;
const agents: Agent[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  const config = loadConfig({ SWITCHBOARD_DATABASE_URL: db.url, SWITCHBOARD_LISTEN: '127.0.0.1:0' });
  app = await startApp({ config, clock, log: createLogger('silent'), loopIntervalMs: 50 });
  api = apiCaller(app.url, (await humanWithToken(db.sql)).token);
});
afterAll(async () => {
  await Promise.all(agents.map((a) => a.client.close().catch(() => {})));
  await app?.stop();
  await db?.drop();
});

const agentOn = async (e: { slug: string; token: string }) => {
  const a = await connectAgent(app, e);
  agents.push(a);
  return a;
};
const todoState = async (id: string) =>
  (await db.sql<{ state: string; ring_attempts: number }[]>`select state, ring_attempts from todos where id = ${id}`)[0]!;

describe('the background loops, on their own timers', () => {
  it('the presence evaluator sends the digest when an override runs out, the reaper takes back an expired lease, the sweep re-rings due work', async () => {
    const t0 = clock.now().getTime();

    // Presence: out until t0 + 60 s, with one todo held meanwhile.
    const held = await vend(api, { name: 'held', queues: ['reviews'] });
    const heldAgent = await agentOn(held);
    const out = await api('PUT', `/api/v1/endpoints/${held.slug}/presence`, { presence: 'out', until: new Date(t0 + 60_000).toISOString() });
    expect(out.status, out.text).toBe(200);
    await push(api, held, { title: 'held while out' });

    // Reaper: a todo claimed with a 30 s lease.
    const leased = await vend(api, { name: 'leased', queues: ['reviews'] });
    const leasedAgent = await agentOn(leased);
    const x = await push(api, leased, { title: 'claimed, then abandoned' });
    expect(await leasedAgent.call('claim', { id: x.id, lease_ttl_seconds: 30 })).toMatchObject({ id: x.id, state: 'claimed' });

    // Sweep: a todo rung at creation and never claimed.
    const ignored = await vend(api, { name: 'ignored', queues: ['reviews'] });
    const ignoredAgent = await agentOn(ignored);
    const y = await push(api, ignored, { title: 'rung, never claimed' });
    const ringsOfY = () => ignoredAgent.heard.filter((n) => n.params.meta.todo_id === y.id).length;
    await until(() => ringsOfY() === 1, 'the ring at creation');

    await settle();
    expect(heldAgent.digests()).toHaveLength(0);
    expect((await todoState(x.id)).state).toBe('claimed');

    clock.set(new Date(t0 + 61_000)); // the override has run out, the lease has expired
    await until(() => heldAgent.digests().length === 1, 'the digest from the presence evaluator');
    expect(heldAgent.digests()[0]!.params.meta).toMatchObject({ kind: 'digest', pending: '1', reason: 'override_end' });
    await until(async () => (await todoState(x.id)).state === 'pending', 'the reaper to take back the expired lease');
    expect(ringsOfY()).toBe(1); // not due before 5 minutes

    clock.set(new Date(t0 + 5 * 60_000 + 1_000)); // the first re-ring of y is due
    await until(() => ringsOfY() === 2, 'the sweep to re-ring y');
    await until(async () => (await todoState(y.id)).ring_attempts === 1, 'the re-ring to be charged');

    // Many more passes of every loop at the same instant change nothing: each acted once.
    await settle(400);
    expect(ringsOfY()).toBe(2);
    expect((await todoState(y.id)).ring_attempts).toBe(1);
    expect(heldAgent.digests()).toHaveLength(1);
    expect(heldAgent.heard.filter((n) => n.params.meta.todo_id)).toHaveLength(0);
  });
});

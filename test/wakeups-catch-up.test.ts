import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { insertEventAndTodo } from '../src/store/todos/index.ts';
import { connectAgent, until, type Agent } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './support/app.ts';
import { capturingLogger } from './support/doorbell-acks.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

/**
 * Notifications sent while an instance's LISTEN connection is down are lost; after it reconnects
 * the instance catches up once (issue 17, item 7): one pass, however many reconnect attempts
 * failed and however many channels re-subscribed, and the work that became ready meanwhile rings.
 */

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let proxy: TcpProxy;
let app: App & { clock: ManualClock };
let agent: Agent;
let endpointId: string;
const captured = capturingLogger();
const clients: Client[] = [];
const catchUps = () => captured.lines.filter((l) => l.msg === 'wakeups: caught up after reconnecting');

beforeAll(async () => {
  db = await migratedDatabase();
  const target = new URL(db.url);
  proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  app = await startTestApp(proxy.url(db.url), new ManualClock(new Date()), { log: captured.log });
  const human = await humanWithToken(db.sql);
  const api = apiCaller(app.url, human.token);
  const vended = await api('POST', '/api/v1/endpoints', { name: 'listener', queues: ['inbox', 'later'] });
  endpointId = vended.json.id;
  agent = await connectAgent(app, { slug: vended.json.slug, token: vended.json.token }, { track: clients });
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await proxy?.restore().catch(() => {});
  await app?.stop();
  await proxy?.close();
  await db?.drop();
});

describe('the LISTEN catch-up after a reconnect', () => {
  it('runs once after an outage with failed attempts, and rings what became ready meanwhile', async () => {
    await new Promise((r) => setTimeout(r, 1500));
    expect(catchUps()).toEqual([]); // the first subscription missed nothing
    await proxy.cut();
    // Work committed while this instance hears nothing: its todo_ready notifications are lost.
    const now = app.clock.now();
    const pushed: string[] = [];
    for (const queue of ['inbox', 'later']) {
      const { todo } = await insertEventAndTodo(
        db.sql,
        { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
        { endpointId, queue, title: `during the outage (${queue})` },
        now,
      );
      pushed.push(todo.id);
    }
    // Several reconnect attempts fail (the relay refuses) before the database is back.
    await new Promise((r) => setTimeout(r, 3000));
    expect(agent.heard).toEqual([]);
    await proxy.restore();
    await until(() => pushed.every((id) => agent.heard.some((n) => n.params.meta.todo_id === id)), 'the doorbells the catch-up rings', 15_000);
    await new Promise((r) => setTimeout(r, 2500));
    expect(catchUps()).toHaveLength(1);
    expect(agent.heard.map((n) => n.params.meta.todo_id).sort()).toEqual([...pushed].sort());
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { connectAgent, settle, until, type Agent } from '../../test/support/agents.ts';
import { push, vend, type Api, type TestApp, type TestDb, type Vended } from '../../test/support/fixtures.ts';
import { initParams, mcp, openStream, request } from '../../test/support/mcp-transport.ts';
import { ManualClock } from '../lib/clock.ts';

/**
 * The session directory across two instances on one database (issue 15): any instance answers
 * any session, the newest stream wins across instances, a ready todo rings once wherever its
 * streams are, and the answers about sessions (self-test, counts) are the cluster's.
 */

let db: TestDb;
let a: TestApp;
let b: TestApp;
let viaA: Api;
let viaB: Api;
const clients: Client[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  const clock = new ManualClock('2026-11-02T09:00:00Z');
  [a, b] = await Promise.all([startTestApp(db.url, clock, { selfTestRingDelayMs: 50 }), startTestApp(db.url, clock, { selfTestRingDelayMs: 50 })]);
  const human = await humanWithToken(db.sql);
  viaA = apiCaller(a.url, human.token);
  viaB = apiCaller(b.url, human.token);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await Promise.all([a?.stop(), b?.stop()]);
  await db?.drop();
});

const on = (app: TestApp, e: Vended) => ({ ...e, mcp_url: `${app.url}/mcp/${e.slug}` });
const agentOn = (app: TestApp, e: Vended): Promise<Agent> => connectAgent(app, e, { track: clients });
const listed = async (via: Api, e: Vended) => (await via('GET', `/api/v1/endpoints/${e.slug}`)).json;

describe('any instance answers any session', () => {
  it('a session initialized on A serves tool calls on B, and a DELETE on B ends it on A too', async () => {
    const e = await vend(viaA, { name: 'roams', queues: ['reviews'] });
    const init = await mcp(on(a, e), 'POST', { body: request('initialize', initParams()) });
    const sid = init.headers.get('mcp-session-id')!;
    const listedOnB = await mcp(on(b, e), 'POST', { sid, body: request('tools/list') });
    expect(listedOnB.status, listedOnB.text).toBe(200);
    expect(listedOnB.json.result.tools.map((t: { name: string }) => t.name)).toContain('claim_next');
    // Another endpoint's credential cannot use it on either instance.
    const other = await vend(viaB, { name: 'other', queues: ['reviews'] });
    expect((await mcp(on(b, other), 'POST', { sid, body: request('tools/list') })).status).toBe(404);

    expect((await mcp(on(b, e), 'DELETE', { sid })).status).toBe(204);
    await until(() => a.services.sessions.peek(sid) === undefined, "A's copy to go");
    expect((await mcp(on(a, e), 'POST', { sid, body: request('tools/list') })).status).toBe(404);
    expect(await a.services.directory.sessionsOf(e.id)).toEqual([]);
  });

  it('the newest stream wins across instances: a GET on B ends the stream on A, and the directory names B', async () => {
    const e = await vend(viaA, { name: 'reconnects', queues: ['reviews'] });
    const init = await mcp(on(a, e), 'POST', { body: request('initialize', initParams()) });
    const sid = init.headers.get('mcp-session-id')!;
    const first = await openStream(on(a, e), sid);
    await until(() => a.services.sessions.hasOpenStream(e.id), 'the stream on A');
    await until(async () => (await a.services.directory.sessionsOf(e.id))[0]?.stream_instance === a.services.directory.instanceId, 'the directory to name A');
    const second = await openStream(on(b, e), sid);
    try {
      await until(() => !a.services.sessions.hasOpenStream(e.id), "A's stream to end");
      await first.ended;
      expect(b.services.sessions.hasOpenStream(e.id)).toBe(true);
      await until(async () => (await b.services.directory.sessionsOf(e.id))[0]?.stream_instance === b.services.directory.instanceId, 'the directory to name B');
    } finally {
      first.abort();
      second.abort();
    }
  });
});

describe('doorbells across instances', () => {
  it('a todo pushed through A rings exactly one of two sessions streaming on A and on B', async () => {
    const e = await vend(viaA, { name: 'two-streams', queues: ['reviews'] });
    const onA = await agentOn(a, e);
    const onB = await agentOn(b, e);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await push(i % 2 ? viaB : viaA, e, { title: `job ${i}` })).id);
    const heard = () => [...onA.heard, ...onB.heard].map((n) => n.params.meta.todo_id);
    await until(() => ids.every((id) => heard().includes(id)), 'a doorbell for each todo');
    await settle(300);
    expect(heard().sort()).toEqual([...ids].sort());
  });

  it('a self-test started on A while the stream is on B reports the stream and passes', async () => {
    const e = await vend(viaA, { name: 'tested', queues: ['reviews'] });
    const agent = await agentOn(b, e);
    const started = await viaA('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 30 });
    expect(started.status, started.text).toBe(201);
    expect(started.json).toMatchObject({ stream_attached: true, channel_capability: { sessions: [{ client_name: 'claude-code', stream_open: true }] } });
    await until(() => agent.tests().length === 1, 'the test doorbell on B');
    const claimed = await agent.call('claim', { id: started.json.todo_id });
    expect(claimed, JSON.stringify(claimed)).toMatchObject({ self_test: true, state: 'done' });
    const report = await viaA('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${started.json.test_id}`);
    expect(report.json).toMatchObject({ verdict: 'pass', stream_attached: true, delivered: { written: true, session_id: agent.sessionId } });
  });

  it('a self-test started on A, which holds only a stream-less session, rings the streaming one on B and passes', async () => {
    const e = await vend(viaA, { name: 'split', queues: ['reviews'] });
    // A stream-less session on A (initialize only), the agent streaming on B.
    const streamless = (await mcp(on(a, e), 'POST', { body: request('initialize', initParams()) })).headers.get('mcp-session-id')!;
    const agent = await agentOn(b, e);
    const started = await viaA('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 30 });
    expect(started.status, started.text).toBe(201);
    expect(started.json.stream_attached).toBe(true);
    await until(() => agent.tests().length === 1, 'the test doorbell on B');
    expect((await agent.call('claim', { id: started.json.todo_id })).state).toBe('done');
    const report = await viaA('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${started.json.test_id}`);
    expect(report.json).toMatchObject({ verdict: 'pass', delivered: { written: true, session_id: agent.sessionId } });
    expect(report.json.delivered.session_id).not.toBe(streamless);
  });

  it('a self-test with sessions but no stream on any instance is no_stream, with no session, no_session', async () => {
    const e = await vend(viaA, { name: 'streamless', queues: ['reviews'] });
    const none = await viaB('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 10 });
    const report = async (testId: string) => (await viaB('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${testId}`)).json;
    await until(async () => (await report(none.json.test_id)).verdict !== 'pending', 'the first ring');
    await mcp(on(a, e), 'POST', { body: request('initialize', initParams()) });
    const streamless = await viaB('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 10 });
    expect(streamless.json).toMatchObject({ stream_attached: false, channel_capability: { sessions: [{ stream_open: false }] } });
    const verdict = async (testId: string) => (await viaB('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${testId}`)).json.delivered;
    await until(async () => (await viaB('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${streamless.json.test_id}`)).json.verdict !== 'pending', 'the ring');
    expect((await viaB('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${streamless.json.test_id}`)).json.verdict).toBe('no_stream');
    expect((await viaB('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${none.json.test_id}`)).json.verdict).toBe('no_session');
    expect(await verdict(none.json.test_id)).toMatchObject({ written: false });
  });
});

describe("the cluster's answers", () => {
  it('the API on either instance counts every session, and the streams of a dead instance stop counting', async () => {
    const e = await vend(viaA, { name: 'counted', queues: ['reviews'] });
    await agentOn(b, e);
    await mcp(on(a, e), 'POST', { body: request('initialize', initParams()) });
    expect(await listed(viaA, e)).toMatchObject({ sessions: 2 });
    await until(async () => (await a.services.directory.countsOf([e.id])).get(e.id)?.streams === 1, 'the stream in the directory');

    // B stops heartbeating (as if killed): its stream no longer counts anywhere, and the next
    // heartbeat of a live instance removes it; the sessions themselves live on.
    await db.sql`update instances set heartbeat_at = now() - interval '1 minute' where id = ${b.services.directory.instanceId}`;
    expect((await a.services.directory.countsOf([e.id])).get(e.id)).toMatchObject({ sessions: 2, streams: 0 });
    await a.services.directory.heartbeat();
    expect(await db.sql`select 1 from instances where id = ${b.services.directory.instanceId}`).toHaveLength(0);
    expect((await a.services.directory.sessionsOf(e.id)).every((s) => s.stream_instance === null)).toBe(true);
    await b.services.directory.heartbeat(); // B comes back: its row again, its stream named on the next attach
  });

  it('revocation through A ends the session and its stream on B at once', async () => {
    const e = await vend(viaA, { name: 'revoked', queues: ['reviews'] });
    const agent = await agentOn(b, e);
    expect((await viaA('POST', `/api/v1/endpoints/${e.slug}/revoke`)).status).toBe(200);
    await until(() => b.services.sessions.peek(agent.sessionId) === undefined && !b.services.sessions.hasOpenStream(e.id), 'the session to end on B');
    expect(await b.services.directory.sessionsOf(e.id)).toEqual([]);
  });
});

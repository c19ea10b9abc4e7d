import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Sql } from '../src/db/connect.ts';
import { apiCaller, humanWithToken, migratedDatabase } from './support/app.ts';
import { push, vend, type Api, type Vended } from './support/fixtures.ts';
import {
  clusterLogs,
  connectBalancedAgent,
  haproxyInstalled,
  HAPROXY_BIN,
  openRawStream,
  rawSession,
  startBalancedCluster,
  within,
  type BalancedAgent,
  type BalancedCluster,
  type RawStream,
} from './support/haproxy.ts';
import { sleep, stopAllServes, waitFor } from './support/processes.ts';

/**
 * Three real `serve` processes behind a real HAProxy (round robin, no session affinity), driven
 * by the official MCP SDK client through the balancer's URL: whichever instance answers a POST
 * and whichever holds the GET stream, the agent works, every doorbell rings exactly once, the
 * self-test passes, the newest stream wins across instances and a revocation ends the session on
 * every instance. The kill -9 case is in test/faults/load-balancer.test.ts.
 */

if (!haproxyInstalled()) console.warn(`[load-balancer] skipped: ${HAPROXY_BIN} is not installed (apt-get install haproxy)`);

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let cluster: BalancedCluster;
let api: Api;
let humanToken: string;
let e: Vended;
let agent: BalancedAgent;
const raws: RawStream[] = [];

/** Settles long enough for a second (wrong) ring to arrive through LISTEN/NOTIFY. */
const SETTLE_MS = 1_000;

const streamInstanceOf = async (sessionId: string) =>
  (await sql<{ stream_instance: string | null }[]>`select stream_instance from mcp_sessions where id = ${sessionId}`)[0]?.stream_instance ?? null;

describe.skipIf(!haproxyInstalled())('three instances behind HAProxy (round robin, no affinity)', () => {
  beforeAll(async () => {
    db = await migratedDatabase();
    sql = db.sql;
    cluster = await startBalancedCluster(db.url, 3);
    const human = await humanWithToken(sql);
    humanToken = human.token;
    api = apiCaller(cluster.lb.url, humanToken);
    e = await vend(api, { name: 'behind-lb', queues: ['jobs'] });
  }, 90_000);

  beforeEach((ctx) => ctx.onTestFailed(() => console.error(clusterLogs(cluster))));

  afterAll(async () => {
    for (const r of raws) r.close();
    await agent?.close();
    await cluster?.stop();
    await stopAllServes();
    await db?.drop();
  });

  it('the vended MCP URL points through the balancer; the SDK client initializes, lists tools and claims a todo pushed through it', async () => {
    expect(e.mcp_url).toBe(`${cluster.lb.url}/mcp/${e.slug}`);
    agent = await connectBalancedAgent(e.mcp_url, e.token);
    const tools = (await agent.client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['claim', 'claim_next', 'complete', 'test_doorbell', 'get_doorbell_test']));
    await waitFor(() => agent.streamServer(), 'the SDK client to open its stream');
    await waitFor(async () => (await streamInstanceOf(agent.sessionId)) !== null, 'the directory to name the stream holder');

    const pushed = await push(api, e, { title: 'through the balancer', payload: { n: 1 } });
    await waitFor(() => agent.rings(pushed.id).length > 0, `the doorbell of ${pushed.id}`);
    const claimed = await agent.call('claim_next');
    expect(claimed).toMatchObject({ empty: false, todo: { id: pushed.id, state: 'claimed' } });
    expect(await agent.call('complete', { id: pushed.id, result: { ok: true } })).toMatchObject({ id: pushed.id, state: 'done' });
    expect(agent.rings(pushed.id)).toHaveLength(1);

    // No affinity: the session's POSTs were spread, and every one answered.
    const posts = agent.exchanges.filter((x) => x.method === 'POST');
    expect(posts.every((x) => x.status === 200 || x.status === 202)).toBe(true);
    expect(new Set(posts.map((x) => x.servedBy)).size).toBeGreaterThanOrEqual(2);
  });

  it('a todo pushed through any instance, or through the balancer, rings the agent exactly once wherever its stream is', async () => {
    const holder = agent.streamServer()!;
    const vias = [...cluster.serves.map((s, i) => ({ label: `s${i}`, url: s.url })), { label: 'balancer', url: cluster.lb.url }];
    const pushedIds: string[] = [];
    for (const via of vias) {
      const pushed = await push(apiCaller(via.url, humanToken), e, { title: `via ${via.label}`, payload: { via: via.label } });
      pushedIds.push(pushed.id);
      await waitFor(() => agent.rings(pushed.id).length > 0, `the doorbell of the todo pushed via ${via.label} (stream on ${holder})`);
      const ring = agent.rings(pushed.id)[0]!;
      expect(ring.method).toBe('notifications/claude/channel');
      expect(ring.params.meta).toMatchObject({ todo_id: pushed.id, queue: 'jobs' });
      expect(await agent.call('claim', { id: pushed.id })).toMatchObject({ id: pushed.id, state: 'claimed' });
    }
    await sleep(SETTLE_MS);
    for (const id of pushedIds) expect(agent.rings(id), `rings of ${id}`).toHaveLength(1);
    const ringIds = pushedIds.map((id) => agent.rings(id)[0]!.params.meta.ring_id);
    expect(new Set(ringIds).size).toBe(pushedIds.length);
    // Nothing rang for any other todo, and the stream never moved.
    const todoRings = agent.heard.filter((n) => n.params.meta.todo_id !== undefined && n.params.meta.kind !== 'self_test');
    expect(todoRings).toHaveLength(pushedIds.length + 1);
    expect(agent.streamServer()).toBe(holder);
    // By now every instance has answered some of this one session's POSTs.
    const posts = agent.exchanges.filter((x) => x.method === 'POST');
    expect(new Set(posts.map((x) => x.servedBy))).toEqual(new Set(['s0', 's1', 's2']));
    expect(posts.every((x) => x.status === 200 || x.status === 202)).toBe(true);
  });

  it('the doorbell self-test passes through the balancer', async () => {
    const started = await agent.call('test_doorbell', { wait_seconds: 10 });
    expect(started).toMatchObject({ stream_attached: true, test_id: expect.stringMatching(/^dt_/), todo_id: expect.any(String) });
    await waitFor(() => agent.rings(started.todo_id).length > 0, 'the test doorbell', 15_000);
    const ring = agent.rings(started.todo_id)[0]!;
    expect(ring.params.meta).toMatchObject({ kind: 'self_test', todo_id: started.todo_id });
    expect(await agent.call('claim', { id: started.todo_id })).toMatchObject({ id: started.todo_id, state: 'done', self_test: true });
    const report = await agent.call('get_doorbell_test', { test_id: started.test_id });
    expect(report).toMatchObject({
      test_id: started.test_id,
      verdict: 'pass',
      stream_attached: true,
      delivered: { written: true, session_id: agent.sessionId },
    });
    await sleep(SETTLE_MS);
    expect(agent.rings(started.todo_id)).toHaveLength(1);
  });

  it('every other agent verb answers through the balancer, whichever instance takes each call', async () => {
    const before = agent.exchanges.length;
    expect(await agent.call('whoami')).toMatchObject({ endpoint: { slug: e.slug }, queues: ['jobs'], session: { id: agent.sessionId } });
    const pushed = await push(api, e, { title: 'every verb', payload: { n: 2 } });
    await waitFor(() => agent.rings(pushed.id).length > 0, 'its doorbell');
    const ringId = agent.rings(pushed.id)[0]!.params.meta.ring_id;
    expect(await agent.call('ack_doorbell', { ring_id: ringId })).toMatchObject({ ring_id: ringId });
    expect((await agent.call('list_todos')).todos.map((t: { id: string }) => t.id)).toContain(pushed.id);
    expect(await agent.call('get_todo', { id: pushed.id })).toMatchObject({ id: pushed.id, state: 'pending' });
    expect(await agent.call('claim', { id: pushed.id })).toMatchObject({ id: pushed.id, state: 'claimed' });
    expect(await agent.call('heartbeat', { id: pushed.id, lease_ttl_seconds: 600 })).toMatchObject({ id: pushed.id, state: 'claimed' });
    expect(await agent.call('release', { id: pushed.id })).toMatchObject({ id: pushed.id, state: 'pending' });
    expect(await agent.call('claim', { id: pushed.id })).toMatchObject({ id: pushed.id, state: 'claimed' });
    expect(await agent.call('fail', { id: pushed.id, result: { why: 'on purpose' } })).toMatchObject({ id: pushed.id, state: 'failed' });
    expect(await agent.call('clock_out')).toMatchObject({ presence: 'out', source: 'agent' });
    expect(await agent.call('presence')).toMatchObject({ presence: 'out' });
    expect(await agent.call('clock_in')).toMatchObject({ presence: 'in' });
    const posts = agent.exchanges.slice(before).filter((x) => x.method === 'POST');
    expect(posts.every((x) => x.status === 200 || x.status === 202)).toBe(true);
    expect(new Set(posts.map((x) => x.servedBy)).size).toBeGreaterThanOrEqual(2);
  });

  it('a second GET on another instance wins: the first stream ends and doorbells go to the second', async () => {
    const other = await vend(api, { name: 'two-streams', queues: ['jobs'] });
    const sid = await rawSession(cluster.lb.url, other.slug, other.token);
    const first = await openRawStream(cluster.serves[0]!.url, other.slug, other.token, sid);
    raws.push(first);
    expect(first.status).toBe(200);
    const firstInstance = await waitFor(() => streamInstanceOf(sid), 'the first stream in the directory');

    const second = await openRawStream(cluster.serves[1]!.url, other.slug, other.token, sid);
    raws.push(second);
    expect(second.status).toBe(200);
    expect(await within(first.ended, 5_000)).toBe('ended');
    const secondInstance = await waitFor(async () => {
      const now = await streamInstanceOf(sid);
      return now !== firstInstance && now;
    }, 'the directory to name the second stream holder');
    expect(secondInstance).not.toBe(firstInstance);

    const pushed = await push(api, other, { title: 'after the move', payload: {} });
    await waitFor(() => second.messages.some((m) => m.params?.meta?.todo_id === pushed.id), 'the doorbell on the second stream');
    await sleep(SETTLE_MS);
    expect(second.messages.filter((m) => m.params?.meta?.todo_id === pushed.id)).toHaveLength(1);
    expect(first.messages.some((m) => m.params?.meta?.todo_id === pushed.id)).toBe(false);
    expect(second.isEnded()).toBe(false);
  });

  it('a revocation ends the session on every instance: every call answers 401 and the open streams end', async () => {
    const other = await vend(api, { name: 'to-revoke', queues: ['jobs'] });
    const sid = await rawSession(cluster.lb.url, other.slug, other.token);
    const stream = await openRawStream(cluster.serves[2]!.url, other.slug, other.token, sid);
    raws.push(stream);
    await waitFor(() => streamInstanceOf(sid), 'the stream in the directory');
    // Every instance has used the session, so each holds a copy that the revocation must drop.
    for (const s of cluster.serves) {
      const r = await fetch(`${s.url}/mcp/${other.slug}`, {
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', authorization: `Bearer ${other.token}`, 'mcp-session-id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      });
      expect(r.status).toBe(200);
    }

    expect((await api('POST', `/api/v1/endpoints/${other.slug}/revoke`)).status).toBe(200);
    expect(await within(stream.ended, 5_000)).toBe('ended');
    for (const base of [...cluster.serves.map((s) => s.url), cluster.lb.url]) {
      const r = await fetch(`${base}/mcp/${other.slug}`, {
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', authorization: `Bearer ${other.token}`, 'mcp-session-id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
      });
      expect([401, 404], `${base} answered ${r.status}`).toContain(r.status);
    }
    expect(await sql`select id from mcp_sessions where id = ${sid}`).toHaveLength(0);

    // The SDK agent's endpoint: its stream ends too, and the SDK's reconnect is refused.
    expect((await api('POST', `/api/v1/endpoints/${e.slug}/revoke`)).status).toBe(200);
    await waitFor(() => agent.exchanges.some((x) => x.method === 'GET' && x.status === 401), 'the SDK client to find its stream ended and be refused on reconnect');
    await expect(agent.call('claim_next')).rejects.toThrow(/401|Unauthorized/);
  });
});

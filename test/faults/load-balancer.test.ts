import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startThrowawayCluster, type RunningCluster } from '../support/throwaway-cluster.ts';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { INSTANCE_DEAD_AFTER_MS } from '../../src/store/instances.ts';
import { apiCaller, humanWithToken } from '../support/app.ts';
import { push, vend, type Api, type Vended } from '../support/fixtures.ts';
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
} from '../support/haproxy.ts';
import { sleep, stopAllServes, waitFor } from '../support/processes.ts';

/**
 * Fault: `kill -9` of the instance holding an agent's stream, behind a real HAProxy (round robin,
 * no affinity, health checks on /healthz). The agent is the official SDK client talking to the
 * balancer's URL. Afterwards: its tool calls go on through the survivors, HAProxy marks the dead
 * server DOWN, the SDK re-opens its stream on a survivor and a new todo rings it exactly once;
 * within 30 s the directory stops counting the dead instance's streams; a revocation then ends
 * the session on every surviving instance.
 */

if (!haproxyInstalled()) console.warn(`[faults] load balancer skipped: ${HAPROXY_BIN} is not installed (apt-get install haproxy)`);

const DIRECTORY_FORGETS_WITHIN_MS = 30_000;

let pg: RunningCluster;
let sql: Sql;
let cluster: BalancedCluster;
let api: Api;
const raws: RawStream[] = [];
let agent: BalancedAgent | undefined;

const streamInstanceOf = async (sessionId: string) =>
  (await sql<{ stream_instance: string | null }[]>`select stream_instance from mcp_sessions where id = ${sessionId}`)[0]?.stream_instance ?? null;

/** The sessions of an endpoint whose stream is held by a live instance: the directory's own count. */
const liveStreamsOf = async (endpointId: string) =>
  (
    await sql<{ n: number }[]>`
      select count(*)::int as n from mcp_sessions s join instances i on i.id = s.stream_instance
      where s.endpoint_id = ${endpointId}::uuid and i.heartbeat_at > now() - make_interval(secs => ${INSTANCE_DEAD_AFTER_MS / 1000})`
  )[0]!.n;

describe.skipIf(!haproxyInstalled())('kill -9 of the instance holding the stream, behind HAProxy', () => {
  beforeAll(async () => {
    pg = await startThrowawayCluster({ prefer: 'system' });
    sql = connect(pg.url, { max: 3 });
    await migrate(sql);
    cluster = await startBalancedCluster(pg.url, 3);
    api = apiCaller(cluster.lb.url, (await humanWithToken(sql)).token);
  });

  beforeEach((ctx) => ctx.onTestFailed(() => console.error(clusterLogs(cluster))));

  afterAll(async () => {
    for (const r of raws) r.close();
    await agent?.close();
    await cluster?.stop();
    await stopAllServes();
    await sql?.end({ timeout: 5 });
    await pg?.stop();
  });

  it('calls go on, the stream re-opens on a survivor and rings, the directory forgets the dead stream, and a revocation ends the session everywhere', async () => {
    const e: Vended = await vend(api, { name: 'lb-kill', queues: ['jobs'] });
    const a = (agent = await connectBalancedAgent(e.mcp_url, e.token));
    const victimName = await waitFor(() => a.streamServer() ?? undefined, 'the SDK client to open its stream');
    const victim = cluster.serve(victimName);
    const victimInstance = await waitFor(async () => (await streamInstanceOf(a.sessionId)) ?? undefined, 'the directory to name the stream holder');

    // A second endpoint whose only stream is a raw GET on the victim: nothing re-opens it.
    const bystander: Vended = await vend(api, { name: 'lb-kill-bystander', queues: ['jobs'] });
    const rawSid = await rawSession(cluster.lb.url, bystander.slug, bystander.token);
    const raw = await openRawStream(victim.url, bystander.slug, bystander.token, rawSid);
    raws.push(raw);
    expect(raw.status).toBe(200);
    await waitFor(async () => (await streamInstanceOf(rawSid)) === victimInstance, 'the bystander stream on the victim');
    expect(await liveStreamsOf(bystander.id)).toBe(1);

    const before = await push(api, e, { title: 'before the kill', payload: {} });
    await waitFor(() => a.rings(before.id).length > 0, 'the doorbell before the kill');
    expect(await a.call('claim', { id: before.id })).toMatchObject({ id: before.id, state: 'claimed' });

    const getsBefore = a.exchanges.filter((x) => x.method === 'GET').length;
    const settle = (p: Promise<any>) =>
      p.then(
        (r) => (r.error ? `tool error ${r.error}` : 'ok'),
        (err: Error) => `failed ${err.message}`,
      );
    // Calls in flight at the kill: one the victim had received fails (the balancer cannot know
    // whether it ran, so it must not retry it); each one settles, none hangs.
    const inFlight = Array.from({ length: 3 }, () => settle(a.call('list_todos')));
    victim.child.kill('SIGKILL');
    const killedAt = Date.now();
    expect(await victim.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const inFlightOutcomes = await within(Promise.all(inFlight), 10_000);
    expect(inFlightOutcomes).not.toBe('pending');

    // Calls after the kill: one sent to the dead server before the health check notices is
    // retried on another (retries + redispatch: the connection failed, nothing was received).
    const outcomes: string[] = [];
    for (let i = 0; i < 9; i++) {
      outcomes.push(await settle(a.call('list_todos')));
    }
    const failed = outcomes.filter((o) => o !== 'ok');
    expect(failed.length, failed.join('; ')).toBeLessThanOrEqual(1);

    await cluster.lb.waitStatus(victimName, 'DOWN', 5_000);
    const markedDownMs = Date.now() - killedAt;
    for (let i = 0; i < 6; i++) expect(await a.call('list_todos')).toMatchObject({ todos: expect.any(Array) });

    // The raw stream on the victim broke with it; the SDK re-opened its own on a survivor.
    expect(await within(raw.ended, 5_000)).not.toBe('pending');
    await waitFor(
      () => a.exchanges.filter((x) => x.method === 'GET').length > getsBefore && a.exchanges.findLast((x) => x.method === 'GET' && x.status === 200 && x.servedBy !== victimName),
      `the SDK client to re-open its stream (transport errors: ${a.transportErrors.join('; ')})`,
      10_000,
    );
    const newHolder = a.streamServer()!;
    expect(newHolder).not.toBe(victimName);
    const reopenedMs = Date.now() - killedAt;
    const getsAfterReopen = a.exchanges.filter((x) => x.method === 'GET').length;
    const errorsAfterReopen = a.transportErrors.length;
    const newInstance = await waitFor(async () => {
      const now = await streamInstanceOf(a.sessionId);
      return now !== null && now !== victimInstance && now;
    }, 'the directory to name the new stream holder');

    const after = await push(api, e, { title: 'after the kill', payload: {} });
    await waitFor(() => a.rings(after.id).length > 0, `the doorbell after the kill (stream on ${newHolder})`);
    expect(a.rings(after.id)[0]!.params.meta).toMatchObject({ todo_id: after.id, queue: 'jobs' });
    expect(await a.call('claim', { id: after.id })).toMatchObject({ id: after.id, state: 'claimed' });
    await sleep(1_000);
    expect(a.rings(after.id)).toHaveLength(1);
    expect(a.rings(before.id)).toHaveLength(1);

    // Within 30 s of the kill the dead instance holds no stream the cluster counts, and is reaped.
    await waitFor(async () => (await liveStreamsOf(bystander.id)) === 0, 'the dead stream to stop counting', DIRECTORY_FORGETS_WITHIN_MS - (Date.now() - killedAt), 250);
    const uncountedMs = Date.now() - killedAt;
    await waitFor(
      async () => (await sql`select 1 from instances where id = ${victimInstance}`).length === 0,
      'the dead instance to be reaped',
      Math.max(1, DIRECTORY_FORGETS_WITHIN_MS - (Date.now() - killedAt)),
      250,
    );
    const reapedMs = Date.now() - killedAt;
    const started = await api('POST', `/api/v1/endpoints/${bystander.slug}/doorbell-tests`, {});
    expect(started.status, started.text).toBe(201);
    expect(started.json).toMatchObject({ stream_attached: false, channel_capability: { sessions: [{ stream_open: false }] } });
    expect(await liveStreamsOf(e.id)).toBe(1);
    expect(await streamInstanceOf(a.sessionId)).toBe(newInstance);

    // The re-opened stream sat idle through the balancer for longer than the 15 s keepalive
    // interval, was never cut or re-opened, and still rings.
    await sleep(Math.max(0, killedAt + reopenedMs + 16_000 - Date.now()));
    expect(a.exchanges.filter((x) => x.method === 'GET')).toHaveLength(getsAfterReopen);
    expect(a.transportErrors.slice(errorsAfterReopen)).toEqual([]);
    const idle = await push(api, e, { title: 'after an idle while', payload: {} });
    await waitFor(() => a.rings(idle.id).length > 0, 'the doorbell on the idle stream');
    await sleep(1_000);
    expect(a.rings(idle.id)).toHaveLength(1);

    // Revocation: the SDK's stream on the survivor ends and nothing it sends is served any more.
    expect((await api('POST', `/api/v1/endpoints/${e.slug}/revoke`)).status).toBe(200);
    await waitFor(() => a.exchanges.some((x) => x.method === 'GET' && x.status === 401), 'the SDK client to find its stream ended and be refused on reconnect');
    await expect(a.call('list_todos')).rejects.toThrow(/401|Unauthorized/);
    for (const s of cluster.serves.filter((s) => s !== victim)) {
      const r = await fetch(`${s.url}/mcp/${e.slug}`, {
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', authorization: `Bearer ${e.token}`, 'mcp-session-id': a.sessionId },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
      });
      expect([401, 404], `${s.url} answered ${r.status}`).toContain(r.status);
    }
    expect(await sql`select id from mcp_sessions where endpoint_id = ${e.id}::uuid`).toHaveLength(0);

    const stat = (await cluster.lb.stats()).get(victimName)!;
    console.info(
      `[faults] load balancer: ${victimName} killed; HAProxy marked it DOWN after ${markedDownMs} ms ` +
        `(${stat.retries} retries, ${stat.redispatches} redispatches); calls in flight at the kill: ${JSON.stringify(inFlightOutcomes)}; ` +
        `${failed.length} of ${outcomes.length} calls failed right after the kill; ` +
        `SDK stream re-opened on ${newHolder} ${reopenedMs} ms after; dead stream uncounted after ${uncountedMs} ms, instance reaped after ${reapedMs} ms; ` +
        `transport errors: ${JSON.stringify(a.transportErrors)}`,
    );
  });
});

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { push as pushVia, startTestApp, vend as vendVia, withApp, type Api, type TestApp, type Vended } from '../../test/support/fixtures.ts';
import { settle, until } from '../../test/support/agents.ts';

/** claim_next's long poll, end to end: the SDK's Client (and raw HTTP where a client must vanish) against the real server. */

const fixture = withApp({ refillMs: 60_000 });
let app: TestApp;
let api: Api;
beforeAll(() => void ({ app, api } = fixture));

const vend = (body: Record<string, unknown> = {}): Promise<Vended> => vendVia(api, { name: 'poller', queues: ['reviews', 'inbox'], ...body });
const push = async (e: Vended, title: string, queue = 'reviews'): Promise<string> => (await pushVia(api, e, { title, queue })).id;

async function connect(e: Vended): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'claude-code', version: '2.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), { requestInit: { headers: { Authorization: `Bearer ${e.token}` } } });
  await client.connect(transport);
  fixture.clients.push(client);
  return { client, transport };
}

type Answer = { error?: string; details?: Record<string, unknown> } & Record<string, any>;
async function call(client: Client, name: string, args: Record<string, unknown> = {}, signal?: AbortSignal): Promise<Answer> {
  const r = (await client.callTool({ name, arguments: args }, undefined, { signal, timeout: 120_000 })) as {
    content: { text: string }[];
    structuredContent?: { error?: Record<string, unknown> };
    isError?: boolean;
  };
  return r.isError ? { error: r.content[0]!.text, details: r.structuredContent?.error } : JSON.parse(r.content[0]!.text);
}

/** Calls waiting in the server for this endpoint's sessions (POSTs being answered). */
const inFlight = (on: TestApp, e: Vended) => on.services.sessions.all().filter((s) => s.endpoint.slug === e.slug).reduce((n, s) => n + s.inFlight, 0);

async function pendingState(id: string): Promise<string> {
  const [row] = await fixture.sql`select state from todos where id = ${id}`;
  return row!.state as string;
}

describe('claim_next with wait', () => {
  it('returns as soon as a todo is pushed, with the normal claim', async () => {
    const e = await vend();
    const { client } = await connect(e);
    const started = performance.now();
    const waiting = call(client, 'claim_next', { wait: '20s' });
    await until(() => inFlight(app, e) === 1, 'the call to wait');
    await settle(100);
    const id = await push(e, 'Review PR 12');
    const pushedAt = performance.now();
    const answer = await waiting;
    const wokeMs = performance.now() - pushedAt;
    expect(answer).toMatchObject({ empty: false, todo: { id, state: 'claimed', attempt: 1 } });
    // Woken by todo_ready, not by the 5 s look-again nor the end of the wait.
    expect(wokeMs).toBeLessThan(1_000);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await pendingState(id)).toBe('claimed');
  });

  it('answers {empty: true} when the wait ends with nothing claimable, and at once without a wait', async () => {
    const e = await vend();
    const { client } = await connect(e);
    let t = performance.now();
    expect(await call(client, 'claim_next', { wait: 1 })).toEqual({ empty: true });
    expect(performance.now() - t).toBeGreaterThanOrEqual(950);
    t = performance.now();
    expect(await call(client, 'claim_next', { wait: '0s' })).toEqual({ empty: true });
    expect(await call(client, 'claim_next')).toEqual({ empty: true });
    expect(performance.now() - t).toBeLessThan(900);
  });

  it('claims at once when work is already waiting, and only from the queue asked for', async () => {
    const e = await vend();
    const { client } = await connect(e);
    const inbox = await push(e, 'inbox work', 'inbox');
    const waiting = call(client, 'claim_next', { wait: '20s', queue: 'reviews' });
    await until(() => inFlight(app, e) === 1, 'the call to wait');
    await settle(150);
    expect(inFlight(app, e)).toBe(1);
    const review = await push(e, 'review work', 'reviews');
    expect(await waiting).toMatchObject({ empty: false, todo: { id: review } });
    expect(await call(client, 'claim_next', { wait: '20s' })).toMatchObject({ empty: false, todo: { id: inbox } });
  });

  it('refuses a wait outside 0-60 s or not a duration, naming wait, and claims nothing', async () => {
    const e = await vend();
    const id = await push(e, 'untouched');
    const { client } = await connect(e);
    for (const wait of ['61s', '2m', 'soon', '', '-1s', 61, -1, true, '1h']) {
      const r = await call(client, 'claim_next', { wait });
      expect(r.error, JSON.stringify(wait)).toMatch(/^invalid_argument: wait: /);
    }
    expect(await pendingState(id)).toBe('pending');
  });

  it('gives one todo to one of two waiters; the other waits on for the next', async () => {
    const e = await vend();
    const { client } = await connect(e);
    const first = call(client, 'claim_next', { wait: '20s' });
    const second = call(client, 'claim_next', { wait: '20s' });
    await until(() => inFlight(app, e) === 2, 'both calls to wait');
    await settle(100);
    const one = await push(e, 'one');
    const winner = await Promise.race([first, second]);
    expect(winner).toMatchObject({ empty: false, todo: { id: one } });
    await settle(300);
    expect(inFlight(app, e)).toBe(1);
    const two = await push(e, 'two');
    const answers = await Promise.all([first, second]);
    expect(answers.map((a) => a.todo.id).sort()).toEqual([one, two].sort());
  });

  it('holds at most 8 waits per endpoint; the ninth is refused naming the limit', async () => {
    const e = await vend();
    const { client, transport } = await connect(e);
    const waits = Array.from({ length: 8 }, () => call(client, 'claim_next', { wait: '30s' }));
    await until(() => inFlight(app, e) === 8, 'eight calls to wait');
    const ninth = await call(client, 'claim_next', { wait: '30s' });
    expect(ninth.error).toMatch(/^resource_exhausted: .*8 claim_next calls waiting \(the limit is 8 per endpoint\)/);
    expect(ninth.details).toMatchObject({ code: 'resource_exhausted', limit: 8 });
    // Without a wait it still answers.
    expect(await call(client, 'claim_next')).toEqual({ empty: true });
    // The session's end (DELETE) ends every wait, each answering empty.
    const t = performance.now();
    await transport.terminateSession();
    expect(await Promise.all(waits)).toEqual(Array.from({ length: 8 }, () => ({ empty: true })));
    expect(performance.now() - t).toBeLessThan(2_000);
    // Nothing was claimed by the ended waits.
    const id = await push(e, 'after the session');
    await settle(200);
    expect(await pendingState(id)).toBe('pending');
  });

  it('ends a wait the client cancels (notifications/cancelled): a todo pushed after it stays pending', async () => {
    const e = await vend();
    const { client } = await connect(e);
    const abort = new AbortController();
    const waiting = call(client, 'claim_next', { wait: '30s' }, abort.signal).catch((err: Error) => err);
    await until(() => inFlight(app, e) === 1, 'the call to wait');
    abort.abort();
    expect(await waiting).toBeInstanceOf(Error);
    await until(() => inFlight(app, e) === 0, 'the server to end the cancelled wait', 2_000);
    const id = await push(e, 'nobody waits');
    await settle(200);
    expect(await pendingState(id)).toBe('pending');
  });

  it('ends a wait whose client went away (the HTTP request closed)', async () => {
    const e = await vend();
    const headers = { authorization: `Bearer ${e.token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
    const init = await fetch(e.mcp_url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
    });
    const sid = init.headers.get('mcp-session-id')!;
    const abort = new AbortController();
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'claim_next', arguments: { wait: '30s' } } });
    const waiting = fetch(e.mcp_url, { method: 'POST', headers: { ...headers, 'mcp-session-id': sid }, body, signal: abort.signal }).catch((err: Error) => err);
    await until(() => inFlight(app, e) === 1, 'the call to wait');
    abort.abort();
    await waiting;
    await until(() => inFlight(app, e) === 0, 'the server to end the abandoned wait', 2_000);
    const id = await push(e, 'nobody listens');
    await settle(200);
    expect(await pendingState(id)).toBe('pending');
  });

  it('keeps its session live while it waits', async () => {
    const e = await vend();
    const headers = { authorization: `Bearer ${e.token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
    const init = await fetch(e.mcp_url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
    });
    const sid = init.headers.get('mcp-session-id')!;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'claim_next', arguments: { wait: '9s' } } });
    const waiting = fetch(e.mcp_url, { method: 'POST', headers: { ...headers, 'mcp-session-id': sid }, body });
    await until(() => inFlight(app, e) === 1, 'the call to wait');
    // Six minutes pass for the clock: a session with no stream idle for five would end.
    app.clock.advance(6 * 60_000);
    await settle(5_600); // past one look-again, which marks the session active
    await app.services.directory.expireIdle();
    const [row] = await fixture.sql`select count(*)::int as n from mcp_sessions where id = ${sid}`;
    expect(row!.n).toBe(1);
    expect(((await (await waiting).json()) as { result: { structuredContent: unknown } }).result.structuredContent).toEqual({ empty: true });
  }, 20_000);
});

describe('claim_next with wait and the server stopping', () => {
  it('does not hold App.stop: the wait ends and stop returns promptly', async () => {
    const other = await startTestApp(fixture.db.url, new ManualClock());
    try {
      const e = await vend();
      const mcpUrl = `${other.url}/mcp/${e.slug}`;
      const client = new Client({ name: 'claude-code', version: '2.1.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${e.token}` } } }));
      const waiting = call(client, 'claim_next', { wait: '60s' }).catch((err: Error) => err);
      await until(() => other.services.sessions.all().some((s) => s.stream !== null && s.inFlight === 1), 'the stream to open and the call to wait');
      const t = performance.now();
      await other.stop();
      expect(performance.now() - t).toBeLessThan(2_000);
      expect(await waiting).toEqual({ empty: true });
      await client.close().catch(() => {});
    } finally {
      await other.stop();
    }
  });
});

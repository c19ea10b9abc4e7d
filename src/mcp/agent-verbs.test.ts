import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { push as pushVia, vend as vendVia, withApp, type Api, type TestApp, type TestDb, type Vended } from '../../test/support/fixtures.ts';
import { retryBackoffSeconds } from '../domain/lifecycle.ts';

/** The agent verbs end to end: the MCP SDK's own Client over real HTTP against the real server. */

const fixture = withApp({ refillMs: 60_000 }); // refill rate-limit buckets before each test
let db: TestDb;
let app: TestApp;
let api: Api;
const clients = fixture.clients;
beforeAll(() => void ({ db, app, api } = fixture));

const vend = (body: Record<string, unknown> = {}): Promise<Vended> => vendVia(api, { name: 'agent', queues: ['reviews', 'inbox'], ...body });

async function push(e: Vended, title: string, queue = 'reviews'): Promise<string> {
  app.clock.advance(1000);
  return (await pushVia(api, e, { title, queue, payload: { title } })).id;
}

async function connect(e: Vended, name = 'claude-code'): Promise<Client> {
  const client = new Client({ name, version: '2.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), {
    requestInit: { headers: { Authorization: `Bearer ${e.token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** Calls a tool; returns the parsed JSON result, or `{error: "<code>: <message>"}` for a tool error. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const r = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
  const text = r.content[0]!.text;
  return r.isError ? { error: text } : JSON.parse(text);
}

describe('initialize and tools/list', () => {
  it('negotiates with the SDK client and advertises the channel capability and instructions', async () => {
    const client = await connect(await vend());
    expect(client.getServerVersion()).toMatchObject({ name: 'switchboard' });
    expect(client.getServerCapabilities()).toEqual({ tools: { listChanged: true }, experimental: { 'claude/channel': {} } });
    expect(client.getInstructions()).toMatch(/todo_id[\s\S]*digest[\s\S]*claim_next/);
  });

  it('lists exactly the verbs in scope', async () => {
    const narrow = await connect(await vend({ verbs: ['list_todos', 'claim'] }));
    const self = ['clock_in', 'clock_out', 'presence', 'ack_doorbell', 'test_doorbell', 'get_doorbell_test', 'whoami'];
    expect((await narrow.listTools()).tools.map((t) => t.name)).toEqual(['list_todos', 'claim', ...self]);
    const full = await connect(await vend());
    expect((await full.listTools()).tools.map((t) => t.name)).toEqual([
      'list_todos', 'get_todo', 'claim', 'claim_next', 'heartbeat', 'complete', 'fail', 'release', ...self,
    ]);
    expect(await call(narrow, 'complete', { id: 'td_00000000-0000-4000-8000-000000000000' })).toEqual({
      error: expect.stringMatching(/^forbidden: /),
    });
  });
});

describe('claim_next → heartbeat → complete', () => {
  it('drains a todo through its lifecycle and records the claiming session', async () => {
    const e = await vend();
    const id = await push(e, 'Review PR 12');
    const client = await connect(e);
    const claimed = await call(client, 'claim_next', { lease_ttl_seconds: 120 });
    expect(claimed).toMatchObject({ empty: false, todo: { id, state: 'claimed', attempt: 1, payload: { title: 'Review PR 12' } } });
    const lease0 = Date.parse(claimed.todo.lease_expires_at);
    expect(lease0 - app.clock.now().getTime()).toBeLessThanOrEqual(120_000);

    const [row] = await db.sql`select claimed_session_id from todos where id = ${id}`;
    expect(app.services.sessions.all().map((s) => s.id)).toContain(row!.claimed_session_id);

    app.clock.advance(60_000);
    const hb = await call(client, 'heartbeat', { id, lease_ttl_seconds: 600 });
    expect(Date.parse(hb.lease_expires_at)).toBeGreaterThan(lease0);
    const done = await call(client, 'complete', { id, result: { verdict: 'lgtm' } });
    expect(done).toMatchObject({ id, state: 'done' });
    expect(await call(client, 'claim_next')).toEqual({ empty: true });
    expect(await call(client, 'complete', { id })).toEqual({ error: expect.stringMatching(/^conflict: /) });
    const got = await call(client, 'get_todo', { id });
    expect(got).toMatchObject({ id, state: 'done', result: { verdict: 'lgtm' }, dead: false });
  });

  it('claims a todo that another transaction holds locked for a moment (a digest marking it rung), rather than answering empty', async () => {
    const e = await vend();
    const id = await push(e, 'Locked for a moment');
    const client = await connect(e);
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = db.sql.begin(async (tx) => {
      await tx`select id from todos where id = ${id} for update`;
      locked();
      await new Promise((r) => setTimeout(r, 25));
    });
    await isLocked;
    const claimed = await call(client, 'claim_next');
    await holder;
    expect(claimed).toMatchObject({ empty: false, todo: { id, state: 'claimed' } });
  });

  it('lists todos newest first without payloads, and filters by queue', async () => {
    const e = await vend();
    const a = await push(e, 'a', 'reviews');
    const b = await push(e, 'b', 'inbox');
    const client = await connect(e);
    const all = await call(client, 'list_todos');
    expect(all.todos.map((t: { id: string }) => t.id)).toEqual([b, a]);
    expect(all.todos[0]).not.toHaveProperty('payload');
    expect((await call(client, 'list_todos', { queue: 'inbox' })).todos.map((t: { id: string }) => t.id)).toEqual([b]);
    expect(await call(client, 'list_todos', { queue: 'elsewhere' })).toEqual({ error: expect.stringMatching(/^forbidden: /) });
    expect(await call(client, 'list_todos', { limit: 500 })).toEqual({ error: expect.stringMatching(/^invalid_argument: limit/) });
  });
});

describe('fail → retry → dead letter', () => {
  it('retries after the backoff and dead-letters on the fifth failure', async () => {
    const e = await vend();
    const id = await push(e, 'flaky');
    const client = await connect(e);
    for (let attempt = 1; attempt <= 5; attempt++) {
      const claimed = await call(client, 'claim', { id });
      expect(claimed).toMatchObject({ id, attempt });
      const failed = await call(client, 'fail', { id, result: { attempt } });
      if (attempt < 5) {
        expect(failed).toMatchObject({ state: 'failed', dead: false });
        expect(Date.parse(failed.next_retry_at) - app.clock.now().getTime()).toBe(retryBackoffSeconds(attempt) * 1000);
        expect(await call(client, 'claim_next')).toEqual({ empty: true });
        app.clock.advance(retryBackoffSeconds(attempt) * 1000);
      } else {
        expect(failed).toMatchObject({ state: 'failed', dead: true, next_retry_at: null });
      }
    }
    app.clock.advance(3_600_000);
    expect(await call(client, 'claim_next')).toEqual({ empty: true });
  });
});

describe('a transition on a todo no one holds', () => {
  /** The tool error's text and its structured error. */
  async function refused(client: Client, name: string, args: Record<string, unknown>): Promise<{ text: string; error: Record<string, unknown> }> {
    const r = (await client.callTool({ name, arguments: args })) as unknown as { content: { text: string }[]; isError?: boolean; structuredContent: { error: Record<string, unknown> } };
    expect(r.isError).toBe(true);
    return { text: r.content[0]!.text, error: r.structuredContent.error };
  }

  it('says the todo is already finished, or waiting, naming its state, not that the endpoint lost a claim', async () => {
    const e = await vend();
    const client = await connect(e);
    const done = await push(e, 'done once');
    await call(client, 'claim', { id: done });
    await call(client, 'complete', { id: done, result: { ok: true } });
    for (const verb of ['complete', 'fail', 'heartbeat', 'release']) {
      const { text, error } = await refused(client, verb, { id: done });
      expect(text).toBe(`conflict: cannot ${verb} todo ${done}: it is already finished (state done), so no claim on it is left`);
      expect(error).toMatchObject({ code: 'conflict', state: 'done' });
    }

    app.clock.advance(1000);
    const dead = (await pushVia(api, e, { title: 'one try', queue: 'reviews', max_attempts: 1 })).id;
    await call(client, 'claim', { id: dead });
    await call(client, 'fail', { id: dead });
    const deadRefusal = await refused(client, 'complete', { id: dead });
    expect(deadRefusal.text).toBe(`conflict: cannot complete todo ${dead}: it is already finished (state failed, a dead letter), so no claim on it is left`);
    expect(deadRefusal.error).toMatchObject({ code: 'conflict', state: 'failed' });

    const retrying = await push(e, 'will retry');
    await call(client, 'claim', { id: retrying });
    const failed = await call(client, 'fail', { id: retrying });
    const retryRefusal = await refused(client, 'fail', { id: retrying });
    expect(retryRefusal.text).toBe(`conflict: cannot fail todo ${retrying}: it already failed (state failed) and waits for its retry at ${failed.next_retry_at}; claim it again then`);
    expect(retryRefusal.error).toMatchObject({ code: 'conflict', state: 'failed' });

    const released = await push(e, 'handed back');
    await call(client, 'claim', { id: released });
    await call(client, 'release', { id: released });
    const pendingRefusal = await refused(client, 'complete', { id: released });
    expect(pendingRefusal.text).toMatch(new RegExp(`^conflict: cannot complete todo ${released}: it is pending, so no one holds its claim .*; claim it first$`));
    expect(pendingRefusal.error).toMatchObject({ code: 'conflict', state: 'pending' });
  });
});

describe('competing consumers', () => {
  it('two clients racing for one todo: exactly one wins', async () => {
    const e = await vend();
    const id = await push(e, 'contended');
    const [a, b] = await Promise.all([connect(e, 'worker-a'), connect(e, 'worker-b')]);
    const results = await Promise.all([call(a, 'claim', { id }), call(b, 'claim', { id })]);
    const winners = results.filter((r) => r.id === id);
    const losers = results.filter((r) => typeof r.error === 'string' && r.error.startsWith('conflict: '));
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(1);
  });

  it('a fenced claim needs its lease token; sessions sharing the credential cannot finish it without it', async () => {
    const e = await vend();
    const id = await push(e, 'fenced');
    const [a, b] = await Promise.all([connect(e), connect(e)]);
    const claimed = await call(a, 'claim', { id, require_fence: true });
    expect(claimed.lease_token).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(await call(b, 'complete', { id })).toEqual({ error: expect.stringMatching(/^conflict: .*lease_token/) });
    expect(await call(b, 'complete', { id, lease_token: 'wrong' })).toEqual({ error: expect.stringMatching(/^conflict: /) });
    expect(await call(a, 'heartbeat', { id, lease_token: claimed.lease_token })).toMatchObject({ id, state: 'claimed' });
    expect(await call(a, 'complete', { id, lease_token: claimed.lease_token })).toMatchObject({ id, state: 'done' });

    const unfenced = await push(e, 'unfenced');
    await call(a, 'claim', { id: unfenced });
    expect(await call(a, 'release', { id: unfenced, lease_token: 'anything' })).toEqual({ error: expect.stringMatching(/^conflict: .*not fenced/) });
    expect(await call(a, 'release', { id: unfenced })).toMatchObject({ id: unfenced, state: 'pending', attempt: 1 });
  });
});

describe('tenancy', () => {
  it("a session of endpoint A cannot see, claim or complete a todo of endpoint B", async () => {
    const a = await vend();
    const b = await vend();
    const theirs = await push(b, "B's work");
    const clientA = await connect(a);
    expect((await call(clientA, 'list_todos')).todos).toEqual([]);
    expect(await call(clientA, 'claim_next')).toEqual({ empty: true });
    const unknownId = 'td_00000000-0000-4000-8000-000000000000';
    for (const verb of ['claim', 'get_todo', 'complete', 'fail', 'heartbeat', 'release']) {
      const foreign = await call(clientA, verb, { id: theirs });
      const unknown = await call(clientA, verb, { id: unknownId });
      expect(foreign.error).toMatch(/^not_found: /);
      expect(foreign.error.replace(theirs, 'ID')).toBe(unknown.error.replace(unknownId, 'ID'));
    }
    const [row] = await db.sql`select state from todos where id = ${theirs}`;
    expect(row!.state).toBe('pending');
  });
});

describe('argument validation', () => {
  it('names the argument for unknown, missing or malformed arguments and changes nothing', async () => {
    const e = await vend();
    const id = await push(e, 'x');
    const client = await connect(e);
    expect(await call(client, 'claim', {})).toEqual({ error: expect.stringMatching(/^invalid_argument: id/) });
    expect(await call(client, 'claim', { id: 'nope' })).toEqual({ error: expect.stringMatching(/^invalid_argument: id/) });
    expect(await call(client, 'claim', { id, endpoint: 'other' })).toEqual({ error: expect.stringMatching(/^invalid_argument: endpoint: unknown argument/) });
    expect(await call(client, 'claim', { id, lease_ttl_seconds: 'ten' })).toEqual({ error: expect.stringMatching(/^invalid_argument: lease_ttl_seconds/) });
    expect(await call(client, 'list_todos', { state: 'sleeping' })).toEqual({ error: expect.stringMatching(/^invalid_argument: state/) });
    const [row] = await db.sql`select state, attempt from todos where id = ${id}`;
    expect(row).toEqual({ state: 'pending', attempt: 0 });
  });

  it('clamps a lease over 24 h and uses the default for zero', async () => {
    const e = await vend();
    const id = await push(e, 'x');
    const client = await connect(e);
    const long = await call(client, 'claim', { id, lease_ttl_seconds: 10 * 86_400 });
    expect(Date.parse(long.lease_expires_at) - app.clock.now().getTime()).toBe(86_400_000);
    const hb = await call(client, 'heartbeat', { id, lease_ttl_seconds: 0 });
    expect(Date.parse(hb.lease_expires_at) - app.clock.now().getTime()).toBe(300_000);
  });
});

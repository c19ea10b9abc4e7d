import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiCaller, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { Sql } from '../db/connect.ts';
import { authenticateEndpointCredentialUnscoped, vendEndpoint } from '../store/endpoints.ts';
import { addHuman, createToken, revokeToken } from '../store/humans.ts';
import { claimTodo, completeTodo, failTodo, type Caller } from '../store/todos/index.ts';

// The operator API over real HTTP against a real server and a real database of this file's own.
// Expected values are spelled out here rather than imported, so a drifting constant fails a test.

type Call = ReturnType<typeof apiCaller>;
type Res = Awaited<ReturnType<Call>>;

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let app: Awaited<ReturnType<typeof startTestApp>>;
let anon: Call;

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;
const REALM = 'Bearer realm="switchboard-api"';
const DRAIN_VERBS = ['list_todos', 'get_todo', 'claim', 'claim_next', 'heartbeat', 'complete', 'fail', 'release'];
const SBK = /^sbk_[A-Za-z0-9_-]{43}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TD_ID = /^td_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const NO_SUCH_UUID = '00000000-0000-4000-8000-000000000000';

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const wire = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  app = await startTestApp(db.url);
  anon = apiCaller(app.baseUrl);
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
});
// The clock is frozen, so token buckets never refill by themselves. Moving it a minute before each
// test refills every bucket (and gives each test its own timestamps); the rate-limit tests move it
// themselves, within one test.
beforeEach(() => {
  app.clock.advance(60_000);
});

// ---------------------------------------------------------------------------------------------
// Helpers

interface Operator {
  id: string;
  handle: string;
  token: string;
  call: Call;
}

let handleSeq = 0;
async function operator(opts: { displayName?: string; email?: string } = {}): Promise<Operator> {
  const handle = `op-${process.pid}-${++handleSeq}`;
  const human = await addHuman(sql, { handle, ...opts });
  const { token } = await createToken(sql, { handle, name: 'test' });
  return { id: human.id, handle, token, call: apiCaller(app.baseUrl, token) };
}

interface Vended {
  id: string;
  slug: string;
  agent_name: string;
  state: string;
  queues: string[];
  verbs: string[];
  mcp_url: string;
  created_at: string;
  revoked_at: string | null;
  last_seen_at: string | null;
  token: string;
  mcp_json: unknown;
}

async function vend(op: Operator, body: Record<string, unknown> = { name: 'worker' }): Promise<Vended> {
  const res = await op.call('POST', '/api/v1/endpoints', body);
  expect(res.status, res.text).toBe(201);
  return res.json as Vended;
}

const pushPath = (ref: string) => `/api/v1/endpoints/${encodeURIComponent(ref)}/todos`;

async function push(op: Operator, ref: string, body: Record<string, unknown>): Promise<{ id: string; event_id: number; queue: string }> {
  const res = await op.call('POST', pushPath(ref), body);
  expect(res.status, res.text).toBe(201);
  return res.json as { id: string; event_id: number; queue: string };
}

async function revoke(op: Operator, ref: string): Promise<Res> {
  return op.call('POST', `/api/v1/endpoints/${encodeURIComponent(ref)}/revoke`);
}

/** Whole-database row counts: tests in a file run one at a time, so these are stable. */
async function counts(): Promise<{ agents: number; endpoints: number; todos: number; events: number }> {
  const [row] = await sql<{ agents: number; endpoints: number; todos: number; events: number }[]>`
    select (select count(*)::int from agents) as agents, (select count(*)::int from endpoints) as endpoints,
           (select count(*)::int from todos) as todos, (select count(*)::int from events) as events`;
  return row!;
}

/** The agent side of an endpoint, for driving todos through the store. */
async function agentOf(endpointId: string): Promise<Caller> {
  const [row] = await sql<{ agent_id: string; scope_queues: string[] }[]>`
    select agent_id, scope_queues from endpoints where id = ${endpointId}`;
  return { endpointId, owner: `agent:${row!.agent_id}`, queues: row!.scope_queues };
}

function expectError(res: Res, status: number, code: string, extra: Record<string, unknown> = {}): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.json).toEqual({ error: expect.any(String), code, ...extra });
  expect(res.json.error).not.toBe('');
}

const expectInvalid = (res: Res, field: string) => expectError(res, 400, 'invalid_argument', { field });

// ---------------------------------------------------------------------------------------------

describe('/api/v1 auth guard (GET /api/v1/me)', () => {
  it('answers a valid personal token with the caller', async () => {
    const op = await operator({ displayName: 'Grace Hopper', email: 'grace@example.test' });
    const res = await op.call('GET', '/api/v1/me');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ id: op.id, handle: op.handle, display_name: 'Grace Hopper', email: 'grace@example.test' });
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  it('accepts the Bearer scheme in any letter case', async () => {
    const op = await operator();
    const res = await anon('GET', '/api/v1/me', undefined, { authorization: `bearer ${op.token}` });
    expect(res.status).toBe(200);
    expect(res.json.id).toBe(op.id);
  });

  it('refuses every kind of bad credential with the same 401, realm and envelope', async () => {
    const op = await operator();
    const ep = await vend(op);
    const revoked = await operator();
    expect((await revoked.call('GET', '/api/v1/me')).status).toBe(200);
    await revokeToken(sql, revoked.token.slice(0, 12), app.clock.now());

    const attempts: [string, Record<string, string>][] = [
      ['no Authorization header', {}],
      ['a Basic header', { authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` }],
      ['a valid token under the wrong scheme', { authorization: `Token ${op.token}` }],
      ['a Bearer header with no token', { authorization: 'Bearer' }],
      ['a Bearer header with two tokens', { authorization: `Bearer ${op.token} ${op.token}` }],
      ['a bare token without a scheme', { authorization: op.token }],
      ['an unknown sbp_ token', { authorization: `Bearer sbp_${randomBytes(32).toString('base64url')}` }],
      ['a revoked sbp_ token', { authorization: `Bearer ${revoked.token}` }],
      ['an endpoint credential (sbk_)', { authorization: `Bearer ${ep.token}` }],
    ];
    const bodies: string[] = [];
    for (const [label, headers] of attempts) {
      const res = await anon('GET', '/api/v1/me', undefined, headers);
      expect(res.status, label).toBe(401);
      expect(res.headers.get('www-authenticate'), label).toBe(REALM);
      expect(res.json, label).toEqual({ error: expect.any(String), code: 'unauthenticated' });
      bodies.push(res.text);
    }
    // One answer for every reason: nothing tells the caller which kind of token it held.
    expect(new Set(bodies).size).toBe(1);
  });

  it('refuses an endpoint credential on a write too, and writes nothing', async () => {
    const op = await operator();
    const ep = await vend(op);
    const before = await counts();
    const asEndpoint = apiCaller(app.baseUrl, ep.token);
    const res = await asEndpoint('POST', '/api/v1/endpoints', { name: 'escalation' });
    expectError(res, 401, 'unauthenticated');
    expect(res.headers.get('www-authenticate')).toBe(REALM);
    const pushed = await asEndpoint('POST', pushPath(ep.slug), { title: 'self-assigned' });
    expectError(pushed, 401, 'unauthenticated');
    expect(await counts()).toEqual(before);
  });

  it('checks the token before the body: an unauthenticated oversized or malformed body is still a 401', async () => {
    const big = await anon('POST', '/api/v1/endpoints', { name: 'x'.repeat(70 * 1024) });
    expectError(big, 401, 'unauthenticated');
    const malformed = await anon('POST', '/api/v1/endpoints', '{"name":');
    expectError(malformed, 401, 'unauthenticated');
  });
});

describe('POST /api/v1/endpoints', () => {
  it('answers 201 with the one-time token, slug, MCP wiring and default scope', async () => {
    const op = await operator();
    const before = await counts();
    const res = await op.call('POST', '/api/v1/endpoints', { name: 'Review Bot!' });
    expect(res.status, res.text).toBe(201);
    const b = res.json as Vended;
    expect(b.token).toMatch(SBK);
    expect(b.slug).toMatch(/^review-bot-[0-9a-f]{8}$/);
    expect(b.mcp_url).toBe(`${app.baseUrl}/mcp/${b.slug}`);
    expect(b.mcp_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp\/review-bot-[0-9a-f]{8}$/);
    expect(b.mcp_json).toEqual({
      mcpServers: { switchboard: { type: 'http', url: b.mcp_url, headers: { Authorization: `Bearer ${b.token}` } } },
    });
    expect(b).toEqual({
      id: expect.stringMatching(UUID),
      slug: b.slug,
      agent_name: 'Review Bot!',
      state: 'active',
      queues: ['inbox'],
      verbs: DRAIN_VERBS,
      mcp_url: b.mcp_url,
      created_at: wire(app.clock.now()),
      revoked_at: null,
      last_seen_at: null,
      presence: { presence: 'in', source: 'default', until: null },
      shift: null,
      sessions: 0,
      unheard_sessions: 0,
      token: b.token,
      mcp_json: b.mcp_json,
    });
    const after = await counts();
    expect(after.agents).toBe(before.agents + 1);
    expect(after.endpoints).toBe(before.endpoints + 1);
  });

  it('stores only the SHA-256 of the token and its 12-character prefix, never the plaintext', async () => {
    const op = await operator();
    const b = await vend(op, { name: 'secret keeper' });
    const [row] = await sql<Record<string, unknown>[]>`select * from endpoints where id = ${b.id}`;
    expect(row!['credential_hash']).toBe(sha256(b.token));
    expect(row!['credential_hash']).toMatch(/^[0-9a-f]{64}$/);
    expect(row!['credential_prefix']).toBe(b.token.slice(0, 12));
    expect(row!['credential_prefix']).toMatch(/^sbk_.{8}$/);
    const secretPart = b.token.slice(4);
    for (const [column, value] of Object.entries(row!)) {
      const text = value instanceof Date ? value.toISOString() : JSON.stringify(value);
      expect(text, column).not.toContain(b.token);
      expect(text, column).not.toContain(secretPart);
    }
    const [agent] = await sql`select a.* from agents a join endpoints e on e.agent_id = a.id where e.id = ${b.id}`;
    expect(agent).toMatchObject({ owner_human_id: op.id, name: 'secret keeper' });
    expect(JSON.stringify(agent)).not.toContain(secretPart);
    // The credential is the grant: it resolves to this endpoint.
    expect((await authenticateEndpointCredentialUnscoped(sql, b.token, app.clock.now()))?.id).toBe(b.id);
  });

  it('takes queues and verbs, deduplicated, verbs in canonical order, and stores them as the scope', async () => {
    const op = await operator();
    const b = await vend(op, {
      name: 'deployer',
      queues: ['deploys', 'inbox', 'deploys'],
      verbs: ['release', 'create_webhook', 'claim', 'release'],
    });
    expect(b.queues).toEqual(['deploys', 'inbox']);
    expect(b.verbs).toEqual(['claim', 'release', 'create_webhook']);
    const [row] = await sql<{ scope_queues: string[]; scope_verbs: string[] }[]>`
      select scope_queues, scope_verbs from endpoints where id = ${b.id}`;
    expect(row).toEqual({ scope_queues: ['deploys', 'inbox'], scope_verbs: ['claim', 'release', 'create_webhook'] });
  });

  it('trims the name, caps the slug base, and falls back to "endpoint" for a name with no letters or digits', async () => {
    const op = await operator();
    const padded = await vend(op, { name: '  padded  ' });
    expect(padded.agent_name).toBe('padded');
    expect(padded.slug).toMatch(/^padded-[0-9a-f]{8}$/);
    const symbols = await vend(op, { name: '!!! ***' });
    expect(symbols.slug).toMatch(/^endpoint-[0-9a-f]{8}$/);
    const longest = await vend(op, { name: 'n'.repeat(100) });
    expect(longest.agent_name).toBe('n'.repeat(100));
    expect(longest.slug).toMatch(new RegExp(`^${'n'.repeat(48)}-[0-9a-f]{8}$`));
  });

  it('mints a distinct slug and token for each vend of the same name', async () => {
    const op = await operator();
    const a = await vend(op, { name: 'twin' });
    const b = await vend(op, { name: 'twin' });
    expect(a.slug).not.toBe(b.slug);
    expect(a.token).not.toBe(b.token);
    expect(a.id).not.toBe(b.id);
  });

  const badVends: [string, unknown, string][] = [
    ['a missing name', {}, 'name'],
    ['an empty name', { name: '' }, 'name'],
    ['a whitespace-only name', { name: '   ' }, 'name'],
    ['a name that is not a string', { name: 42 }, 'name'],
    ['a 101-character name', { name: 'n'.repeat(101) }, 'name'],
    ['a name with a control character', { name: 'bell\u0007bot' }, 'name'],
    ['an unknown verb', { name: 'x', verbs: ['claim', 'launch_missiles'] }, 'verbs'],
    ['a self verb (clock_in)', { name: 'x', verbs: ['clock_in'] }, 'verbs'],
    ['an empty verbs array', { name: 'x', verbs: [] }, 'verbs'],
    ['the reserved queue "quarantine"', { name: 'x', queues: ['inbox', 'quarantine'] }, 'queues'],
    ['a bad queue name', { name: 'x', queues: ['Not A Queue'] }, 'queues'],
    ['an empty queues array', { name: 'x', queues: [] }, 'queues'],
    ['queues that is not an array', { name: 'x', queues: 'inbox' }, 'queues'],
    ['33 queues', { name: 'x', queues: Array.from({ length: 33 }, (_, i) => `q${i}`) }, 'queues'],
    ['an unknown top-level field', { name: 'x', colour: 'red' }, 'colour'],
    ['a JSON array instead of an object', [], 'body'],
    ['a malformed JSON body', '{"name":', 'body'],
  ];
  it.each(badVends)('refuses %s with 400 invalid_argument naming the field, and writes nothing', async (_label, body, field) => {
    const op = await operator();
    const before = await counts();
    const res = await op.call('POST', '/api/v1/endpoints', body);
    expectInvalid(res, field);
    expect(res.json.error).toContain(field);
    expect(await counts()).toEqual(before);
  });

  it.each([
    ['text/plain', 'name=x'],
    ['application/x-www-form-urlencoded', 'name=x'],
    ['text/html', '<p>name</p>'],
  ])('refuses a %s body with 415 unsupported_media_type, and writes nothing', async (contentType, body) => {
    const op = await operator();
    const before = await counts();
    const res = await op.call('POST', '/api/v1/endpoints', body, { 'content-type': contentType });
    expectError(res, 415, 'unsupported_media_type');
    expect(await counts()).toEqual(before);
  });
});

describe('GET /api/v1/endpoints', () => {
  it("lists only the caller's own endpoints, active first then newest, without any credential", async () => {
    const alice = await operator();
    const bob = await operator();
    const a1 = await vend(alice, { name: 'a-one' });
    app.clock.advance(1_000);
    const a2 = await vend(alice, { name: 'a-two' });
    app.clock.advance(1_000);
    const a3 = await vend(alice, { name: 'a-three' });
    app.clock.advance(1_000);
    const b1 = await vend(bob, { name: 'b-one' });
    // The newest is revoked: it sinks below the older active ones.
    expect((await revoke(alice, a3.slug)).status).toBe(200);

    const res = await alice.call('GET', '/api/v1/endpoints');
    expect(res.status).toBe(200);
    expect(Array.isArray(res.json)).toBe(true);
    expect(res.json.map((e: Vended) => e.slug)).toEqual([a2.slug, a1.slug, a3.slug]);
    expect(res.json.map((e: Vended) => e.state)).toEqual(['active', 'active', 'revoked']);
    const { token: _t, mcp_json: _m, ...a2Public } = a2;
    expect(res.json[0]).toEqual(a2Public);
    expect(res.json[2].revoked_at).toBe(wire(app.clock.now()));

    for (const e of res.json as Record<string, unknown>[]) {
      expect(Object.keys(e)).not.toContain('token');
      expect(Object.keys(e).filter((k) => /credential|hash|prefix|secret/.test(k))).toEqual([]);
    }
    expect(res.text).not.toContain('sbk_');
    for (const v of [a1, a2, a3]) {
      expect(res.text).not.toContain(v.token.slice(4));
      expect(res.text).not.toContain(sha256(v.token));
    }
    expect(res.text).not.toContain(b1.slug);

    const bobs = await bob.call('GET', '/api/v1/endpoints');
    expect(bobs.json.map((e: Vended) => e.id)).toEqual([b1.id]);
  });

  it('gives a human with no endpoints an empty array', async () => {
    const op = await operator();
    const res = await op.call('GET', '/api/v1/endpoints');
    expect(res.status).toBe(200);
    expect(res.json).toEqual([]);
  });
});

describe('GET /api/v1/endpoints/{ref}', () => {
  it('finds an own endpoint by slug and by id, with the same body and no credential', async () => {
    const op = await operator();
    const ep = await vend(op, { name: 'findable', queues: ['reviews'] });
    const bySlug = await op.call('GET', `/api/v1/endpoints/${ep.slug}`);
    const byId = await op.call('GET', `/api/v1/endpoints/${ep.id}`);
    const byUpperId = await op.call('GET', `/api/v1/endpoints/${ep.id.toUpperCase()}`);
    expect(bySlug.status).toBe(200);
    const { token: _t, mcp_json: _m, ...expected } = ep;
    expect(bySlug.json).toEqual(expected);
    expect(byId.status).toBe(200);
    expect(byId.json).toEqual(bySlug.json);
    expect(byUpperId.json).toEqual(bySlug.json);
    expect(bySlug.text).not.toContain('sbk_');
  });

  it('still reads a revoked endpoint', async () => {
    const op = await operator();
    const ep = await vend(op);
    await revoke(op, ep.slug);
    const res = await op.call('GET', `/api/v1/endpoints/${ep.slug}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ id: ep.id, state: 'revoked', revoked_at: wire(app.clock.now()) });
  });

  it("answers another human's endpoint (by slug or id) exactly like an unknown one: 404 not_found", async () => {
    const me = await operator();
    const other = await operator();
    await vend(me);
    const theirs = await vend(other, { name: 'private' });
    const refs = [theirs.slug, theirs.id, 'no-such-endpoint-00000000', NO_SUCH_UUID];
    const bodies: string[] = [];
    for (const ref of refs) {
      const res = await me.call('GET', `/api/v1/endpoints/${ref}`);
      expectError(res, 404, 'not_found');
      bodies.push(res.text);
    }
    expect(new Set(bodies).size).toBe(1);
    expect(bodies[0]).not.toContain(theirs.slug);
    // ...while its owner still sees it.
    expect((await other.call('GET', `/api/v1/endpoints/${theirs.slug}`)).status).toBe(200);
  });
});

describe('POST /api/v1/endpoints/{ref}/revoke', () => {
  it('revokes, dead-letters pending, claimed and retrying todos, and leaves done ones alone', async () => {
    const op = await operator();
    const ep = await vend(op, { name: 'revokee' });
    const bystander = await vend(op, { name: 'bystander' });
    const pending = await push(op, ep.slug, { title: 'still pending' });
    const claimed = await push(op, ep.slug, { title: 'being worked on' });
    const done = await push(op, ep.slug, { title: 'finished' });
    const retrying = await push(op, ep.slug, { title: 'waiting to retry' });
    const elsewhere = await push(op, bystander.slug, { title: 'on another endpoint' });

    const agent = await agentOf(ep.id);
    const now = app.clock.now();
    await claimTodo(sql, agent, claimed.id, 300, now);
    await claimTodo(sql, agent, done.id, 300, now);
    await completeTodo(sql, agent, done.id, { merged: true }, now);
    await claimTodo(sql, agent, retrying.id, 300, now);
    const failed = await failTodo(sql, agent, retrying.id, { why: 'flaky' }, now);
    expect(failed.next_retry_at).not.toBeNull();
    expect(await authenticateEndpointCredentialUnscoped(sql, ep.token, now)).not.toBeNull();

    const revokedAt = app.clock.advance(5_000);
    const res = await revoke(op, ep.slug);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({
      id: ep.id,
      slug: ep.slug,
      agent_name: 'revokee',
      state: 'revoked',
      revoked_at: wire(revokedAt),
      todos_dead_lettered: 3,
    });
    expect(res.json.token).toBeUndefined();

    const rows = await sql<
      { id: string; state: string; result: unknown; next_retry_at: Date | null; owner: string | null; lease_expires_at: Date | null; completed_at: Date | null }[]
    >`select id, state, result, next_retry_at, owner, lease_expires_at, completed_at from todos where endpoint_id = ${ep.id}`;
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const t of [pending, claimed, retrying]) {
      expect(byId.get(t.id)).toEqual({
        id: t.id,
        state: 'failed',
        result: { error: 'endpoint_revoked', detail: expect.stringContaining(ep.slug) },
        next_retry_at: null,
        owner: null,
        lease_expires_at: null,
        completed_at: revokedAt,
      });
    }
    expect(byId.get(done.id)).toMatchObject({ state: 'done', result: { merged: true }, completed_at: now });
    const [other] = await sql`select state, result from todos where id = ${elsewhere.id}`;
    expect(other).toEqual({ state: 'pending', result: null });

    const [row] = await sql`select state, revoked_at from endpoints where id = ${ep.id}`;
    expect(row).toEqual({ state: 'revoked', revoked_at: revokedAt });
    expect(await authenticateEndpointCredentialUnscoped(sql, ep.token, app.clock.now())).toBeNull();
    // The bystander's credential is untouched.
    expect((await authenticateEndpointCredentialUnscoped(sql, bystander.token, app.clock.now()))?.id).toBe(bystander.id);
  });

  it('revokes by id, with zero todos to dead-letter', async () => {
    const op = await operator();
    const ep = await vend(op);
    const res = await revoke(op, ep.id);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ id: ep.id, state: 'revoked', todos_dead_lettered: 0 });
  });

  it('answers a second revoke with 409 conflict carrying state and slug, and changes nothing', async () => {
    const op = await operator();
    const ep = await vend(op);
    expect((await revoke(op, ep.slug)).status).toBe(200);
    const [first] = await sql<{ revoked_at: Date }[]>`select revoked_at from endpoints where id = ${ep.id}`;
    app.clock.advance(10_000);
    const again = await revoke(op, ep.slug);
    expectError(again, 409, 'conflict', { state: 'revoked', slug: ep.slug });
    const byId = await revoke(op, ep.id);
    expectError(byId, 409, 'conflict', { state: 'revoked', slug: ep.slug });
    const [second] = await sql<{ revoked_at: Date }[]>`select revoked_at from endpoints where id = ${ep.id}`;
    expect(second!.revoked_at).toEqual(first!.revoked_at);
  });

  it("answers another human's endpoint with the unknown-endpoint 404 and leaves it active", async () => {
    const me = await operator();
    const other = await operator();
    const theirs = await vend(other);
    const bySlug = await revoke(me, theirs.slug);
    const byId = await revoke(me, theirs.id);
    const unknown = await revoke(me, 'no-such-endpoint-00000000');
    expectError(bySlug, 404, 'not_found');
    expect(byId.text).toBe(bySlug.text);
    expect(unknown.text).toBe(bySlug.text);
    const [row] = await sql`select state, revoked_at from endpoints where id = ${theirs.id}`;
    expect(row).toEqual({ state: 'active', revoked_at: null });
    expect((await authenticateEndpointCredentialUnscoped(sql, theirs.token, app.clock.now()))?.id).toBe(theirs.id);
  });
});

describe('POST /api/v1/endpoints/{ref}/todos', () => {
  let op: Operator;
  let one: Vended; // queues: inbox
  let two: Vended; // queues: reviews, inbox

  beforeAll(async () => {
    op = await operator({ displayName: 'Ada Lovelace' });
    one = await vend(op, { name: 'single' });
    two = await vend(op, { name: 'double', queues: ['reviews', 'inbox'] });
  });

  it('answers 201 with the new todo and records an operator event naming the human', async () => {
    const before = await counts();
    const res = await op.call('POST', pushPath(one.slug), { title: '  Review PR #42  ', payload: { pr: 42, labels: ['a', 'b'] } });
    expect(res.status, res.text).toBe(201);
    expect(res.json).toEqual({
      id: expect.stringMatching(TD_ID),
      endpoint_id: one.id,
      slug: one.slug,
      queue: 'inbox',
      state: 'pending',
      created: true,
      event_id: expect.any(Number),
    });
    const after = await counts();
    expect(after.todos).toBe(before.todos + 1);
    expect(after.events).toBe(before.events + 1);

    const [ev] = await sql`
      select source, family, trust_mode, verified, verify_detail, external_id, received_at
      from events where id = ${res.json.event_id}`;
    expect(ev).toEqual({
      source: 'operator',
      family: 'operator',
      trust_mode: 'operator',
      verified: true,
      verify_detail: `operator-authored over /api/v1 by Ada Lovelace (${op.id})`,
      external_id: null,
      received_at: app.clock.now(),
    });
    const [todo] = await sql`
      select endpoint_id, queue, title, kind, source, payload, state, attempt, event_id::int as event_id, idempotency_key
      from todos where id = ${res.json.id}`;
    expect(todo).toEqual({
      endpoint_id: one.id,
      queue: 'inbox',
      title: 'Review PR #42',
      kind: 'operator',
      source: 'operator',
      payload: { pr: 42, labels: ['a', 'b'] },
      state: 'pending',
      attempt: 0,
      event_id: res.json.event_id,
      idempotency_key: null,
    });
  });

  it('pushes by endpoint id as well as by slug', async () => {
    const res = await op.call('POST', pushPath(one.id), { title: 'by id' });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({ endpoint_id: one.id, slug: one.slug });
  });

  it('names the human by handle when it has no display name or email', async () => {
    const plain = await operator();
    const ep = await vend(plain);
    const t = await push(plain, ep.slug, { title: 'hello' });
    const [ev] = await sql`select verify_detail from events where id = ${t.event_id}`;
    expect(ev!['verify_detail']).toBe(`operator-authored over /api/v1 by ${plain.handle} (${plain.id})`);
  });

  it('defaults payload to {} and kind to "operator", and keeps a given kind and payload', async () => {
    const bare = await push(op, one.slug, { title: 'bare' });
    const rich = await push(op, one.slug, { title: 'rich', kind: 'review.request', payload: [1, 'two', null] });
    const rows = await sql<{ id: string; kind: string; payload: unknown; payload_size: number }[]>`
      select id, kind, payload, payload_size from todos where id in ${sql([bare.id, rich.id])}`;
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(bare.id)).toMatchObject({ kind: 'operator', payload: {}, payload_size: 2 });
    expect(byId.get(rich.id)).toMatchObject({ kind: 'review.request', payload: [1, 'two', null] });
  });

  it('accepts a title of exactly 200 bytes and a key of exactly 256 bytes', async () => {
    const title = 'é'.repeat(100);
    expect(bytes(title)).toBe(200);
    const key = 'k'.repeat(256);
    const t = await push(op, one.slug, { title, key });
    const [row] = await sql`select title, idempotency_key from todos where id = ${t.id}`;
    expect(row).toEqual({ title, idempotency_key: key });
  });

  it('requires queue on a two-queue endpoint, and takes one inside its scope', async () => {
    const before = await counts();
    expectInvalid(await op.call('POST', pushPath(two.slug), { title: 'where to?' }), 'queue');
    expect(await counts()).toEqual(before);
    const t = await push(op, two.slug, { title: 'for review', queue: 'reviews' });
    expect(t.queue).toBe('reviews');
    const [row] = await sql`select queue from todos where id = ${t.id}`;
    expect(row!['queue']).toBe('reviews');
  });

  it.each([
    ['a queue outside the scope', 'deploys'],
    ['the reserved queue', 'quarantine'],
    ['a malformed queue name', 'Not A Queue'],
  ])('refuses %s with 400 field queue, and writes nothing', async (_label, queue) => {
    const before = await counts();
    expectInvalid(await op.call('POST', pushPath(two.slug), { title: 'misrouted', queue }), 'queue');
    expectInvalid(await op.call('POST', pushPath(one.slug), { title: 'misrouted', queue }), 'queue');
    expect(await counts()).toEqual(before);
  });

  it('collapses a repeated key onto the live todo: 200, created false, same id, no new rows', async () => {
    const first = await op.call('POST', pushPath(one.slug), { title: 'deploy 1.2.3', key: 'deploy-1.2.3' });
    expect(first.status).toBe(201);
    expect(first.json.created).toBe(true);
    const [ev] = await sql`select external_id from events where id = ${first.json.event_id}`;
    expect(ev!['external_id']).toBe('deploy-1.2.3');

    const before = await counts();
    app.clock.advance(1_000);
    const again = await op.call('POST', pushPath(one.slug), { title: 'deploy 1.2.3, again', key: 'deploy-1.2.3' });
    expect(again.status, again.text).toBe(200);
    expect(again.json).toEqual({ ...first.json, created: false });
    expect(await counts()).toEqual(before);
    const [row] = await sql`select title from todos where id = ${first.json.id}`;
    expect(row!['title']).toBe('deploy 1.2.3');

    // Keys are per endpoint: the same key elsewhere is a new todo.
    const elsewhere = await op.call('POST', pushPath(two.slug), { title: 'deploy 1.2.3', key: 'deploy-1.2.3', queue: 'inbox' });
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.json.id).not.toBe(first.json.id);

    // Once the todo is done the key is free again.
    const agent = await agentOf(one.id);
    await claimTodo(sql, agent, first.json.id, 60, app.clock.now());
    await completeTodo(sql, agent, first.json.id, null, app.clock.now());
    const fresh = await op.call('POST', pushPath(one.slug), { title: 'deploy 1.2.3', key: 'deploy-1.2.3' });
    expect(fresh.status).toBe(201);
    expect(fresh.json.created).toBe(true);
    expect(fresh.json.id).not.toBe(first.json.id);
  });

  it('makes every keyless push a new todo', async () => {
    const a = await push(op, one.slug, { title: 'same title' });
    const b = await push(op, one.slug, { title: 'same title' });
    expect(a.id).not.toBe(b.id);
    expect(a.event_id).not.toBe(b.event_id);
  });

  const badPushes: [string, unknown, string][] = [
    ['a missing title', { payload: {} }, 'title'],
    ['a title that is not a string', { title: 7 }, 'title'],
    ['an empty title', { title: '' }, 'title'],
    ['a whitespace-only title', { title: ' \t  ' }, 'title'],
    ['a title of 101 characters but 202 bytes', { title: 'é'.repeat(101) }, 'title'],
    ['a title with a newline inside', { title: 'line one\nline two' }, 'title'],
    ['a title with a control character', { title: 'ding\u0007dong' }, 'title'],
    ['a key of 129 characters but 258 bytes', { title: 'ok', key: 'é'.repeat(129) }, 'key'],
    ['an empty key', { title: 'ok', key: '' }, 'key'],
    ['a key that is not a string', { title: 'ok', key: 5 }, 'key'],
    ['a kind with a space', { title: 'ok', kind: 'has space' }, 'kind'],
    ['a queue that is not a string', { title: 'ok', queue: ['inbox'] }, 'queue'],
    ['an unknown field', { title: 'ok', priority: 'high' }, 'priority'],
    ['a JSON array instead of an object', [{ title: 'ok' }], 'body'],
    ['a malformed JSON body', '{"title":', 'body'],
  ];
  it.each(badPushes)('refuses %s with 400 naming the field, and writes nothing', async (_label, body, field) => {
    const before = await counts();
    const res = await op.call('POST', pushPath(one.slug), body);
    expectInvalid(res, field);
    expect(await counts()).toEqual(before);
  });

  it('refuses a push to a revoked endpoint with 409 carrying state and slug, and writes nothing', async () => {
    const ep = await vend(op, { name: 'soon gone' });
    await revoke(op, ep.slug);
    const before = await counts();
    const res = await op.call('POST', pushPath(ep.slug), { title: 'too late' });
    expectError(res, 409, 'conflict', { state: 'revoked', slug: ep.slug });
    const byId = await op.call('POST', pushPath(ep.id), { title: 'too late' });
    expectError(byId, 409, 'conflict', { state: 'revoked', slug: ep.slug });
    expect(await counts()).toEqual(before);
  });

  it("answers another human's endpoint (by slug or id) and an unknown one with the same 404, and writes nothing", async () => {
    const other = await operator();
    const theirs = await vend(other);
    const before = await counts();
    const bodies: string[] = [];
    for (const ref of [theirs.slug, theirs.id, 'no-such-endpoint-00000000', NO_SUCH_UUID]) {
      const res = await op.call('POST', pushPath(ref), { title: 'not yours' });
      expectError(res, 404, 'not_found');
      bodies.push(res.text);
    }
    expect(new Set(bodies).size).toBe(1);
    expect(await counts()).toEqual(before);
  });

  it('refuses a body over 64 KiB with 413 payload_too_large, and writes nothing; just under passes', async () => {
    const before = await counts();
    const big = { title: 'huge', payload: { blob: 'x'.repeat(64 * 1024) } };
    expect(bytes(JSON.stringify(big))).toBeGreaterThan(64 * 1024);
    const res = await op.call('POST', pushPath(one.slug), big);
    expectError(res, 413, 'payload_too_large');
    expect(await counts()).toEqual(before);

    const fits = { title: 'large', payload: { blob: 'x'.repeat(60 * 1024) } };
    expect(bytes(JSON.stringify(fits))).toBeLessThan(64 * 1024);
    expect((await op.call('POST', pushPath(one.slug), fits)).status).toBe(201);
  });
});

describe('GET /api/v1/endpoints/{ref}/todos', () => {
  let op: Operator;
  let ep: Vended;
  const t: Record<'r1' | 'i1' | 'r2' | 'i2', { id: string }> = {} as never;
  const path = (query = '') => `/api/v1/endpoints/${ep.slug}/todos${query}`;

  beforeAll(async () => {
    op = await operator();
    ep = await vend(op, { name: 'lister', queues: ['reviews', 'inbox'] });
    const sibling = await vend(op, { name: 'sibling', queues: ['reviews', 'inbox'] });
    await push(op, sibling.slug, { title: 'not on this endpoint', queue: 'reviews' });
    t.r1 = await push(op, ep.slug, { title: 'review one', queue: 'reviews' });
    app.clock.advance(1_000);
    t.i1 = await push(op, ep.slug, { title: 'inbox one', queue: 'inbox' });
    app.clock.advance(1_000);
    t.r2 = await push(op, ep.slug, { title: 'review two', queue: 'reviews', payload: { diff: 'x'.repeat(500) } });
    app.clock.advance(1_000);
    t.i2 = await push(op, ep.slug, { title: 'inbox two', queue: 'inbox' });
    await claimTodo(sql, await agentOf(ep.id), t.r2.id, 300, app.clock.now());
  });

  it('lists newest first in the compact form: no payload, a payload_size', async () => {
    const res = await op.call('GET', path());
    expect(res.status).toBe(200);
    expect(Object.keys(res.json)).toEqual(['todos']);
    const rows = res.json.todos as Record<string, unknown>[];
    expect(rows.map((r) => r.id)).toEqual([t.i2.id, t.r2.id, t.i1.id, t.r1.id]);
    for (const r of rows) {
      expect(r).not.toHaveProperty('payload');
      expect(r).not.toHaveProperty('result');
      expect(r.payload_size).toEqual(expect.any(Number));
    }
    const [stored] = await sql<{ created_at: Date; payload_size: number; owner: string; lease_expires_at: Date }[]>`
      select created_at, payload_size, owner, lease_expires_at from todos where id = ${t.r2.id}`;
    expect(stored!.payload_size).toBeGreaterThan(500);
    expect(rows[1]).toEqual({
      id: t.r2.id,
      queue: 'reviews',
      source: 'operator',
      kind: 'operator',
      title: 'review two',
      state: 'claimed',
      owner: stored!.owner,
      attempt: 1,
      max_attempts: 5,
      lease_expires_at: wire(stored!.lease_expires_at),
      created_at: wire(stored!.created_at),
      payload_size: stored!.payload_size,
    });
    expect(rows[3]).toMatchObject({ id: t.r1.id, state: 'pending', payload_size: 2, attempt: 0 });
    expect(rows[3]).not.toHaveProperty('owner');
    expect(rows[3]).not.toHaveProperty('lease_expires_at');
  });

  it('filters by state, queue and limit, alone and together', async () => {
    const ids = async (query: string) => {
      const res = await op.call('GET', path(query));
      expect(res.status, `${query}: ${res.text}`).toBe(200);
      return (res.json.todos as { id: string }[]).map((r) => r.id);
    };
    expect(await ids('?state=claimed')).toEqual([t.r2.id]);
    expect(await ids('?state=pending')).toEqual([t.i2.id, t.i1.id, t.r1.id]);
    expect(await ids('?state=done')).toEqual([]);
    expect(await ids('?queue=inbox')).toEqual([t.i2.id, t.i1.id]);
    expect(await ids('?queue=reviews&state=pending')).toEqual([t.r1.id]);
    expect(await ids('?queue=elsewhere')).toEqual([]);
    expect(await ids('?limit=2')).toEqual([t.i2.id, t.r2.id]);
    expect(await ids('?limit=1&queue=reviews')).toEqual([t.r2.id]);
    expect(await ids('?limit=200')).toHaveLength(4);
  });

  it('lists by endpoint id too', async () => {
    const res = await op.call('GET', `/api/v1/endpoints/${ep.id}/todos?limit=1`);
    expect(res.status).toBe(200);
    expect(res.json.todos.map((r: { id: string }) => r.id)).toEqual([t.i2.id]);
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=201', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=', 'limit'],
    ['limit=1&limit=2', 'limit'],
    ['state=bogus', 'state'],
    ['state=PENDING', 'state'],
    ['queue=quarantine', 'queue'],
    ['queue=Not%20A%20Queue', 'queue'],
    ['cursor=abc', 'cursor'],
  ])('refuses ?%s with 400 naming %s', async (query, field) => {
    expectInvalid(await op.call('GET', path(`?${query}`)), field);
  });

  it("answers another human's endpoint and an unknown one with the same 404", async () => {
    const other = await operator();
    const theirs = await vend(other);
    await push(other, theirs.slug, { title: 'private work' });
    const bySlug = await op.call('GET', `/api/v1/endpoints/${theirs.slug}/todos`);
    const byId = await op.call('GET', `/api/v1/endpoints/${theirs.id}/todos`);
    const unknown = await op.call('GET', '/api/v1/endpoints/no-such-endpoint-00000000/todos');
    expectError(bySlug, 404, 'not_found');
    expect(byId.text).toBe(bySlug.text);
    expect(unknown.text).toBe(bySlug.text);
    expect(bySlug.text).not.toContain('private work');
  });

  it("still lists a revoked endpoint's history, dead letters included", async () => {
    const owner = await operator();
    const gone = await vend(owner);
    const pushed = await push(owner, gone.slug, { title: 'left behind' });
    await revoke(owner, gone.slug);
    const res = await owner.call('GET', `/api/v1/endpoints/${gone.slug}/todos`);
    expect(res.status).toBe(200);
    expect(res.json.todos).toEqual([expect.objectContaining({ id: pushed.id, state: 'failed' })]);
  });
});

describe('rate limits on /api/v1 (per personal token)', () => {
  it('passes 20 writes on a frozen clock, refuses the 21st with 429 and Retry-After, and refills as time moves', async () => {
    const op = await operator();
    // Vended through the store so the setup spends none of the token's writes.
    const { endpoint } = await vendEndpoint(sql, op.id, { name: 'limited' }, app.clock.now());
    const before = await counts();
    for (let i = 1; i <= 20; i++) {
      const res = await op.call('POST', pushPath(endpoint.slug), { title: `write ${i}` });
      expect(res.status, `write ${i}: ${res.text}`).toBe(201);
    }
    const limited = await op.call('POST', pushPath(endpoint.slug), { title: 'write 21' });
    expectError(limited, 429, 'rate_limited', { retry_after: expect.any(Number) });
    const retryAfter = limited.headers.get('retry-after');
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(limited.json.retry_after).toBe(Number(retryAfter));
    // Any write counts against the same bucket, and a refused write writes nothing.
    expectError(await op.call('POST', '/api/v1/endpoints', { name: 'also refused' }), 429, 'rate_limited', {
      retry_after: expect.any(Number),
    });
    expect((await counts()).todos).toBe(before.todos + 20);
    expect((await counts()).endpoints).toBe(before.endpoints);

    // Reads have their own bucket.
    expect((await op.call('GET', '/api/v1/me')).status).toBe(200);
    // Another token of the same human, and another human, have their own buckets.
    const { token: second } = await createToken(sql, { handle: op.handle, name: 'second' });
    expect((await apiCaller(app.baseUrl, second)('POST', pushPath(endpoint.slug), { title: 'second token' })).status).toBe(201);
    const stranger = await operator();
    expect((await stranger.call('POST', '/api/v1/endpoints', { name: 'unaffected' })).status).toBe(201);
    expect((await op.call('POST', pushPath(endpoint.slug), { title: 'still limited' })).status).toBe(429);

    // One second at 5 writes/s refills five writes, no more.
    app.clock.advance(1_000);
    for (let i = 1; i <= 5; i++) {
      expect((await op.call('POST', pushPath(endpoint.slug), { title: `refilled ${i}` })).status, `refilled ${i}`).toBe(201);
    }
    expect((await op.call('POST', pushPath(endpoint.slug), { title: 'refilled 6' })).status).toBe(429);
    // A long pause refills to the burst, not beyond it.
    app.clock.advance(3_600_000);
    for (let i = 1; i <= 20; i++) {
      expect((await op.call('POST', pushPath(endpoint.slug), { title: `after a pause ${i}` })).status).toBe(201);
    }
    expect((await op.call('POST', pushPath(endpoint.slug), { title: 'after a pause 21' })).status).toBe(429);
  });

  it('passes 40 reads on a frozen clock, refuses the 41st with 429, and leaves writes alone', async () => {
    const op = await operator();
    for (let i = 1; i <= 40; i++) {
      const res = await op.call('GET', '/api/v1/me');
      expect(res.status, `read ${i}`).toBe(200);
    }
    const limited = await op.call('GET', '/api/v1/endpoints');
    expectError(limited, 429, 'rate_limited', { retry_after: expect.any(Number) });
    expect(limited.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(limited.json.retry_after).toBe(Number(limited.headers.get('retry-after')));
    expect((await op.call('POST', '/api/v1/endpoints', { name: 'writes are separate' })).status).toBe(201);
    app.clock.advance(1_000);
    expect((await op.call('GET', '/api/v1/me')).status).toBe(200);
  });
});

describe('security headers on every response', () => {
  const expectSecurityHeaders = (res: Res, label: string) => {
    expect(res.headers.get('x-content-type-options'), label).toBe('nosniff');
    expect(res.headers.get('x-frame-options'), label).toBe('DENY');
    expect(res.headers.get('content-security-policy'), label).toContain("default-src 'none'");
    expect(res.headers.get('content-security-policy'), label).toContain("frame-ancestors 'none'");
    expect(res.headers.get('referrer-policy'), label).toBe('strict-origin-when-cross-origin');
    expect(res.headers.get('cache-control'), label).toBe('no-store');
  };

  it('sets them on a 200, 201, 400, 401, 404, 413 and /healthz', async () => {
    const op = await operator();
    const cases: [string, Res][] = [
      ['200 /api/v1/me', await op.call('GET', '/api/v1/me')],
      ['201 vend', await op.call('POST', '/api/v1/endpoints', { name: 'headers' })],
      ['400 vend', await op.call('POST', '/api/v1/endpoints', {})],
      ['401', await anon('GET', '/api/v1/me')],
      ['404 unknown route', await anon('GET', '/no-such-route')],
      ['404 unknown endpoint', await op.call('GET', '/api/v1/endpoints/no-such-endpoint-00000000')],
      ['413', await op.call('POST', '/api/v1/endpoints', { name: 'x'.repeat(70 * 1024) })],
      ['200 /healthz', await anon('GET', '/healthz')],
    ];
    expect(cases.map(([, r]) => r.status)).toEqual([200, 201, 400, 401, 404, 404, 413, 200]);
    for (const [label, res] of cases) expectSecurityHeaders(res, label);
  });
});

describe('GET /healthz', () => {
  it('answers "ok <version>\\n" as text/plain by default, without auth', async () => {
    const res = await anon('GET', '/healthz');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toBe(`ok ${PACKAGE_VERSION}\n`);
    expect(PACKAGE_VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('answers JSON when Accept prefers it, and text when text ranks higher', async () => {
    const json = await anon('GET', '/healthz', undefined, { accept: 'application/json' });
    expect(json.status).toBe(200);
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(json.json).toEqual({ status: 'ok', version: PACKAGE_VERSION });
    const text = await anon('GET', '/healthz', undefined, { accept: 'text/plain, application/json;q=0.5' });
    expect(text.text).toBe(`ok ${PACKAGE_VERSION}\n`);
    const browser = await anon('GET', '/healthz', undefined, { accept: '*/*' });
    expect(browser.text).toBe(`ok ${PACKAGE_VERSION}\n`);
  });

  it('ignores a bad token: health is public', async () => {
    const res = await anon('GET', '/healthz', undefined, { authorization: 'Bearer sbp_nonsense' });
    expect(res.status).toBe(200);
    expect(res.text).toBe(`ok ${PACKAGE_VERSION}\n`);
  });
});

describe('unknown routes under /api/v1', () => {
  const unknown: [string, string][] = [
    ['GET', '/api/v1/nope'],
    ['GET', '/api/v1'],
    ['POST', '/api/v1/endpoints/some-slug/explode'],
    ['DELETE', '/api/v1/endpoints'],
  ];

  it.each(unknown)('%s %s: 401 without a token (the guard comes first)', async (method, path) => {
    const res = await anon(method, path);
    expectError(res, 401, 'unauthenticated');
    expect(res.headers.get('www-authenticate')).toBe(REALM);
  });

  it.each(unknown)('%s %s: 404 not_found with a token', async (method, path) => {
    const op = await operator();
    const res = await op.call(method, path);
    expectError(res, 404, 'not_found');
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  it('answers an unknown route outside /api/v1 with 404 and no auth', async () => {
    expectError(await anon('GET', '/no-such-route'), 404, 'not_found');
  });
});

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { authenticateEndpointCredentialUnscoped } from '../store/endpoints.ts';
import { claimTodo, completeTodo, failTodo } from '../store/todos/index.ts';
import {
  agentOf,
  app,
  counts,
  expectError,
  expectInvalid,
  NO_SUCH_UUID,
  operator,
  push,
  revoke,
  sql,
  useOperatorApiSuite,
  vend,
  type Vended,
  wire,
} from '../../test/support/operator-api.ts';

// /api/v1 over real HTTP: vending, listing, reading and revoking endpoints.

useOperatorApiSuite();

const DRAIN_VERBS = ['list_todos', 'get_todo', 'claim', 'claim_next', 'heartbeat', 'complete', 'fail', 'release'];
const SBK = /^sbk_[A-Za-z0-9_-]{43}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

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
      mcpServers: { switchboard: { type: 'http', url: b.mcp_url, headers: { Authorization: 'Bearer ${SWITCHBOARD_AGENT_TOKEN}' } } },
    });
    expect(b.mcp_json_bridge).toEqual({
      mcpServers: {
        switchboard: { command: 'switchboard', args: ['bridge', '--url', b.mcp_url], env: { SWITCHBOARD_AGENT_TOKEN: '${SWITCHBOARD_AGENT_TOKEN}' } },
      },
    });
    expect(b.connect).toContain('  claude --dangerously-load-development-channels server:switchboard --allowedTools mcp__switchboard\n');
    expect(b.connect).toContain(`Guide: ${app.baseUrl}/docs/connect\n`);
    // The token is in `token` and nowhere else in the answer.
    expect(res.text.split(b.token)).toHaveLength(2);
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
      idle_sessions_ended: 0,
      token: b.token,
      mcp_json: b.mcp_json,
      mcp_json_bridge: b.mcp_json_bridge,
      connect: b.connect,
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
    const { token: _t, mcp_json: _m, mcp_json_bridge: _b, connect: _c, ...a2Public } = a2;
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
    const { token: _t, mcp_json: _m, mcp_json_bridge: _b, connect: _c, ...expected } = ep;
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
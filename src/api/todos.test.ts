import { beforeAll, describe, expect, it } from 'vitest';
import { claimTodo, completeTodo } from '../store/todos/index.ts';
import {
  agentOf,
  app,
  counts,
  expectError,
  expectInvalid,
  NO_SUCH_UUID,
  operator,
  type Operator,
  push,
  pushPath,
  revoke,
  sql,
  useOperatorApiSuite,
  vend,
  type Vended,
  wire,
} from '../../test/support/operator-api.ts';

// /api/v1 over real HTTP: pushing and listing an endpoint's todos.

useOperatorApiSuite();

const TD_ID = /^td_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

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
    ['a title with a line separator (U+2028)', { title: 'one\u2028two' }, 'title'],
    ['a title with a next-line control (U+0085)', { title: 'one\u0085two' }, 'title'],
    ['a title with a right-to-left override (U+202E)', { title: 'invoice \u202egnp.exe' }, 'title'],
    ['a title with a bidi isolate (U+2067)', { title: 'a\u2067b\u2069c' }, 'title'],
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
    expect(Object.keys(res.json)).toEqual(['todos', 'next_cursor']);
    expect(res.json.next_cursor).toBeNull();
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
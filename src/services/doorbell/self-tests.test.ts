import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../../test/support/app.ts';
import type { App } from '../../app.ts';
import { ManualClock } from '../../lib/clock.ts';
import { createLogger } from '../../lib/log.ts';
import { rfc3339 } from '../../domain/time.ts';
import { VERSION } from '../../lib/version.ts';
import { sweepOnce } from '../maintenance/doorbell-sweep.ts';
import { CHANNEL_NOTE, TROUBLESHOOTING, hintsFor, verdictOf } from './self-tests.ts';
import { connectAgent, until, type Agent, type Vended } from '../../../test/support/agents.ts';

/**
 * The end-to-end self-test (SPEC-0025 REQ-6 to REQ-10): test_doorbell, get_doorbell_test, the
 * synthetic todo and the operator routes, with SDK clients over real HTTP, real PostgreSQL, a real
 * (short) ring delay and a manual clock for every wait.
 */

type TestApp = App & { clock: ManualClock };

const RING_DELAY_MS = 300;
const METRICS_TOKEN = 't'.repeat(48);

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let api: ReturnType<typeof apiCaller>;
let human: { token: string };
const clients: Client[] = [];
const agent = (e: Vended, on: App = app, name = 'claude-code'): Promise<Agent> => connectAgent(on, e, { name, track: clients });

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock('2026-09-22T08:00:00Z'), {
    selfTestRingDelayMs: RING_DELAY_MS,
    env: { SWITCHBOARD_METRICS_TOKEN: METRICS_TOKEN },
  });
  human = await humanWithToken(db.sql);
  api = apiCaller(app.url, human.token);
});
// Refills the clock-driven rate limiters; every test works on endpoints of its own.
beforeEach(() => void app.clock.advance(60_000));
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app.stop();
  await db.drop();
});


async function vend(queues = ['reviews'], via = api): Promise<Vended> {
  const r = await via('POST', '/api/v1/endpoints', { name: 'agent', queues });
  expect(r.status).toBe(201);
  return r.json;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Call = (name: string, args?: Record<string, unknown>) => Promise<any>;


/** An SDK client whose doorbells land in `heard`; resolves once its stream is open on `on`. */

/** A session initialized over raw HTTP that never opens its notification stream; tools are called over POST. */
async function streamless(e: Vended, name = 'claude-code'): Promise<{ sessionId: string; call: Call }> {
  let seq = 0;
  const post = async (body: unknown, sid?: string) => {
    const res = await fetch(`${app.url}/mcp/${e.slug}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${e.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(sid ? { 'mcp-session-id': sid } : {}),
      },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return { sid: res.headers.get('mcp-session-id'), json: (await res.json()) as any };
  };
  const init = await post({
    jsonrpc: '2.0',
    id: ++seq,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name, version: '2.0.0' } },
  });
  const sessionId = init.sid!;
  return {
    sessionId,
    call: async (tool, args = {}) => {
      const { json } = await post({ jsonrpc: '2.0', id: ++seq, method: 'tools/call', params: { name: tool, arguments: args } }, sessionId);
      const r = json.result as { content: { text: string }[]; isError?: boolean };
      return r.isError ? { error: r.content[0]!.text } : JSON.parse(r.content[0]!.text);
    },
  };
}

/** Polls a report until its verdict is no longer pending. */
async function settledReport(read: () => Promise<any>, ms = 5000): Promise<any> {
  let report: any;
  await until(async () => (report = await read()).verdict !== 'pending', 'the verdict', ms);
  return report;
}

const testRow = async (testId: string) => (await db.sql`select * from doorbell_tests where test_id = ${testId}`)[0];
const todoRow = async (todoId: string) => (await db.sql`select *, event_id::text as event_id from todos where id = ${todoId}`)[0];
const countOf = async (table: 'todos' | 'doorbell_tests', endpointId?: string) =>
  Number(
    (endpointId === undefined
      ? await db.sql`select count(*)::int as n from ${db.sql(table)}`
      : await db.sql`select count(*)::int as n from ${db.sql(table)} where endpoint_id = ${endpointId}`)[0]!.n,
  );

const CLAUDE_CODE_HINTS = [
  expect.stringMatching(/--dangerously-load-development-channels server:switchboard.*--channels plugin:switchboard@<marketplace>/),
  expect.stringContaining('--allowedTools mcp__switchboard'),
  expect.stringMatching(/claude -p.*cannot be woken.*notify hook/),
];

describe('test_doorbell (REQ-7)', () => {
  it('returns the facts of the moment before the test doorbell is written, which arrives after the ring delay', async () => {
    const e = await vend(['reviews', 'alpha']);
    const a = await agent(e);
    const startedAt = app.clock.now();
    const t0 = Date.now();
    const started = await a.call('test_doorbell');
    // Nothing rang yet: no doorbell, no delivery, no ring record.
    expect(a.heard).toEqual([]);
    expect(await testRow(started.test_id)).toMatchObject({ delivery: null, delivered_at: null, ring_id: null });
    expect(await db.sql`select 1 from doorbell_rings where todo_id = ${started.todo_id}`).toHaveLength(0);
    expect(started).toEqual({
      test_id: expect.stringMatching(/^dt_[0-9A-HJKMNP-TV-Z]{26}$/),
      todo_id: expect.stringMatching(/^td_[0-9a-f-]{36}$/),
      report_after: rfc3339(new Date(startedAt.getTime() + RING_DELAY_MS + 60_000)),
      server_version: VERSION,
      stream_attached: true,
      channel_capability: {
        server_advertised: true,
        sessions: [{ client_name: 'claude-code', client_version: '2.1.0', stream_open: true }],
        note: CHANNEL_NOTE,
      },
    });
    expect(started.channel_capability.note).toMatch(/cannot be observed.*only a claim/);

    await until(() => a.heard.length === 1, 'the test doorbell');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(RING_DELAY_MS - 20);
    const n = a.heard[0]!;
    expect(n.params.meta).toEqual({ todo_id: started.todo_id, queue: 'alpha', kind: 'self_test', ring_id: expect.stringMatching(/^rg_[0-9A-Z]{26}$/) });
    expect(n.params.content).toMatch(/Switchboard self-test/);
    expect(n.params.content).toContain(`call claim with id "${started.todo_id}"`);
    expect(n.params.content).toMatch(/no other action is needed/);
    let ring: any;
    await until(async () => (ring = (await db.sql`select * from doorbell_rings where todo_id = ${started.todo_id}`)[0]) !== undefined, 'the test ring');
    expect(ring).toMatchObject({ ring_id: n.params.meta.ring_id, kind: 'test', synthetic: true, window_seconds: 60, session_id: a.sessionId, queue: 'alpha' });
    await until(async () => (await testRow(started.test_id))!.delivery !== null, 'the delivery record');
    expect(await testRow(started.test_id)).toMatchObject({ delivery: 'written', delivered_session_id: a.sessionId, ring_id: n.params.meta.ring_id, client_name: 'claude-code' });
    // The synthetic todo rang exactly once: the test doorbell, never a todo doorbell.
    await sleep(100);
    expect(a.heard).toHaveLength(1);
  });

  it('refuses an out-of-range or malformed wait_seconds and creates nothing', async () => {
    const e = await vend();
    const a = await agent(e);
    for (const wait of [900, 5, 9, 301, 10.5, -60, '60', null]) {
      const r = await a.call('test_doorbell', { wait_seconds: wait });
      expect(r.error, String(wait)).toMatch(/^invalid_argument: wait_seconds/);
    }
    expect(await countOf('todos', e.id)).toBe(0);
    expect(await countOf('doorbell_tests', e.id)).toBe(0);
    await sleep(RING_DELAY_MS + 50);
    expect(a.heard).toEqual([]);
  });

  it('refuses an endpoint, queue or todo argument and creates no todo anywhere', async () => {
    const e = await vend();
    const victim = await vend();
    const a = await agent(e);
    const todos = await countOf('todos');
    const tests = await countOf('doorbell_tests');
    for (const args of [{ endpoint: victim.slug }, { endpoint_id: victim.id }, { queue: 'reviews' }, { todo_id: 'td_00000000-0000-4000-8000-000000000000' }, { wait_seconds: 60, endpoint: victim.slug }]) {
      expect((await a.call('test_doorbell', args)).error, JSON.stringify(args)).toMatch(/^invalid_argument: /);
    }
    expect(await countOf('todos')).toBe(todos);
    expect(await countOf('doorbell_tests')).toBe(tests);
  });

  it('allows one outstanding test per endpoint: a second is rate_limited until the first ends, and the first is unaffected', async () => {
    const e = await vend();
    const a = await agent(e);
    const first = await a.call('test_doorbell', { wait_seconds: 30 });
    const second = await a.call('test_doorbell', { wait_seconds: 30 });
    expect(second.error).toMatch(/^rate_limited: a self-test is already running on this endpoint; the next test is allowed at /);
    expect(second.error).toContain(first.report_after);
    expect(second.details).toMatchObject({ code: 'rate_limited', next_allowed_at: first.report_after, retry_after: expect.any(Number) });
    expect(await countOf('doorbell_tests', e.id)).toBe(1);
    expect(await countOf('todos', e.id)).toBe(1);
    await until(() => a.heard.length === 1, 'the first test doorbell');
    expect(a.heard[0]!.params.meta.todo_id).toBe(first.todo_id);
    expect((await a.call('get_doorbell_test', { test_id: first.test_id })).verdict).toBe('pending');
    // Still outstanding after delivery, until claimed.
    expect((await a.call('test_doorbell')).error).toMatch(/^rate_limited: /);
    expect(await a.call('claim', { id: first.todo_id })).toMatchObject({ self_test: true });
    expect((await a.call('get_doorbell_test', { test_id: first.test_id })).verdict).toBe('pass');
    // Once it is over, the next test may start.
    expect(await a.call('test_doorbell', { wait_seconds: 30 })).toMatchObject({ test_id: expect.stringMatching(/^dt_/) });
  });

  it('allows at most 6 tests per rolling hour and names when the next is allowed', async () => {
    const e = await vend();
    const a = await agent(e);
    const firstAt = app.clock.now();
    for (let i = 0; i < 6; i++) {
      const started = await a.call('test_doorbell', { wait_seconds: 10 });
      expect(started.test_id, `test ${i + 1}`).toMatch(/^dt_/);
      // Claimed at once, so it is no longer outstanding.
      expect(await a.call('claim', { id: started.todo_id })).toMatchObject({ self_test: true });
    }
    const refused = await a.call('test_doorbell', { wait_seconds: 10 });
    const nextAllowed = rfc3339(new Date(firstAt.getTime() + 3_600_000));
    expect(refused.error).toBe(`rate_limited: at most 6 self-tests per hour; the next test is allowed at ${nextAllowed}`);
    expect(refused.details).toMatchObject({ next_allowed_at: nextAllowed, retry_after: 3600 });
    expect(await countOf('doorbell_tests', e.id)).toBe(6);
    app.clock.advance(3_599_000);
    expect((await a.call('test_doorbell', { wait_seconds: 10 })).error).toMatch(/^rate_limited: at most 6/);
    app.clock.advance(1000);
    expect(await a.call('test_doorbell', { wait_seconds: 10 })).toMatchObject({ test_id: expect.stringMatching(/^dt_/) });
  });
});

describe('get_doorbell_test (REQ-8)', () => {
  it('pass: an SDK client that claims on the doorbell; claimed_within_seconds counts from the write', async () => {
    const e = await vend();
    const a = await agent(e);
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    expect(await a.call('get_doorbell_test', { test_id: started.test_id })).toMatchObject({ verdict: 'pending', hints: [], claimed_within_seconds: null });
    await until(() => a.tests().length === 1, 'the test doorbell');
    const writtenAt = app.clock.now();
    app.clock.advance(7000);
    const claim = await a.call('claim', { id: a.tests()[0]!.params.meta.todo_id });
    expect(claim).toMatchObject({ id: started.todo_id, state: 'done', self_test: true, note: expect.stringMatching(/self-test.*No other action is needed/) });
    const report = await a.call('get_doorbell_test', { test_id: started.test_id });
    expect(report).toEqual({
      test_id: started.test_id,
      todo_id: started.todo_id,
      wait_seconds: 30,
      server_version: VERSION,
      stream_attached: true,
      channel_capability: started.channel_capability,
      delivered: { written: true, at: rfc3339(writtenAt), session_id: a.sessionId },
      claimed_within_seconds: 7,
      verdict: 'pass',
      hints: [],
    });
    const ringId = a.tests()[0]!.params.meta.ring_id!;
    expect((await db.sql`select ack_via, acked_session_id, acked_at from doorbell_rings where ring_id = ${ringId}`)[0]).toEqual({
      ack_via: 'claim',
      acked_session_id: a.sessionId,
      acked_at: app.clock.now(),
    });
    // The verdict stands after the wait is over.
    app.clock.advance(60_000);
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('pass');
  });

  it('unheard: a Claude Code session that never claims gets the channel-flag hints once the wait is over', async () => {
    const e = await vend();
    const a = await agent(e, app, 'claude-code');
    const started = await a.call('test_doorbell', { wait_seconds: 10 });
    await until(() => a.tests().length === 1, 'the test doorbell');
    await until(async () => (await testRow(started.test_id))?.delivery === 'written', 'the delivery record');
    const pending = await a.call('get_doorbell_test', { test_id: started.test_id });
    expect(pending).toMatchObject({ verdict: 'pending', hints: [], delivered: { written: true, session_id: a.sessionId } });
    app.clock.advance(9_999);
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('pending');
    app.clock.advance(1);
    const report = await a.call('get_doorbell_test', { test_id: started.test_id });
    expect(report).toMatchObject({ verdict: 'unheard', claimed_within_seconds: null, delivered: { written: true, session_id: a.sessionId } });
    expect(report.hints).toEqual([...CLAUDE_CODE_HINTS, expect.any(String), TROUBLESHOOTING]);
    expect(report.hints.at(-1)).toMatch(/^Troubleshooting: .*troubleshooting/i);
    // A claim after the wait is recorded but does not make it a pass.
    app.clock.advance(5000);
    expect(await a.call('claim', { id: started.todo_id })).toMatchObject({ self_test: true });
    expect(await a.call('get_doorbell_test', { test_id: started.test_id })).toMatchObject({ verdict: 'unheard', claimed_within_seconds: null });
  });

  it('unheard for another client: the generic channel hints', async () => {
    const e = await vend();
    const a = await agent(e, app, 'crush');
    const started = await a.call('test_doorbell', { wait_seconds: 10 });
    await until(async () => (await testRow(started.test_id))?.delivery === 'written', 'the delivery record');
    app.clock.advance(11_000);
    const report = await a.call('get_doorbell_test', { test_id: started.test_id });
    expect(report.verdict).toBe('unheard');
    expect(report.hints).toEqual([expect.stringContaining('notifications/claude/channel'), expect.stringContaining('connect guide'), TROUBLESHOOTING]);
    expect(report.hints.join('\n')).not.toMatch(/dangerously|allowedTools/);
  });

  it('no_stream: a session attached without a notification stream, with the Claude Code hints', async () => {
    const e = await vend();
    const s = await streamless(e, 'claude-code');
    const started = await s.call('test_doorbell', { wait_seconds: 10 });
    expect(started).toMatchObject({
      stream_attached: false,
      channel_capability: { server_advertised: true, sessions: [{ client_name: 'claude-code', client_version: '2.0.0', stream_open: false }] },
    });
    const report = await settledReport(() => s.call('get_doorbell_test', { test_id: started.test_id }));
    expect(report).toMatchObject({ verdict: 'no_stream', delivered: { written: false, session_id: null }, claimed_within_seconds: null });
    expect(report.hints).toEqual([...CLAUDE_CODE_HINTS, expect.any(String), TROUBLESHOOTING]);
    expect(await db.sql`select 1 from doorbell_rings where todo_id = ${started.todo_id}`).toHaveLength(0);
  });

  it('no_session: nothing attached when the ring is due (settled after the take grace)', async () => {
    const e = await vend();
    const started = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 10 });
    expect(started.status).toBe(201);
    expect(started.json).toMatchObject({ stream_attached: false, channel_capability: { sessions: [] } });
    const read = async () => (await api('GET', `/api/v1/endpoints/${e.slug}/doorbell-tests/${started.json.test_id}`)).json;
    expect((await read()).verdict).toBe('pending');
    // Poll the store, not the rate-limited API (its buckets refill only when the clock moves).
    await until(async () => (await testRow(started.json.test_id))!.delivery !== null, 'the no_session settlement', 6000);
    const report = await read();
    expect(report).toMatchObject({ verdict: 'no_session', delivered: { written: false, session_id: null }, claimed_within_seconds: null });
    expect(report.hints).toEqual([expect.stringMatching(/^Nothing is connected to this endpoint/), TROUBLESHOOTING]);
  });

  it('the hints table: write_failed, and no hints for pass or pending', () => {
    expect(hintsFor('write_failed', 'claude-code')).toEqual([expect.stringMatching(/stream closed during the write.*Retry/), TROUBLESHOOTING]);
    expect(hintsFor('write_failed', null)).toEqual(hintsFor('write_failed', 'claude-code'));
    expect(hintsFor('pass', 'claude-code')).toEqual([]);
    expect(hintsFor('pending', 'claude-code')).toEqual([]);
    expect(hintsFor('no_stream', 'Claude-Code')).toEqual(hintsFor('unheard', 'claude-code'));
    expect(hintsFor('unheard', 'codex-mcp-client')).toEqual(hintsFor('unheard', 'crush'));
    for (const v of ['unheard', 'no_stream', 'no_session', 'write_failed'] as const) {
      for (const client of ['claude-code', 'crush', null]) expect(hintsFor(v, client).at(-1)).toBe(TROUBLESHOOTING);
    }
    const at = new Date('2026-09-22T10:00:00Z');
    const row = (over: Partial<Parameters<typeof verdictOf>[0]>) => ({ delivery: 'written' as const, delivered_at: at, claimed_at: null, wait_seconds: 60, ...over });
    expect(verdictOf(row({ delivery: 'write_failed' }), at)).toBe('write_failed');
    expect(verdictOf(row({ delivery: null, delivered_at: null }), new Date(at.getTime() + 3_600_000))).toBe('pending');
    expect(verdictOf(row({ claimed_at: new Date(at.getTime() + 60_000) }), new Date(at.getTime() + 3_600_000))).toBe('pass');
    expect(verdictOf(row({ claimed_at: new Date(at.getTime() + 60_001) }), new Date(at.getTime() + 3_600_000))).toBe('unheard');
    expect(verdictOf(row({}), new Date(at.getTime() + 59_999))).toBe('pending');
  });

  it("another endpoint's test and an unknown one are the same not_found", async () => {
    const owner = await vend();
    const other = await vend();
    const a = await agent(owner);
    const b = await agent(other);
    const started = await a.call('test_doorbell', { wait_seconds: 10 });
    const unknown = 'dt_' + '7'.repeat(26);
    const foreign = await b.call('get_doorbell_test', { test_id: started.test_id });
    expect(foreign.error).toMatch(/^not_found: /);
    expect(foreign.error.replace(started.test_id, '<id>')).toBe((await b.call('get_doorbell_test', { test_id: unknown })).error.replace(unknown, '<id>'));
    expect((await b.call('get_doorbell_test', { test_id: "' or 1=1 --" })).error).toMatch(/^not_found: /);
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).test_id).toBe(started.test_id);
  });
});

describe('synthetic todos (REQ-9)', () => {
  it('are stored marked, pulled by nothing but a claim by id, and completed by that claim', async () => {
    const e = await vend(['zeta', 'alpha', 'mid']);
    const a = await agent(e);
    const started = await a.call('test_doorbell', { wait_seconds: 60 });
    expect(await todoRow(started.todo_id)).toMatchObject({
      synthetic: true,
      source: 'switchboard',
      kind: 'doorbell_test',
      queue: 'alpha',
      event_id: null,
      state: 'pending',
      endpoint_id: e.id,
    });
    const real = await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: 'real work', queue: 'zeta' });
    expect(real.status).toBe(201);
    await until(() => a.tests().length === 1, 'the test doorbell');

    expect((await a.call('list_todos')).todos.map((t: { id: string }) => t.id)).toEqual([real.json.id]);
    expect((await a.call('list_todos', { include_synthetic: true })).todos.map((t: { id: string }) => t.id).sort()).toEqual([real.json.id, started.todo_id].sort());
    expect((await api('GET', `/api/v1/endpoints/${e.slug}/todos`)).json.todos.map((t: { id: string }) => t.id)).toEqual([real.json.id]);
    expect((await a.call('get_todo', { id: started.todo_id })).error).toMatch(/^not_found: /);
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: real.json.id } });
    expect(await a.call('claim_next')).toEqual({ empty: true });
    // The heartbeat sweep never re-rings it.
    app.clock.advance(6 * 60_000);
    await sweepOnce({ sql: db.sql, clock: app.clock, log: createLogger('silent'), doorbell: app.doorbell, receivers: () => [e.id] });
    expect(await todoRow(started.todo_id)).toMatchObject({ ring_attempts: 0, last_ringed_at: null, state: 'pending' });
    await sleep(50);
    expect(a.tests()).toHaveLength(1);

    // Any session of the endpoint may claim it by id; the claim completes it in the same statement.
    const other = await agent(e, app, 'second-session');
    const claim = await other.call('claim', { id: started.todo_id });
    expect(claim).toMatchObject({ id: started.todo_id, state: 'done', self_test: true });
    expect(claim.note).toMatch(/No other action is needed/);
    const done = await todoRow(started.todo_id);
    expect(done).toMatchObject({ state: 'done', result: { self_test: true, note: 'no work needed' }, claimed_session_id: other.sessionId, lease_expires_at: null });
    expect(done!.completed_at).toEqual(done!.claimed_at);
    expect((await testRow(started.test_id))!.claimed_at).toEqual(done!.claimed_at);
    // Claimed after its 60 s wait (the clock moved 6 minutes for the sweep): recorded, but too late to pass.
    expect(await other.call('get_doorbell_test', { test_id: started.test_id })).toMatchObject({ verdict: 'unheard', claimed_within_seconds: null });
    // Nothing else can be done with it.
    expect((await other.call('complete', { id: started.todo_id })).error).toMatch(/^not_found: /);
    expect((await a.call('claim', { id: started.todo_id })).error).toMatch(/^conflict: /);
  });

  it('is deleted when its test expires while the report lives on; rings go after 7 days, reports 7 days after expiry', async () => {
    const e = await vend();
    const a = await agent(e);
    const started = await a.call('test_doorbell', { wait_seconds: 60 });
    await until(async () => (await testRow(started.test_id))?.delivery === 'written', 'the delivery record');
    await until(() => a.tests().length === 1, 'the test doorbell');
    const ringId = a.tests()[0]!.params.meta.ring_id!;
    const ring = async () => (await db.sql`select unheard_at from doorbell_rings where ring_id = ${ringId}`)[0];
    const read = () => a.call('get_doorbell_test', { test_id: started.test_id });
    const rungAt = app.clock.now().getTime();

    app.clock.set(new Date(rungAt + 5 * 60_000));
    await app.selfTests.cleanUp();
    expect(await todoRow(started.todo_id)).toBeDefined();
    expect((await read()).verdict).toBe('unheard');

    app.clock.set(new Date(rungAt + 6 * 60_000 + 1000));
    await app.selfTests.cleanUp();
    expect(await todoRow(started.todo_id)).toBeUndefined();
    expect(await read()).toMatchObject({ test_id: started.test_id, todo_id: started.todo_id, verdict: 'unheard', delivered: { written: true } });
    expect(await ring()).toBeDefined();

    app.clock.set(new Date(rungAt + 7 * 86_400_000 - 60_000));
    await app.selfTests.cleanUp();
    expect(await ring()).toBeDefined();
    expect((await read()).verdict).toBe('unheard');

    app.clock.set(new Date(rungAt + 7 * 86_400_000 + 6 * 60_000 + 1000));
    await app.selfTests.cleanUp();
    expect(await ring()).toBeUndefined();
    expect((await read()).error).toMatch(/^not_found: /);
  });
});

describe('metrics (REQ-6)', () => {
  const scrape = async () => {
    const r = await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(r.status).toBe(200);
    return r.text();
  };
  const watched = (body: string) =>
    body.split('\n').filter((l) => l.startsWith('switchboard_doorbell_') || (l.startsWith('switchboard_queue_') && l.includes('queue="selftestq"')));

  it('a whole self-test, claimed or left unheard, moves no doorbell series and no queue series', async () => {
    const e = await vend(['selftestq']);
    const a = await agent(e);
    await app.acks.sweep();
    const before = watched(await scrape());
    expect(before).toContain('switchboard_queue_todos{queue="selftestq",state="pending"} 0');
    expect(before).toContain('switchboard_queue_todos{queue="selftestq",state="done"} 0');
    expect(before.filter((l) => l.startsWith('switchboard_doorbell_')).length).toBeGreaterThanOrEqual(9);

    const claimed = await a.call('test_doorbell', { wait_seconds: 10 });
    await until(() => a.tests().length === 1, 'the first test doorbell');
    expect(watched(await scrape())).toEqual(before);
    expect(await a.call('claim', { id: claimed.todo_id })).toMatchObject({ self_test: true });
    expect((await a.call('get_doorbell_test', { test_id: claimed.test_id })).verdict).toBe('pass');
    expect(watched(await scrape())).toEqual(before);

    const ignored = await a.call('test_doorbell', { wait_seconds: 10 });
    await until(async () => (await testRow(ignored.test_id))?.delivery === 'written', 'the second delivery');
    app.clock.advance(11_000);
    expect(await app.acks.sweep()).toBe(1);
    expect((await db.sql`select unheard_at from doorbell_rings where todo_id = ${ignored.todo_id}`)[0]!.unheard_at).toEqual(app.clock.now());
    expect((await a.call('get_doorbell_test', { test_id: ignored.test_id })).verdict).toBe('unheard');
    expect(watched(await scrape())).toEqual(before);
  });
});

describe('operator routes (REQ-10)', () => {
  it('POST starts a test (201, the start result) and GET reads its report', async () => {
    const e = await vend();
    const a = await agent(e);
    const started = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 60 });
    expect(started.status).toBe(201);
    expect(started.headers.get('x-content-type-options')).toBe('nosniff');
    expect(started.json).toMatchObject({
      test_id: expect.stringMatching(/^dt_/),
      todo_id: expect.stringMatching(/^td_/),
      report_after: expect.any(String),
      server_version: VERSION,
      stream_attached: true,
      channel_capability: { server_advertised: true, sessions: [{ client_name: 'claude-code' }], note: CHANNEL_NOTE },
    });
    const path = `/api/v1/endpoints/${e.slug}/doorbell-tests/${started.json.test_id}`;
    expect((await api('GET', path)).json).toMatchObject({ verdict: 'pending' });
    await until(() => a.tests().length === 1, 'the test doorbell');
    expect(a.tests()[0]!.params.meta.todo_id).toBe(started.json.todo_id);
    app.clock.advance(2000);
    await a.call('claim', { id: started.json.todo_id });
    const report = await api('GET', path);
    expect(report.status).toBe(200);
    expect(report.json).toMatchObject({ verdict: 'pass', claimed_within_seconds: 2, delivered: { written: true, session_id: a.sessionId } });
    // The endpoint id works as the reference too; a bare POST defaults the wait.
    expect((await api('GET', `/api/v1/endpoints/${e.id}/doorbell-tests/${started.json.test_id}`)).json.verdict).toBe('pass');
    const bare = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`);
    expect(bare.status).toBe(201);
    expect((await testRow(bare.json.test_id))!.wait_seconds).toBe(60);
  });

  it("answers 404 for someone else's endpoint, 409 for a revoked one, 413 over 4 KiB, 400 naming wait_seconds", async () => {
    const e = await vend();
    const stranger = apiCaller(app.url, (await humanWithToken(db.sql)).token);
    const mine = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 10 });
    expect(mine.status).toBe(201);
    const path = `/api/v1/endpoints/${e.slug}/doorbell-tests`;

    const foreignPost = await stranger('POST', path, { wait_seconds: 10 });
    expect(foreignPost.status).toBe(404);
    expect(foreignPost.json.code).toBe('not_found');
    const foreignGet = await stranger('GET', `${path}/${mine.json.test_id}`);
    expect(foreignGet.status).toBe(404);
    expect(foreignGet.text).not.toContain(mine.json.todo_id);
    expect((await api('GET', `${path}/dt_${'7'.repeat(26)}`)).status).toBe(404);
    expect(await countOf('doorbell_tests', e.id)).toBe(1);

    const other = await vend();
    const tooBig = await api('POST', `/api/v1/endpoints/${other.slug}/doorbell-tests`, JSON.stringify({ wait_seconds: 10, pad: 'x'.repeat(4200) }));
    expect(tooBig.status).toBe(413);
    expect(tooBig.json.code).toBe('payload_too_large');
    const underLimit = await api('POST', `/api/v1/endpoints/${other.slug}/doorbell-tests`, JSON.stringify({ wait_seconds: 10, pad: 'x'.repeat(4000) }));
    expect(underLimit.status).toBe(400);
    expect(underLimit.json).toMatchObject({ code: 'invalid_argument', field: 'pad' });
    for (const wait of [5, 301, 900, 'sixty', 12.5]) {
      const r = await api('POST', `/api/v1/endpoints/${other.slug}/doorbell-tests`, { wait_seconds: wait });
      expect(r.status, String(wait)).toBe(400);
      expect(r.json).toMatchObject({ code: 'invalid_argument', field: 'wait_seconds' });
    }
    expect(await countOf('doorbell_tests', other.id)).toBe(0);
    expect(await countOf('todos', other.id)).toBe(0);

    expect((await api('POST', `/api/v1/endpoints/${e.slug}/revoke`)).status).toBe(200);
    expect((await api('POST', path, { wait_seconds: 10 })).status).toBe(409);
    expect((await api('GET', `${path}/${mine.json.test_id}`)).status).toBe(409);
  });
});

describe('two instances', () => {
  it("a test started through A's API for an endpoint whose only session is on B is rung by B, and passes", async () => {
    const b = await startTestApp(db.url, app.clock, { selfTestRingDelayMs: RING_DELAY_MS });
    try {
      const e = await vend();
      const onB = await agent(e, b);
      const t0 = Date.now();
      const started = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 30 });
      expect(started.status).toBe(201);
      await until(() => onB.tests().length === 1, 'the test doorbell on B (LISTEN doorbell_test)');
      expect(onB.tests()[0]!.params.meta.todo_id).toBe(started.json.todo_id);
      app.clock.advance(3000);
      expect(await onB.call('claim', { id: started.json.todo_id })).toMatchObject({ self_test: true });
      const path = `/api/v1/endpoints/${e.slug}/doorbell-tests/${started.json.test_id}`;
      await until(async () => (await testRow(started.json.test_id))!.delivery !== null, "B's delivery record");
      expect((await api('GET', path)).json).toMatchObject({ verdict: 'pass', claimed_within_seconds: 3, delivered: { written: true, session_id: onB.sessionId } });
      expect((await testRow(started.json.test_id))!.delivering_instance).toMatch(/^i_/);
      // A's no_session fallback, due after its take grace, finds the ring taken and changes nothing.
      await sleep(Math.max(0, RING_DELAY_MS + 3000 + 200 - (Date.now() - t0)));
      expect(await testRow(started.json.test_id)).toMatchObject({ delivery: 'written', delivered_session_id: onB.sessionId });
      expect((await api('GET', path)).json.verdict).toBe('pass');
    } finally {
      await b.stop();
    }
  });
});

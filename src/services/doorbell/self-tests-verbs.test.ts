import { describe, expect, it } from 'vitest';
import { rfc3339 } from '../../domain/time.ts';
import { VERSION } from '../../lib/version.ts';
import { CHANNEL_NOTE, TROUBLESHOOTING, hintsFor, verdictOf } from './self-tests.ts';
import { until, type Vended } from '../../../test/support/agents.ts';
import {
  agent,
  api,
  app,
  countOf,
  db,
  RING_DELAY_MS,
  sleep,
  testRow,
  untilRingRecorded,
  useSelfTestSuite,
  vend,
} from '../../../test/support/doorbell-self-tests.ts';

// The end-to-end self-test: the test_doorbell and get_doorbell_test verbs.

useSelfTestSuite();

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

  it('names the later time when a test is outstanding and the hourly cap is also reached, and that time is allowed', async () => {
    const e = await vend();
    const a = await agent(e);
    const firstAt = app.clock.now();
    for (let i = 0; i < 5; i++) {
      const started = await a.call('test_doorbell', { wait_seconds: 10 });
      expect(await a.call('claim', { id: started.todo_id })).toMatchObject({ self_test: true });
    }
    // The sixth stays outstanding: heard, not claimed, so it ends 30 s after its write.
    const sixth = await a.call('test_doorbell', { wait_seconds: 30 });
    await until(() => a.heard.some((n: any) => n.params.meta.todo_id === sixth.todo_id), 'the sixth test doorbell');
    const refused = await a.call('test_doorbell', { wait_seconds: 10 });
    const capFrees = rfc3339(new Date(firstAt.getTime() + 3_600_000));
    expect(Date.parse(capFrees)).toBeGreaterThan(Date.parse(sixth.report_after));
    expect(refused.error).toBe(
      `rate_limited: a self-test is already running on this endpoint, and at most 6 self-tests per hour; the next test is allowed at ${capFrees}`,
    );
    expect(refused.details).toMatchObject({ next_allowed_at: capFrees });
    // The named time is not refused again.
    app.clock.set(new Date(Date.parse(capFrees)));
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
    await untilRingRecorded(started.todo_id);
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
    // Not rung yet is pending; at report_after the store ends an unrung test (self-tests-overdue.test.ts).
    expect(verdictOf(row({ delivery: null, delivered_at: null }), new Date(at.getTime() + 1000))).toBe('pending');
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
import { describe, expect, it } from 'vitest';
import { TROUBLESHOOTING, hintsFor, verdictOf } from './self-tests.ts';
import { until } from '../../../test/support/agents.ts';
import { agent, api, app, db, testRow, TICK_ONLY_RING_DELAY_MS, untilRingRecorded, useSelfTestSuite, vend } from '../../../test/support/doorbell-self-tests.ts';

// The self-test claims of decision 11: one's own test todo needs no claim grant (claim, or
// claim_next once its doorbell rang), and a claim before the doorbell was written is no pass.
// Rings come from the tick only, driven by the manual clock.

useSelfTestSuite({ ringDelayMs: TICK_ONLY_RING_DELAY_MS });

const NO_CLAIM_VERBS = ['list_todos', 'complete'];

/** Moves the clock to the stored ring time of a test started now-ish and runs this instance's ring tick. */
async function ringDueTests(): Promise<void> {
  app.clock.advance(TICK_ONLY_RING_DELAY_MS);
  await app.selfTests.ringOverdue();
}

const pushReal = async (slug: string, title: string) => {
  const r = await api('POST', `/api/v1/endpoints/${slug}/todos`, { title, queue: 'reviews' });
  expect(r.status).toBe(201);
  return r.json.id as string;
};

const stateOf = async (todoId: string) => (await db.sql`select state from todos where id = ${todoId}`)[0]!.state;

describe('a claim before the doorbell was written (item 12)', () => {
  it('is not a pass: the verdict says the claim came first, the test is not rung afterwards and no longer outstanding', async () => {
    const e = await vend();
    const a = await agent(e, app, 'claude-code');
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    // The todo_id came back with the start: claiming it now proves nothing about doorbells.
    expect(await a.call('claim', { id: started.todo_id })).toMatchObject({ id: started.todo_id, state: 'done', self_test: true });
    const report = await a.call('get_doorbell_test', { test_id: started.test_id });
    expect(report).toMatchObject({ verdict: 'claimed_before_ring', claimed_within_seconds: null, delivered: { written: false, at: null, session_id: null } });
    expect(report.hints).toEqual([expect.stringMatching(/claimed before its doorbell was written.*claim its todo only when the doorbell arrives/), TROUBLESHOOTING]);

    await ringDueTests();
    expect(a.tests()).toEqual([]);
    expect(await testRow(started.test_id)).toMatchObject({ delivery: null, delivering_instance: null });
    expect(await db.sql`select 1 from doorbell_rings where todo_id = ${started.todo_id}`).toHaveLength(0);
    app.clock.advance(60_000);
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('claimed_before_ring');
    // Over: the next test may start at once.
    expect(await a.call('test_doorbell', { wait_seconds: 10 })).toMatchObject({ test_id: expect.stringMatching(/^dt_/) });
  });

  it('the verdict table: a claim earlier than the write is claimed_before_ring, one at the write time passes', () => {
    const at = new Date('2026-09-22T10:00:00Z');
    const row = { delivery: 'written' as const, delivered_at: at, wait_seconds: 60 };
    expect(verdictOf({ ...row, claimed_at: new Date(at.getTime() - 1) }, at)).toBe('claimed_before_ring');
    expect(verdictOf({ ...row, claimed_at: at }, at)).toBe('pass');
    expect(verdictOf({ delivery: null, delivered_at: null, wait_seconds: 60, claimed_at: at }, at)).toBe('claimed_before_ring');
    expect(hintsFor('claimed_before_ring', 'claude-code')).toEqual(hintsFor('claimed_before_ring', null));
  });
});

describe("one's own test todo needs no claim grant (item 15)", () => {
  it('an endpoint without claim claims its rung test todo by id and passes; every other claim stays forbidden', async () => {
    const e = await vend(['reviews'], api, NO_CLAIM_VERBS);
    const a = await agent(e);
    const real = await pushReal(e.slug, 'real work');
    expect((await a.call('claim', { id: real })).error).toMatch(/^forbidden: verb "claim" is not granted to this endpoint; granted: .*\(whoami lists them\)$/);
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    await ringDueTests();
    await until(() => a.tests().length === 1, 'the test doorbell');
    await untilRingRecorded(started.todo_id);
    app.clock.advance(2000);
    expect(await a.call('claim', { id: a.tests()[0]!.params.meta.todo_id })).toMatchObject({ id: started.todo_id, state: 'done', self_test: true });
    expect(await a.call('get_doorbell_test', { test_id: started.test_id })).toMatchObject({ verdict: 'pass', claimed_within_seconds: 2 });
    expect((await db.sql`select ack_via, acked_session_id from doorbell_rings where todo_id = ${started.todo_id}`)[0]).toEqual({ ack_via: 'claim', acked_session_id: a.sessionId });
    // The exception is the outstanding test todo only.
    expect((await a.call('claim', { id: started.todo_id })).error).toMatch(/^forbidden: verb "claim" is not granted to this endpoint; granted: .*\(whoami lists them\)$/);
    expect((await a.call('claim', { id: real })).error).toMatch(/^forbidden: verb "claim" is not granted to this endpoint; granted: .*\(whoami lists them\)$/);
    expect((await a.call('claim_next')).error).toMatch(/^forbidden: verb "claim_next" is not granted to this endpoint; granted: .*\(whoami lists them\)$/);
    expect(await stateOf(real)).toBe('pending');
    // tools/list still shows the scope as granted.
    const listed = (await a.client.listTools()).tools.map((t) => t.name);
    expect(listed).not.toContain('claim');
    expect(listed).not.toContain('claim_next');
  });

  it('claim_next without the grant hands out the test todo once its doorbell rang, and nothing else', async () => {
    const e = await vend(['reviews'], api, NO_CLAIM_VERBS);
    const a = await agent(e);
    const real = await pushReal(e.slug, 'real work');
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    // Before its doorbell, there is nothing to hand out to an endpoint without the grant.
    expect((await a.call('claim_next')).error).toMatch(/^forbidden: verb "claim_next" is not granted to this endpoint; granted: .*\(whoami lists them\)$/);
    await ringDueTests();
    await until(() => a.tests().length === 1, 'the test doorbell');
    app.clock.advance(5000);
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: started.todo_id, state: 'done', self_test: true } });
    expect(await a.call('get_doorbell_test', { test_id: started.test_id })).toMatchObject({ verdict: 'pass', claimed_within_seconds: 5 });
    expect((await a.call('claim_next')).error).toMatch(/^forbidden: /);
    expect(await stateOf(real)).toBe('pending');
  });

  it('claim_next with the grant hands out a rung test todo before real work, and never before its doorbell', async () => {
    const e = await vend();
    const a = await agent(e);
    const older = await pushReal(e.slug, 'older work');
    const newer = await pushReal(e.slug, 'newer work');
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: older } });
    expect(await a.call('complete', { id: older })).toMatchObject({ state: 'done' });
    await ringDueTests();
    await until(() => a.tests().length === 1, 'the test doorbell');
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: started.todo_id, self_test: true, note: expect.stringMatching(/No other action is needed/) } });
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('pass');
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: newer } });
    expect(await a.call('claim_next')).toEqual({ empty: true });
  });

  it('an endpoint without claim may still claim its test todo by id before the ring, and that is claimed_before_ring', async () => {
    const e = await vend(['reviews'], api, NO_CLAIM_VERBS);
    const a = await agent(e);
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    expect(await a.call('claim', { id: started.todo_id })).toMatchObject({ self_test: true });
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('claimed_before_ring');
  });
});

import { describe, expect, it } from 'vitest';
import { CLAIMED_FIRST, TROUBLESHOOTING, claimedFirst, hintsFor, verdictOf } from './self-tests.ts';
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
  await app.services.selfTests.ringOverdue();
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
    // SPEC-0025 REQ-8: one of the six verdicts, unheard, with a hint that pulling was proven, not hearing.
    expect(report).toMatchObject({ verdict: 'unheard', claimed_within_seconds: null, delivered: { written: false, at: null, session_id: null } });
    expect(report.hints).toEqual([CLAIMED_FIRST, TROUBLESHOOTING]);
    expect(CLAIMED_FIRST).toMatch(/claimed before its doorbell was written.*proves pulling works, not that the doorbell is heard.*claim its todo only when the doorbell arrives/);

    await ringDueTests();
    expect(a.tests()).toEqual([]);
    expect(await testRow(started.test_id)).toMatchObject({ delivery: null, delivering_instance: null });
    expect(await db.sql`select 1 from doorbell_rings where todo_id = ${started.todo_id}`).toHaveLength(0);
    app.clock.advance(60_000);
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('unheard');
    // Over: the next test may start at once.
    expect(await a.call('test_doorbell', { wait_seconds: 10 })).toMatchObject({ test_id: expect.stringMatching(/^dt_/) });
  });

  it('the verdict table: a claim earlier than the write is unheard (SPEC-0025 REQ-8 has six verdicts), one at the write time passes', () => {
    const at = new Date('2026-09-22T10:00:00Z');
    const row = { delivery: 'written' as const, delivered_at: at, wait_seconds: 60 };
    expect(verdictOf({ ...row, claimed_at: new Date(at.getTime() - 1) }, at)).toBe('unheard');
    expect(claimedFirst({ ...row, claimed_at: new Date(at.getTime() - 1) })).toBe(true);
    expect(verdictOf({ ...row, claimed_at: at }, at)).toBe('pass');
    expect(claimedFirst({ ...row, claimed_at: at })).toBe(false);
    expect(verdictOf({ delivery: null, delivered_at: null, wait_seconds: 60, claimed_at: at }, at)).toBe('unheard');
    expect(hintsFor('unheard', 'claude-code', { claimedFirst: true })).toEqual(hintsFor('unheard', null, { claimedFirst: true }));
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
    // tools/list shows claim, described as taking only the endpoint's own self-test todo (decision 11).
    const listed = (await a.client.listTools()).tools;
    expect(listed.find((t) => t.name === 'claim')?.description).toMatch(/own self-test todo by id/);
    expect(listed.map((t) => t.name)).not.toContain('claim_next');
  });

  it('SPEC-0025 REQ-9: claim_next without the grant never hands out the test todo, even once its doorbell rang', async () => {
    const e = await vend(['reviews'], api, NO_CLAIM_VERBS);
    const a = await agent(e);
    const real = await pushReal(e.slug, 'real work');
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    await ringDueTests();
    await until(() => a.tests().length === 1, 'the test doorbell');
    app.clock.advance(5000);
    expect((await a.call('claim_next')).error).toMatch(/^forbidden: verb "claim_next" is not granted to this endpoint; granted: .*\(whoami lists them\)$/);
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('pending');
    expect(await stateOf(real)).toBe('pending');
  });

  it('SPEC-0025 REQ-9: a deaf poller cannot pass: claim_next (and complete with next) never hand out the rung test todo', async () => {
    const e = await vend();
    const a = await agent(e);
    const older = await pushReal(e.slug, 'older work');
    const newer = await pushReal(e.slug, 'newer work');
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    await ringDueTests();
    await until(() => a.tests().length === 1, 'the test doorbell');
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: older } });
    expect(await a.call('complete', { id: older, next: true })).toMatchObject({ next: { empty: false, todo: { id: newer } } });
    expect(await a.call('complete', { id: newer, next: true })).toMatchObject({ next: { empty: true } });
    expect(await a.call('claim_next')).toEqual({ empty: true });
    app.clock.advance(31_000);
    expect((await a.call('get_doorbell_test', { test_id: started.test_id })).verdict).toBe('unheard');
  });

  it('an endpoint without claim may still claim its test todo by id before the ring, and that is unheard, not a pass', async () => {
    const e = await vend(['reviews'], api, NO_CLAIM_VERBS);
    const a = await agent(e);
    const started = await a.call('test_doorbell', { wait_seconds: 30 });
    expect(await a.call('claim', { id: started.todo_id })).toMatchObject({ self_test: true });
    expect(await a.call('get_doorbell_test', { test_id: started.test_id })).toMatchObject({ verdict: 'unheard', hints: [CLAIMED_FIRST, TROUBLESHOOTING] });
  });
});

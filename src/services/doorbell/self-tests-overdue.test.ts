import { describe, expect, it } from 'vitest';
import { startTestApp, apiCaller } from '../../../test/support/app.ts';
import { rfc3339 } from '../../domain/time.ts';
import { maintenanceLoopsOf } from '../../compose.ts';
import { createLogger } from '../../lib/log.ts';
import { TROUBLESHOOTING } from './self-tests.ts';
import { until } from '../../../test/support/agents.ts';
import { agent, api, app, db, human, testRow, TICK_ONLY_RING_DELAY_MS, useSelfTestSuite, vend } from '../../../test/support/doorbell-self-tests.ts';

// Item 11: the ring time is stored, so any instance holding a session rings an overdue test, and a
// test that could not ring ends at report_after. The starting instance's timer never fires here
// (its delay outlives the test); the clock drives every step.

useSelfTestSuite({ ringDelayMs: TICK_ONLY_RING_DELAY_MS });

describe('overdue self-tests (item 11)', () => {
  it('a test nobody could ring is pending until report_after, then ends no_session with its hints and stops blocking new tests', async () => {
    const e = await vend();
    const path = `/api/v1/endpoints/${e.slug}/doorbell-tests`;
    const started = await api('POST', path, { wait_seconds: 10 });
    expect(started.status).toBe(201);
    const reportAfter = new Date(started.json.report_after).getTime();
    expect(reportAfter).toBe((await testRow(started.json.test_id))!.ring_due_at.getTime() + 10_000);

    app.clock.set(new Date(reportAfter - 1000));
    expect(await app.services.selfTests.ringOverdue()).toMatchObject({ rung: 0 });
    expect((await api('GET', `${path}/${started.json.test_id}`)).json.verdict).toBe('pending');
    const refused = await api('POST', path, { wait_seconds: 10 });
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ code: 'rate_limited', next_allowed_at: started.json.report_after });

    app.clock.set(new Date(reportAfter));
    expect((await app.services.selfTests.ringOverdue()).settled).toBeGreaterThanOrEqual(1);
    expect(await testRow(started.json.test_id)).toMatchObject({ delivery: 'no_session', delivered_at: new Date(reportAfter) });
    const report = (await api('GET', `${path}/${started.json.test_id}`)).json;
    expect(report).toMatchObject({ verdict: 'no_session', delivered: { written: false, at: rfc3339(new Date(reportAfter)), session_id: null }, claimed_within_seconds: null });
    expect(report.hints).toEqual([expect.stringMatching(/^Nothing is connected to this endpoint/), TROUBLESHOOTING]);
    expect((await api('POST', path, { wait_seconds: 10 })).status).toBe(201);
  });

  it('the report alone gives the final verdict at report_after, before any tick ran', async () => {
    const e = await vend();
    const path = `/api/v1/endpoints/${e.slug}/doorbell-tests`;
    const started = await api('POST', path, { wait_seconds: 10 });
    app.clock.set(new Date(new Date(started.json.report_after).getTime()));
    expect((await api('GET', `${path}/${started.json.test_id}`)).json.verdict).toBe('no_session');
  });

  it('a session that attaches during the wait is rung by the tick, late, and its claim passes', async () => {
    const e = await vend();
    const started = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 30 });
    app.clock.advance(TICK_ONLY_RING_DELAY_MS + 5000);
    const a = await agent(e);
    expect(await app.services.selfTests.ringOverdue()).toMatchObject({ rung: 1 });
    await until(() => a.tests().length === 1, 'the late test doorbell');
    app.clock.advance(1000);
    expect(await a.call('claim', { id: started.json.todo_id })).toMatchObject({ self_test: true });
    expect(await a.call('get_doorbell_test', { test_id: started.json.test_id })).toMatchObject({ verdict: 'pass', claimed_within_seconds: 1 });
  });

  it('every instance runs the ring tick as a maintenance loop', () => {
    const services = { ...app.services, base: { sql: app.sql, clock: app.clock, log: createLogger('silent') } };
    const loop = maintenanceLoopsOf(services).find((l) => l.name === 'self-test-ring');
    expect(loop).toBeDefined();
    expect(loop!.intervalMs).toBeLessThanOrEqual(10_000);
  });
});

describe('two instances (item 11)', () => {
  it('the starting instance stops before its ring; the instance holding the session rings it from the stored ring time, and it passes', async () => {
    const starter = await startTestApp(db.url, app.clock, { selfTestRingDelayMs: TICK_ONLY_RING_DELAY_MS });
    const e = await vend();
    const onApp = await agent(e);
    let started: any;
    try {
      const r = await apiCaller(starter.url, human.token)('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 30 });
      expect(r.status).toBe(201);
      started = r.json;
    } finally {
      await starter.stop();
    }
    const dueAt = (await testRow(started.test_id))!.ring_due_at.getTime();
    app.clock.set(new Date(dueAt - 1));
    expect(await app.services.selfTests.ringOverdue()).toMatchObject({ rung: 0 });
    expect(onApp.tests()).toEqual([]);

    app.clock.set(new Date(dueAt));
    expect(await app.services.selfTests.ringOverdue()).toMatchObject({ rung: 1 });
    await until(() => onApp.tests().length === 1, 'the test doorbell from the other instance');
    expect(onApp.tests()[0]!.params.meta.todo_id).toBe(started.todo_id);
    // A second tick (or another instance's) does not ring it again.
    expect(await app.services.selfTests.ringOverdue()).toMatchObject({ rung: 0 });
    app.clock.advance(4000);
    expect(await onApp.call('claim', { id: started.todo_id })).toMatchObject({ self_test: true });
    expect(await onApp.call('get_doorbell_test', { test_id: started.test_id })).toMatchObject({
      verdict: 'pass',
      claimed_within_seconds: 4,
      delivered: { written: true, at: rfc3339(new Date(dueAt)), session_id: onApp.sessionId },
      hints: [],
    });
  });
});

import { describe, expect, it } from 'vitest';
import { apiCaller, startTestApp } from '../../../test/support/app.ts';
import { ManualClock } from '../../lib/clock.ts';
import {
  agent,
  app,
  capturingLogger,
  db,
  extraApps,
  human,
  instrument,
  metric,
  ringOne,
  type TestApp,
  useAcksSuite,
  vend,
  WINDOW_MS,
} from '../../../test/support/doorbell-acks.ts';

// Doorbell acknowledgement end to end: the per-session unheard mark with two instances on one database.

useAcksSuite();

const MARKED = 'session marked unheard: its last 3 doorbells reached it but nothing acted on them';

/** Two more instances on the suite's database, each with its own clock and captured log. */
async function twoInstances() {
  const start = async () => {
    const captured = capturingLogger();
    const a = instrument(await startTestApp(db.url, new ManualClock(app.clock.now()), { log: captured.log })) as TestApp;
    extraApps.push(a);
    return { app: a, lines: captured.lines };
  };
  return { a: await start(), b: await start() };
}

/** An agent on `on` whose last 3 rings, written by `on`, are past their window on every clock in `clocks`. */
async function threeIgnoredRings(on: TestApp, clocks: ManualClock[]) {
  const via = apiCaller(on.url, human.token);
  const e = await vend(['reviews'], via);
  const a = await agent(e, on);
  for (let i = 0; i < 3; i++) {
    for (const c of clocks) c.advance(1000);
    await ringOne(e, a, `ignored ${i}`, via, on);
  }
  for (const c of clocks) c.advance(WINDOW_MS + 1000);
  return { e, a };
}

const GAUGE = 'switchboard_doorbell_unheard_sessions';

describe('switchboard_doorbell_unheard_sessions is this instance\'s (SPEC-0025 REQ-6)', () => {
  it('an unheard session hosted on A counts 1 on A and 0 on B, so a sum over instances counts it once', async () => {
    const { a: A, b: B } = await twoInstances();
    const { a } = await threeIgnoredRings(A.app, [A.app.clock, B.app.clock]);
    expect(await metric(A.app, GAUGE)).toBe(0);
    expect(await metric(B.app, GAUGE)).toBe(0);
    await A.app.acks.sweep();
    expect(A.app.sessions.peek(a.sessionId)?.unheard).toBe(true);
    expect(B.app.sessions.peek(a.sessionId)).toBeUndefined();
    expect(await metric(A.app, GAUGE)).toBe(1);
    expect(await metric(B.app, GAUGE)).toBe(0);
    // The suite's own instance hosts none of it either.
    expect(await metric(app, GAUGE)).toBe(0);

    // An acknowledgement clears it on A; B never counted it.
    const [ring] = await db.sql<{ ring_id: string }[]>`select ring_id from doorbell_rings where session_id = ${a.sessionId} limit 1`;
    await a.call('ack_doorbell', { ring_id: ring!.ring_id });
    expect(await metric(A.app, GAUGE)).toBe(0);
    expect(await metric(B.app, GAUGE)).toBe(0);
  });

  it('a session B\'s sweep marks is counted on A, which hosts it, from A\'s next sweep, and never on B', async () => {
    const { a: A, b: B } = await twoInstances();
    const { a } = await threeIgnoredRings(A.app, [A.app.clock, B.app.clock]);
    await B.app.acks.sweep();
    expect(B.lines.filter((l) => l.msg === MARKED && l.session === a.sessionId)).toHaveLength(1);
    expect(await metric(B.app, GAUGE)).toBe(0);
    await A.app.acks.sweep();
    expect(A.app.sessions.peek(a.sessionId)?.unheard).toBe(true);
    expect(await metric(A.app, GAUGE)).toBe(1);
    expect(await metric(B.app, GAUGE)).toBe(0);
  });
});

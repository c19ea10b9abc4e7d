import { describe, expect, it } from 'vitest';
import { apiCaller, startTestApp } from '../../../test/support/app.ts';
import { until } from '../../../test/support/agents.ts';
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
    await A.app.services.acks.sweep();
    expect(A.app.services.sessions.peek(a.sessionId)?.unheard).toBe(true);
    expect(B.app.services.sessions.peek(a.sessionId)).toBeUndefined();
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
    await B.app.services.acks.sweep();
    expect(B.lines.filter((l) => l.msg === MARKED && l.session === a.sessionId)).toHaveLength(1);
    expect(await metric(B.app, GAUGE)).toBe(0);
    await A.app.services.acks.sweep();
    expect(A.app.services.sessions.peek(a.sessionId)?.unheard).toBe(true);
    expect(await metric(A.app, GAUGE)).toBe(1);
    expect(await metric(B.app, GAUGE)).toBe(0);
  });
});

describe('concurrent unheard sweeps (SPEC-0025 REQ-5)', () => {
  it('two instances sweeping at once mark a session once: one conditional update, one warning', async () => {
    const { a: A, b: B } = await twoInstances();
    const { a } = await threeIgnoredRings(A.app, [A.app.clock, B.app.clock]);
    // Both sweeps mark the rings first; let them do so and write the session's activity, so what
    // is left to race is the marking of the session alone.
    await A.app.services.acks.sweep();
    await db.sql`update mcp_sessions set unheard = false where id = ${a.sessionId}`;
    A.app.services.sessions.peek(a.sessionId)!.unheard = false;
    A.lines.length = 0;
    B.lines.length = 0;

    // Make the race real: hold the session's row, start both sweeps, and let go only once both
    // marking statements have read the session as not yet unheard and wait on its row.
    const blocked = () =>
      db.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where wait_event_type = 'Lock' and query like '%with last3%' and datname = current_database()`;
    let sweeps: Promise<number[]> | undefined;
    await db.sql.begin(async (tx) => {
      await tx`select 1 from mcp_sessions where id = ${a.sessionId} for update`;
      sweeps = Promise.all([A.app.services.acks.sweep(), B.app.services.acks.sweep()]);
      await until(async () => (await blocked())[0]!.n === 2, 'both marking statements waiting on the session row');
    });
    await sweeps;

    const marks = [...A.lines, ...B.lines].filter((l) => l.msg === MARKED && l.session === a.sessionId);
    expect(marks).toHaveLength(1);
    const [row] = await db.sql<{ unheard: boolean }[]>`select unheard from mcp_sessions where id = ${a.sessionId}`;
    expect(row!.unheard).toBe(true);
    // A, which hosts the session, knows it is unheard whichever sweep marked it.
    expect(A.app.services.sessions.peek(a.sessionId)?.unheard).toBe(true);
    expect(await metric(A.app, GAUGE)).toBe(1);
    expect(await metric(B.app, GAUGE)).toBe(0);
  });
});

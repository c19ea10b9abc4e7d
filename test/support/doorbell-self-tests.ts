// Shared by the doorbell self-test files (src/services/doorbell/self-tests-*.test.ts).

import { beforeAll } from 'vitest';
import { ManualClock } from '../../src/lib/clock.ts';
import { untilRingRecorded as untilRecorded } from './agents.ts';
import { vend as vendVia, withApp, type Api, type AppFixture, type TestApp, type TestDb, type Vended } from './fixtures.ts';

/**
 * The end-to-end self-test (SPEC-0025 REQ-6 to REQ-10): test_doorbell, get_doorbell_test, the
 * synthetic todo and the operator routes, with SDK clients over real HTTP, real PostgreSQL, a real
 * (short) ring delay and a manual clock for every wait.
 */

export const RING_DELAY_MS = 300;
export const METRICS_TOKEN = 't'.repeat(48);

export let db: TestDb;
export let app: TestApp;
export let api: Api;
export let agent: AppFixture['agent'];
/** The file's operator (their token opens the API of any extra instance). */
export let human: AppFixture['human'];

export const vend = (queues = ['reviews'], via = api, verbs?: string[]): Promise<Vended> =>
  vendVia(via, verbs ? { name: 'agent', queues, verbs } : { name: 'agent', queues });

/**
 * A ring delay no test outlives: the starting instance's in-memory timer never fires, so the test
 * ring comes only from a tick (`selfTests.ringOverdue`) once the clock passes the stored ring time.
 */
export const TICK_ONLY_RING_DELAY_MS = 600_000;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const testRow = async (testId: string) => (await db.sql`select * from doorbell_tests where test_id = ${testId}`)[0];
/** Waits for the ring record of a test's doorbell (see untilRingRecorded in agents.ts). */
export const untilRingRecorded = (todoId: string) => untilRecorded(db.sql, { todo_id: todoId });
export const countOf = async (table: 'todos' | 'doorbell_tests', endpointId?: string) =>
  Number(
    (endpointId === undefined
      ? await db.sql`select count(*)::int as n from ${db.sql(table)}`
      : await db.sql`select count(*)::int as n from ${db.sql(table)} where endpoint_id = ${endpointId}`)[0]!.n,
  );

/** A database and app of the calling file's own (short ring delay, metrics token); the rate limiters refill before each test. */
export function useSelfTestSuite(opts: { ringDelayMs?: number } = {}): void {
  // Refills the clock-driven rate limiters; every test works on endpoints of its own.
  const f = withApp({
    clock: new ManualClock('2026-09-22T08:00:00Z'),
    selfTestRingDelayMs: opts.ringDelayMs ?? RING_DELAY_MS,
    env: { SWITCHBOARD_METRICS_TOKEN: METRICS_TOKEN },
    refillMs: 60_000,
  });
  beforeAll(() => void ({ db, app, api, agent, human } = f));
}

import type { Sql, TxSql } from '../db/connect.ts';
import { SwitchboardError } from '../domain/errors.ts';
import { rfc3339 } from '../domain/time.ts';
import { newTodoId } from './todos/row.ts';

/** How a self-test's ring went: written to a session's stream, or why not (the `delivery` column). */
export type TestRingOutcome = 'written' | 'no_session' | 'no_stream' | 'write_failed';

export interface SelfTestRow {
  test_id: string;
  endpoint_id: string;
  todo_id: string;
  wait_seconds: number;
  created_at: Date;
  ring_due_at: Date;
  expires_at: Date;
  server_version: string;
  stream_attached: boolean;
  channel_capability: unknown;
  delivering_instance: string | null;
  delivery: TestRingOutcome | null;
  delivered_at: Date | null;
  delivered_session_id: string | null;
  client_name: string | null;
  ring_id: string | null;
  claimed_at: Date | null;
}

export const TESTS_PER_HOUR = 6;
/** A test's synthetic todo is deleted this long after its wait ends; its report lives 7 days more. */
export const TEST_GRACE_MS = 5 * 60_000;

export interface StartTest {
  testId: string;
  endpointId: string;
  queue: string;
  waitSeconds: number;
  ringDueAt: Date;
  serverVersion: string;
  streamAttached: boolean;
  channelCapability: unknown;
}

const rateLimited = (why: string, nextAllowed: Date, now: Date) =>
  new SwitchboardError('rate_limited', `${why}; the next test is allowed at ${rfc3339(nextAllowed)}`, {
    next_allowed_at: rfc3339(nextAllowed),
    retry_after: Math.max(1, Math.ceil((nextAllowed.getTime() - now.getTime()) / 1000)),
  });

/**
 * Starts a self-test: under a per-endpoint advisory lock, refuses a second outstanding test or a
 * seventh in a rolling hour, then creates the synthetic todo (no event, so nothing else rings it)
 * and the test's report row together.
 */
export async function startSelfTest(sql: Sql, t: StartTest, now: Date): Promise<SelfTestRow> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtext(${`doorbell_test:${t.endpointId}`}))`;
    await settleUnrungTestsUnscoped(tx, now, { endpointId: t.endpointId });
    const [outstanding] = await tx<{ until: Date }[]>`
      select coalesce(delivered_at, ring_due_at) + make_interval(secs => wait_seconds) as until
      from doorbell_tests
      where endpoint_id = ${t.endpointId} and claimed_at is null
        and (delivery is null or (delivery = 'written' and delivered_at + make_interval(secs => wait_seconds) > ${now}))
      order by created_at desc limit 1`;
    const recent = await tx<{ created_at: Date }[]>`
      select created_at from doorbell_tests
      where endpoint_id = ${t.endpointId} and created_at > ${now}::timestamptz - interval '1 hour'
      order by created_at`;
    // The cap frees a slot when the oldest test that keeps the count at the cap leaves the hour.
    const capFreesAt = recent.length >= TESTS_PER_HOUR
      ? new Date(recent[recent.length - TESTS_PER_HOUR]!.created_at.getTime() + 3_600_000)
      : null;
    // Both refusals can hold at once; the time named must pass both, so it is the later of the two.
    if (outstanding) {
      const capLater = capFreesAt !== null && capFreesAt > outstanding.until;
      throw rateLimited(
        capLater ? `a self-test is already running on this endpoint, and at most ${TESTS_PER_HOUR} self-tests per hour` : 'a self-test is already running on this endpoint',
        capLater ? capFreesAt : outstanding.until,
        now,
      );
    }
    if (capFreesAt) throw rateLimited(`at most ${TESTS_PER_HOUR} self-tests per hour`, capFreesAt, now);
    const todoId = newTodoId();
    await tx`
      insert into todos (id, endpoint_id, queue, source, kind, title, payload, synthetic, created_at, updated_at)
      values (${todoId}, ${t.endpointId}, ${t.queue}, 'switchboard', 'doorbell_test', 'Switchboard self-test: claim this todo',
              ${tx.json({ self_test: true })}, true, ${now}, ${now})`;
    const expiresAt = new Date(t.ringDueAt.getTime() + t.waitSeconds * 1000 + TEST_GRACE_MS);
    const [row] = await tx<SelfTestRow[]>`
      insert into doorbell_tests (test_id, endpoint_id, todo_id, wait_seconds, created_at, ring_due_at, expires_at,
                                  server_version, stream_attached, channel_capability)
      values (${t.testId}, ${t.endpointId}, ${todoId}, ${t.waitSeconds}, ${now}, ${t.ringDueAt}, ${expiresAt},
              ${t.serverVersion}, ${t.streamAttached}, ${tx.json(t.channelCapability as never)})
      returning *`;
    return row!;
  });
}

/** The report row of one test of one endpoint; another endpoint's answers like a missing one. */
export async function getSelfTest(sql: Sql, endpointId: string, testId: string): Promise<SelfTestRow | null> {
  const [row] = await sql<SelfTestRow[]>`select * from doorbell_tests where test_id = ${testId} and endpoint_id = ${endpointId}`;
  return row ?? null;
}

/**
 * Takes the test ring for this instance; only one instance ever rings a test. A test whose todo
 * was already claimed is not rung: its verdict is settled by that claim.
 */
export async function takeTestDelivery(sql: Sql, testId: string, instanceId: string): Promise<SelfTestRow | null> {
  const [row] = await sql<SelfTestRow[]>`
    update doorbell_tests set delivering_instance = ${instanceId}
    where test_id = ${testId} and delivering_instance is null and delivery is null and claimed_at is null
    returning *`;
  return row ?? null;
}

export async function recordTestDelivery(
  sql: Sql,
  testId: string,
  d: { delivery: TestRingOutcome; at: Date; sessionId: string | null; clientName: string | null; ringId: string | null },
): Promise<void> {
  await sql`
    update doorbell_tests set delivery = ${d.delivery}, delivered_at = ${d.at}, delivered_session_id = ${d.sessionId},
      client_name = ${d.clientName}, ring_id = ${d.ringId}
    where test_id = ${testId} and delivery is null`;
}

/** When no instance could take the ring: nothing was attached (no_session), or nothing had a stream open (no_stream). */
export async function settleUndeliveredTest(
  sql: Sql,
  testId: string,
  now: Date,
  outcome: { delivery: 'no_session' | 'no_stream'; clientName: string | null } = { delivery: 'no_session', clientName: null },
): Promise<boolean> {
  const rows = await sql`
    update doorbell_tests set delivery = ${outcome.delivery}, delivered_at = ${now}, client_name = ${outcome.clientName}
    where test_id = ${testId} and delivery is null and delivering_instance is null and claimed_at is null returning 1`;
  return rows.length === 1;
}

/**
 * Tests of these endpoints whose ring is due and that no instance has taken, oldest first: the
 * ring time is stored, so whichever instance holds a session rings them (the starting instance's
 * timer dies with it). Unscoped: a maintenance tick has no caller.
 */
export async function overdueTestsUnscoped(sql: Sql, endpointIds: readonly string[], now: Date): Promise<string[]> {
  if (endpointIds.length === 0) return [];
  const rows = await sql<{ test_id: string }[]>`
    select test_id from doorbell_tests
    where endpoint_id = any(${sql.array([...endpointIds])}::uuid[]) and delivery is null and delivering_instance is null
      and claimed_at is null and ring_due_at <= ${now} and ring_due_at + make_interval(secs => wait_seconds) > ${now}
    order by ring_due_at`;
  return rows.map((r) => r.test_id);
}

/**
 * Ends the tests that could not ring by their report_after (ring_due_at + wait) as `no_session`:
 * no instance held a session of the endpoint to ring it with. Afterwards they no longer count as
 * outstanding. Narrowed to one test or one endpoint, or every test (the maintenance tick).
 */
export async function settleUnrungTestsUnscoped(sql: Sql | TxSql, now: Date, only: { testId: string } | { endpointId: string } | null = null): Promise<string[]> {
  const narrow = only === null ? sql`` : 'testId' in only ? sql`and test_id = ${only.testId}` : sql`and endpoint_id = ${only.endpointId}`;
  const rows = await sql<{ test_id: string }[]>`
    update doorbell_tests set delivery = 'no_session', delivered_at = ${now}
    where delivery is null and claimed_at is null and ring_due_at + make_interval(secs => wait_seconds) <= ${now} ${narrow}
    returning test_id`;
  return rows.map((r) => r.test_id);
}

/**
 * Housekeeping in single statements, safe on every instance at once: synthetic todos of expired
 * tests go (claimed or not), reports 7 days after their test expired, rings 7 days after sending.
 */
export async function cleanUpSelfTestsUnscoped(sql: Sql, now: Date): Promise<{ todos: number; reports: number }> {
  const todos = await sql`
    delete from todos t using doorbell_tests d
    where t.synthetic and d.todo_id = t.id and d.expires_at <= ${now} returning 1`;
  const reports = await sql`delete from doorbell_tests where expires_at < ${now}::timestamptz - interval '7 days' returning 1`;
  return { todos: todos.length, reports: reports.length };
}

/** The endpoint a test belongs to, for the instance that may ring it. Unscoped: a wakeup has no caller. */
export async function selfTestEndpointUnscoped(sql: Sql, testId: string): Promise<string | null> {
  const [row] = await sql<{ endpoint_id: string }[]>`select endpoint_id from doorbell_tests where test_id = ${testId}`;
  return row?.endpoint_id ?? null;
}

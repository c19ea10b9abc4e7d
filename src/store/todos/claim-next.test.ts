import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../../test/support/agents.ts';
import { migratedDatabase } from '../../../test/support/app.ts';
import { countingPool as countingPoolOf } from '../../../test/support/counting-pool.ts';
import { ManualClock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import { vendEndpoint } from '../endpoints.ts';
import { addHuman } from '../humans.ts';
import { insertRing, newRingId, type RingKind } from '../rings.ts';
import { recordTestDelivery, startSelfTest } from '../selftests.ts';
import { ulid } from 'ulidx';
import { ClaimNext, MAX_CLAIMS_PER_STATEMENT, insertEventAndTodo, type Caller } from './index.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const clock = new ManualClock('2026-03-02T10:00:00Z');

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'claim-next-tester' })).id;
});
afterAll(async () => db.drop());

async function newEndpoint(): Promise<Caller> {
  const { endpoint } = await vendEndpoint(sql, humanId, { name: 'worker', queues: ['reviews'] }, clock.now());
  return { endpointId: endpoint.id, owner: `agent:${endpoint.agent_id}`, queues: ['reviews'] };
}

async function push(caller: Caller, title: string): Promise<string> {
  clock.advance(1000);
  const r = await insertEventAndTodo(
    sql,
    { source: 'operator', family: 'operator', trustMode: 'operator', verified: true, externalId: null },
    { endpointId: caller.endpointId, queue: 'reviews', title, idempotencyKey: null, payload: { title } },
    clock.now(),
  );
  return r.todo.id;
}

/** A pool that counts the claim_next statements sent through it. */
const countingPool = () => countingPoolOf(sql, (text) => text.includes('picked as materialized'));

const ring = (c: Caller, kind: RingKind, todoId: string | null, sentAt: Date) =>
  insertRing(sql, {
    ringId: newRingId(),
    endpointId: c.endpointId,
    sessionId: 'ses-rang',
    todoId,
    kind,
    queue: todoId ? 'reviews' : null,
    synthetic: false,
    windowSeconds: 600,
    sentAt,
  });

/** The event loop's next turn: a kind's gathered statement has been sent by then. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('ClaimNext', () => {
  it('claims of one turn go together, and claims that arrive while they run go together behind them, each with its own session and fence, none twice', async () => {
    const c = await newEndpoint();
    for (let i = 0; i < 10; i++) await push(c, `job ${i}`);
    const { pool, statements } = countingPool();
    const claimNext = new ClaimNext(pool);
    const sessions = Array.from({ length: MAX_CLAIMS_PER_STATEMENT }, (_, i) => `ses-${i}`);
    const claim = (s: string) => claimNext.claim({ ...c, sessionId: s }, c.queues, 60, clock.now(), `hash-of-${s}`);
    const half = MAX_CLAIMS_PER_STATEMENT / 2;
    const firstTurn = sessions.slice(0, half).map(claim);
    // The first turn's statement has been sent: the rest arrive while it runs.
    await nextTurn();
    expect(statements()).toBe(1);
    const got = await Promise.all([...firstTurn, ...sessions.slice(half).map(claim)]);
    // Once half a statement's seats waited, those went behind it (gatheredRuns).
    expect(statements()).toBe(2);
    expect(new Set(got.map((t) => t!.id)).size).toBe(sessions.length);
    const rows = await sql<{ id: string; claimed_session_id: string; lease_token_hash: string; state: string }[]>`
      select id, claimed_session_id, lease_token_hash, state from todos where id = any(${got.map((t) => t!.id)})`;
    for (const [i, t] of got.entries()) {
      expect(t).toMatchObject({ state: 'claimed', claimed_session_id: sessions[i], owner: c.owner });
      expect(rows.find((r) => r.id === t!.id)).toMatchObject({ state: 'claimed', claimed_session_id: sessions[i], lease_token_hash: `hash-of-${sessions[i]}` });
    }
    expect(Object.keys(got[0]!)).not.toContain('seat');
  });

  it("acknowledges each todo's open ring as the session that claimed it, and an open digest once, within one statement", async () => {
    const c = await newEndpoint();
    const ids = [await push(c, 'a'), await push(c, 'b'), await push(c, 'c')];
    const first = clock.now();
    for (const id of ids) await ring(c, 'todo', id, first);
    // Sent after the lone first claim's now, before the batch's: only the batch can acknowledge it.
    await ring(c, 'digest', null, new Date(first.getTime() + 1000));
    const later = new Date(first.getTime() + 2000);
    const { pool, statements } = countingPool();
    const claimNext = new ClaimNext(pool);
    const alone = claimNext.claim({ ...c, sessionId: 'ses-a' }, c.queues, 60, first);
    await nextTurn();
    const got = await Promise.all([
      alone,
      claimNext.claim({ ...c, sessionId: 'ses-b' }, c.queues, 60, later),
      claimNext.claim({ ...c, sessionId: 'ses-c' }, c.queues, 60, later),
    ]);
    expect(statements()).toBe(2);
    const rings = await sql<{ kind: string; todo_id: string | null; acked_session_id: string | null; ack_via: string | null }[]>`
      select kind, todo_id, acked_session_id, ack_via from doorbell_rings where endpoint_id = ${c.endpointId}`;
    for (const [i, t] of got.entries()) {
      const own = rings.find((r) => r.todo_id === t!.id)!;
      expect(own).toMatchObject({ acked_session_id: ['ses-a', 'ses-b', 'ses-c'][i], ack_via: 'claim' });
    }
    const digest = rings.find((r) => r.kind === 'digest')!;
    expect(['ses-b', 'ses-c']).toContain(digest.acked_session_id);
    // Each claim reports its own todo's ring; the digest goes to the one claim that acknowledged it.
    expect(got.map((t) => t!.acked_rings.filter((r) => r.kind === 'todo'))).toEqual([1, 2, 3].map(() => [{ kind: 'todo', synthetic: false, late: false, unheardNow: false }]));
    const digestReports = got.flatMap((t) => t!.acked_rings.filter((r) => r.kind === 'digest'));
    expect(digestReports).toEqual([{ kind: 'digest', synthetic: false, late: false, unheardNow: false }]);
    expect(got[0]!.acked_rings.some((r) => r.kind === 'digest')).toBe(false);
  });

  it("SPEC-0025 REQ-9: never gives the endpoint's ringing self-test to a seat of a statement; the seats take real work and the report stays unclaimed", async () => {
    const c = await newEndpoint();
    const real = [await push(c, 'first'), await push(c, 'second'), await push(c, 'third')];
    // The lone first claim runs before the test exists; its answer is held so the next three wait and go together.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let first = true;
    let statements = 0;
    const pool = new Proxy(sql, {
      get(target, prop, receiver) {
        if (prop !== 'unsafe') return Reflect.get(target, prop, receiver);
        const unsafe = target.unsafe as (...a: unknown[]) => Promise<unknown>;
        return (text: string, ...rest: unknown[]) => {
          if (!text.includes('picked as materialized')) return unsafe(text, ...rest);
          statements++;
          const hold = first;
          first = false;
          return unsafe(text, ...rest).then(async (rows) => (hold ? (await held, rows) : rows));
        };
      },
    });
    const claimNext = new ClaimNext(pool);
    const lone = claimNext.claim({ ...c, sessionId: 'ses-lone' }, c.queues, 60, clock.now());
    await until(() => statements === 1, 'the lone claim to run');
    const test = await startSelfTest(
      sql,
      { testId: `dt_${ulid()}`, endpointId: c.endpointId, queue: 'reviews', waitSeconds: 60, ringDueAt: clock.now(), serverVersion: 'test', streamAttached: true, channelCapability: {} },
      clock.now(),
    );
    await recordTestDelivery(sql, test.test_id, { delivery: 'written', at: clock.now(), sessionId: 'ses-1', clientName: 'test', ringId: null });
    const waiting = ['ses-1', 'ses-2', 'ses-3'].map((s) => claimNext.claim({ ...c, sessionId: s }, c.queues, 60, clock.now(), `hash-of-${s}`));
    release();
    const [alone, ...together] = await Promise.all([lone, ...waiting]);
    expect(statements).toBe(2);
    expect(alone!.id).toBe(real[0]);
    expect(together.filter((t) => t?.synthetic)).toEqual([]);
    expect(together.map((t) => t && [t.id, t.state])).toEqual([[real[1], 'claimed'], [real[2], 'claimed'], null]);
    const [report] = await sql<{ claimed_at: Date | null }[]>`select claimed_at from doorbell_tests where test_id = ${test.test_id}`;
    expect(report!.claimed_at).toBeNull();
  });

  it('a claim its statement had no todo for looks again alone, and answers empty only when nothing is claimable', async () => {
    const c = await newEndpoint();
    await push(c, 'one');
    await push(c, 'two');
    const claimNext = new ClaimNext(sql);
    const got = await Promise.all(Array.from({ length: 5 }, (_, i) => claimNext.claim({ ...c, sessionId: `ses-${i}` }, c.queues, 60, clock.now())));
    const taken = got.filter(Boolean).map((t) => t!.id);
    expect(taken).toHaveLength(2);
    expect(new Set(taken).size).toBe(2);
    const [row] = await sql<{ claimed: number }[]>`select count(*)::int as claimed from todos where endpoint_id = ${c.endpointId} and state = 'claimed'`;
    expect(row!.claimed).toBe(2);
  });

  it('keeps claims of other endpoints, owners, queues or leases in statements of their own', async () => {
    const a = await newEndpoint();
    const b = await newEndpoint();
    const ids = { a: [await push(a, 'a1'), await push(a, 'a2')], b: await push(b, 'b') };
    const { pool, statements } = countingPool();
    const claimNext = new ClaimNext(pool);
    const [fromA, fromB, longer] = await Promise.all([
      claimNext.claim(a, a.queues, 60, clock.now()),
      claimNext.claim(b, b.queues, 60, clock.now()),
      claimNext.claim(a, a.queues, 600, clock.now()),
    ]);
    expect(statements()).toBe(3);
    expect([fromA?.id, longer?.id].sort()).toEqual([...ids.a].sort());
    expect(fromB?.id).toBe(ids.b);
    expect(longer?.lease_expires_at?.getTime()).toBe(clock.now().getTime() + 600_000);
  });

  it('rejects a claim whose statement failed, and the next claim runs', async () => {
    const c = await newEndpoint();
    await push(c, 'after the failure');
    let failNext = true;
    const pool = new Proxy(sql, {
      get(target, prop, receiver) {
        if (prop !== 'unsafe') return Reflect.get(target, prop, receiver);
        return (text: string, ...rest: unknown[]) => {
          if (failNext && text.includes('picked as materialized')) {
            failNext = false;
            return Promise.reject(new Error('connection lost'));
          }
          return (target.unsafe as (...a: unknown[]) => unknown)(text, ...rest);
        };
      },
    });
    const claimNext = new ClaimNext(pool);
    await expect(claimNext.claim(c, c.queues, 60, clock.now())).rejects.toThrow('connection lost');
    expect((await claimNext.claim(c, c.queues, 60, clock.now()))?.title).toBe('after the failure');
  });
});

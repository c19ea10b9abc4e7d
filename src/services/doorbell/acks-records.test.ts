import http from 'node:http';
import { describe, expect, it } from 'vitest';
import type { App } from '../../app.ts';
import { pushEligibleBacklog } from '../../store/todos/index.ts';
import { digestDoorbell } from './digest.ts';
import { settle, until, type Vended } from '../../../test/support/agents.ts';
import {
  agent,
  api,
  app,
  db,
  logs,
  metric,
  push,
  ringById,
  ringOne,
  type RingRow,
  ringsOfEndpoint,
  useAcksSuite,
  vend,
  WINDOW_MS,
} from '../../../test/support/doorbell-acks.ts';

// Doorbell acknowledgement end to end: ring records, and acknowledgement by claim and by ack_doorbell.

useAcksSuite();

/** An SDK client on `on` whose doorbells land in `heard`; resolves once its stream is open. */

/** A session initialized over raw HTTP that never opens its notification stream. */
async function streamlessSession(e: Vended, on: App = app): Promise<string> {
  const res = await fetch(`${on.url}/mcp/${e.slug}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${e.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'claude-code', version: '2.1.0' } },
    }),
  });
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

const ringsOf = (todoId: string) => db.sql<RingRow[]>`select * from doorbell_rings where todo_id = ${todoId} order by sent_at`;
const todoRow = async (id: string) =>
  (await db.sql<{ state: string; owner: string | null; claimed_at: Date | null; claimed_session_id: string | null }[]>`
    select state, owner, claimed_at, claimed_session_id from todos where id = ${id}`)[0]!;

describe('ring records (REQ-1, REQ-2)', () => {
  it('a written todo doorbell creates exactly one ring whose id is the doorbell meta.ring_id', async () => {
    const e = await vend();
    const a = await agent(e);
    const ringsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' });
    const { todoId, note, ring } = await ringOne(e, a, 'review PR 7');
    expect(note.params.meta).toEqual({ todo_id: todoId, queue: 'reviews', todo_kind: 'operator', ring_id: expect.stringMatching(/^rg_[0-9A-HJKMNP-TV-Z]{26}$/) });
    for (const key of Object.keys(note.params.meta)) expect(key).toMatch(/^[a-z]+(_[a-z]+)*$/);
    // The claim instruction is still there.
    expect(note.params.content).toContain(`call claim with id "${todoId}"`);
    expect(ring).toEqual({
      ring_id: note.params.meta.ring_id,
      endpoint_id: e.id,
      session_id: a.sessionId,
      todo_id: todoId,
      kind: 'todo',
      queue: 'reviews',
      synthetic: false,
      window_seconds: 900,
      sent_at: app.clock.now(),
      acked_at: null,
      ack_via: null,
      acked_session_id: null,
      unheard_at: null,
      // Its only session, which has called no tool yet.
      reason: 'never_called_tool',
    });
    await settle();
    expect(await ringsOf(todoId)).toHaveLength(1);
    await until(async () => (await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })) === ringsBefore + 1, 'the ring counted');
  });

  it('a session with no stream open on any instance is not rung: no ring, no write, nothing counted', async () => {
    // Its stream may be on another instance of the cluster; only an instance holding one rings.
    const e = await vend();
    const sid = await streamlessSession(e);
    const ringsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' });
    const ids = [await push(e, 'one'), await push(e, 'two'), await push(e, 'three')];
    await settle();
    for (const id of ids) expect(await ringsOf(id)).toEqual([]);
    expect(await ringsOfEndpoint(e.id)).toEqual([]);
    expect(logs.filter((l) => l.session === sid && String(l.msg).startsWith('doorbell'))).toEqual([]);
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore);
  });

  it('a digest ring has kind digest, no todo and no queue, and carries the digest meta.ring_id', async () => {
    const e = await vend(['reviews', 'inbox']);
    const a = await agent(e);
    await a.call('clock_out');
    await push(e, 'held while out', api, 'inbox');
    await settle();
    expect(a.heard).toEqual([]);
    const digestsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'digest' });
    await a.call('clock_in');
    await until(() => a.heard.length === 1, 'the digest');
    const meta = a.heard[0]!.params.meta;
    expect(meta).toMatchObject({ kind: 'digest', reason: 'clock_in', ring_id: expect.stringMatching(/^rg_/) });
    let ring: RingRow | undefined;
    await until(async () => (ring = await ringById(meta.ring_id!)) !== undefined, 'the digest ring');
    expect(ring).toMatchObject({ kind: 'digest', todo_id: null, queue: null, synthetic: false, session_id: a.sessionId, endpoint_id: e.id, acked_at: null, unheard_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'digest' })).toBe(digestsBefore + 1);
  });

  it('a ring that cannot be recorded still delivers its doorbell, is logged and counted as a collection error, and is not counted as a ring (REQ-11)', async () => {
    const e = await vend();
    const a = await agent(e);
    const errorsBefore = await metric(app, 'switchboard_metrics_collection_errors_total', { collector: 'doorbell_rings' });
    const ringsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' });
    // Every insert into doorbell_rings now fails, in this test's own database only.
    await db.sql`alter table doorbell_rings add constraint test_ring_store_down check (false) not valid`;
    let todoId: string;
    try {
      todoId = await push(e, 'rung while the ring store is down');
      await until(() => a.heard.length === 1, 'the doorbell');
      await until(
        async () => (await metric(app, 'switchboard_metrics_collection_errors_total', { collector: 'doorbell_rings' })) === errorsBefore + 1,
        'the collection error',
      );
    } finally {
      await db.sql`alter table doorbell_rings drop constraint test_ring_store_down`;
    }
    const meta = a.heard[0]!.params.meta;
    expect(meta).toMatchObject({ todo_id: todoId, ring_id: expect.stringMatching(/^rg_/) });
    expect(await ringsOf(todoId)).toEqual([]);
    // A ring is counted once its record is written: this one never was.
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore);
    const logged = logs.filter((l) => l.msg === 'could not record a doorbell ring' && l.todo_id === todoId);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 50, stage: 'ring record', slug: e.slug, ring_id: meta.ring_id, err: expect.stringMatching(/test_ring_store_down/) });
    // The pump is unaffected: the next doorbell is recorded as usual.
    app.clock.advance(1000);
    const next = await ringOne(e, a, 'after the store is back');
    expect(next.ring.kind).toBe('todo');
    await until(async () => (await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })) === ringsBefore + 1, 'the recorded ring counted');
    await settle();
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore + 1);
  });
});

describe('acknowledgement (REQ-3)', () => {
  it("a claim by another session acknowledges the ring in the claim's own transaction", async () => {
    const e = await vend();
    const s = await agent(e);
    const { todoId, ring } = await ringOne(e, s, 'rung to S');
    const t = await agent(e, app, 'worker');
    const ackedBefore = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' });

    // While acknowledging is impossible, the claim cannot take the lease either: they commit together.
    await db.sql`alter table doorbell_rings add constraint test_no_claim_acks check (ack_via is distinct from 'claim') not valid`;
    try {
      expect((await t.call('claim', { id: todoId })).error).toMatch(/^internal: /);
    } finally {
      await db.sql`alter table doorbell_rings drop constraint test_no_claim_acks`;
    }
    expect(await todoRow(todoId)).toMatchObject({ state: 'pending', owner: null, claimed_at: null });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: null, ack_via: null });

    app.clock.advance(5000);
    const claimed = await t.call('claim', { id: todoId });
    expect(claimed).toMatchObject({ id: todoId, state: 'claimed' });
    const row = await todoRow(todoId);
    expect(row).toMatchObject({ state: 'claimed', claimed_at: app.clock.now(), claimed_session_id: t.sessionId });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: app.clock.now(), ack_via: 'claim', acked_session_id: t.sessionId, unheard_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' })).toBe(ackedBefore + 1);
  });

  it('claim_next acknowledges every open ring of the todo it takes, and only that todo', async () => {
    const e = await vend();
    const a = await agent(e);
    const first = await ringOne(e, a, 'first');
    app.clock.advance(1000);
    const second = await ringOne(e, a, 'second');
    // A second ring of the same todo (the heartbeat sweep's re-ring).
    const again = app.services.doorbell.ring({ id: first.todoId, endpoint_id: e.id, queue: 'reviews', title: 'first', kind: null });
    expect(again.rung).toBe(true);
    await until(async () => (await ringsOf(first.todoId)).length === 2, 'the re-ring record');
    app.clock.advance(1000);
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: first.todoId } });
    for (const r of await ringsOf(first.todoId)) expect(r).toMatchObject({ acked_at: app.clock.now(), ack_via: 'claim', acked_session_id: a.sessionId });
    expect(await ringById(second.ring.ring_id)).toMatchObject({ acked_at: null });
  });

  it('a digest ring is acknowledged by any claim after it was sent', async () => {
    const e = await vend();
    const a = await agent(e);
    await a.call('clock_out');
    const held = await push(e, 'held');
    await a.call('clock_in');
    await until(() => a.heard.length === 1, 'the digest');
    const ringId = a.heard[0]!.params.meta.ring_id!;
    await until(async () => (await ringById(ringId)) !== undefined, 'the digest ring');
    const t = await agent(e, app, 'worker');
    const before = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' });
    app.clock.advance(2000);
    expect(await t.call('claim', { id: held })).toMatchObject({ id: held, state: 'claimed' });
    expect(await ringById(ringId)).toMatchObject({ kind: 'digest', acked_at: app.clock.now(), ack_via: 'claim', acked_session_id: t.sessionId });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' })).toBe(before + 1);
  });

  it('ack_doorbell acknowledges without claiming, idempotently', async () => {
    const e = await vend();
    const a = await agent(e);
    const { todoId, ring } = await ringOne(e, a, 'busy worker');
    const before = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'ack' });
    app.clock.advance(3000);
    const ackedAt = app.clock.now();
    expect(await a.call('ack_doorbell', { ring_id: ring.ring_id })).toEqual({ ring_id: ring.ring_id, state: 'acknowledged' });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: ackedAt, ack_via: 'ack', acked_session_id: a.sessionId, unheard_at: null });
    expect(await todoRow(todoId)).toMatchObject({ state: 'pending', owner: null });
    app.clock.advance(3000);
    expect(await a.call('ack_doorbell', { ring_id: ring.ring_id })).toEqual({ ring_id: ring.ring_id, state: 'acknowledged' });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: ackedAt, ack_via: 'ack' });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'ack' })).toBe(before + 1);
    // A later claim of the todo changes nothing on the already acknowledged ring.
    expect(await a.call('claim', { id: todoId })).toMatchObject({ state: 'claimed' });
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: ackedAt, ack_via: 'ack' });
  });

  it("another endpoint's ring and a missing one get the identical not_found; a malformed id is invalid_argument", async () => {
    const owner = await vend();
    const other = await vend();
    const a = await agent(owner);
    const b = await agent(other);
    const { ring } = await ringOne(owner, a, "A's work");
    const missing = 'rg_' + '7'.repeat(26);
    const foreign = await b.call('ack_doorbell', { ring_id: ring.ring_id });
    const unknown = await b.call('ack_doorbell', { ring_id: missing });
    expect(foreign.error).toMatch(/^not_found: /);
    expect(foreign.error.replace(ring.ring_id, '<ring>')).toBe(unknown.error.replace(missing, '<ring>'));
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: null, ack_via: null, acked_session_id: null });
    for (const bad of ['rg_short', 'td_' + '0'.repeat(26), 'rg_' + 'a'.repeat(26), "rg_' or 1=1 --"]) {
      expect((await b.call('ack_doorbell', { ring_id: bad })).error).toMatch(/^invalid_argument: ring_id/);
    }
    expect((await b.call('ack_doorbell', {})).error).toMatch(/^invalid_argument: ring_id/);
    expect((await b.call('ack_doorbell', { ring_id: ring.ring_id, endpoint: owner.slug })).error).toMatch(/^invalid_argument/);
    expect(await ringById(ring.ring_id)).toMatchObject({ acked_at: null });
  });
});
/** Holds back `on`'s ring records until `release`, so that a test orders a claim before a record. */
function holdRecords(on: App = app): { release: () => void } {
  const held: (() => void)[] = [];
  const original = on.services.acks.recordWritten;
  on.services.acks.recordWritten = (ring, slug) => void held.push(() => original.call(on.services.acks, ring, slug));
  return {
    release: () => {
      on.services.acks.recordWritten = original;
      for (const record of held.splice(0)) record();
    },
  };
}

/** A todo rung to `a` whose ring record is held back: its id and the doorbell's ring id. */
async function rungUnrecorded(e: Vended, a: Awaited<ReturnType<typeof agent>>, title: string) {
  const hold = holdRecords();
  const todoId = await push(e, title);
  await until(() => a.heard.some((n) => n.params.meta.todo_id === todoId), 'the doorbell');
  await settle(); // the push's own todo_ready echo, gated
  const ringId = a.heard.find((n) => n.params.meta.todo_id === todoId)!.params.meta.ring_id!;
  expect(await ringById(ringId)).toBeUndefined();
  return { todoId, ringId, hold };
}

describe('ring records and claims agree whichever commits first (decision 12)', () => {
  it('a claim that commits before its ring is recorded: the record says acknowledged by that claim, counted once, never unheard', async () => {
    const e = await vend();
    const a = await agent(e);
    const { todoId, ringId, hold } = await rungUnrecorded(e, a, 'claimed at once');
    const acked = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' });
    app.clock.advance(1000);
    const claimedAt = app.clock.now();
    expect(await a.call('claim', { id: todoId })).toMatchObject({ id: todoId, state: 'claimed' });
    hold.release();
    let ring: RingRow | undefined;
    await until(async () => (ring = await ringById(ringId)) !== undefined, 'the ring record');
    expect(ring).toMatchObject({ acked_at: claimedAt, ack_via: 'claim', acked_session_id: a.sessionId, unheard_at: null });
    await until(async () => (await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' })) === acked + 1, 'the acknowledgement counted');
    const unheard = await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' });
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(0);
    expect(await ringById(ringId)).toMatchObject({ acked_at: claimedAt, unheard_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(unheard);
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' })).toBe(acked + 1);
  });

  it('a digest ring recorded after a claim of any todo of its endpoint is recorded as acknowledged by that claim', async () => {
    const e = await vend();
    const a = await agent(e);
    const todoId = await push(e, 'counted by the digest');
    await settle();
    const backlog = await pushEligibleBacklog(db.sql, e.id);
    const hold = holdRecords();
    app.clock.advance(1000);
    const digest = app.services.doorbell.deliverDigest(e.id, (ringId) => digestDoorbell(backlog, 'operator', app.clock.now(), ringId));
    const ringId = digest.rung ? digest.ringId : '';
    const acked = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' });
    app.clock.advance(1000);
    const claimedAt = app.clock.now();
    expect(await a.call('claim', { id: todoId })).toMatchObject({ state: 'claimed' });
    hold.release();
    let ring: RingRow | undefined;
    await until(async () => (ring = await ringById(ringId)) !== undefined, 'the digest ring record');
    expect(ring).toMatchObject({ kind: 'digest', acked_at: claimedAt, ack_via: 'claim', acked_session_id: a.sessionId, unheard_at: null });
    await until(async () => (await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' })) === acked + 1, 'the acknowledgement counted');
  });

  it('a record and a claim that cross (each commits unseen by the other) end acknowledged by that claim at the sweep, not unheard', async () => {
    const e = await vend();
    const a = await agent(e);
    const { todoId, ringId, hold } = await rungUnrecorded(e, a, 'crossed');
    app.clock.advance(1000);
    const claimedAt = app.clock.now();
    let claim!: Promise<any>;
    // The claim starts (taking its snapshot) and waits on the todo's row lock held here; the ring
    // record commits meanwhile, seeing the todo unclaimed; then the claim commits, not seeing the ring.
    await db.sql.begin(async (tx) => {
      await tx`select 1 from todos where id = ${todoId} for update`;
      claim = a.call('claim', { id: todoId });
      await until(
        async () => (await db.sql`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%update todos t set%'`).length > 0,
        'the claim to wait on the todo',
      );
      hold.release();
      await until(async () => (await ringById(ringId)) !== undefined, 'the ring record');
    });
    expect(await claim).toMatchObject({ id: todoId, state: 'claimed' });
    expect(await ringById(ringId)).toMatchObject({ acked_at: null, unheard_at: null });
    const acked = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' });
    const unheard = await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' });
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(0);
    expect(await ringById(ringId)).toMatchObject({ acked_at: claimedAt, ack_via: 'claim', acked_session_id: a.sessionId, unheard_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' })).toBe(acked + 1);
    expect(await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(unheard);
    expect(await app.services.acks.sweep()).toBe(0);
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'todo', via: 'claim' })).toBe(acked + 1);
  });
});

describe('self-test and failed writes', () => {
  it("a self-test claim acknowledges only its own ring: an open digest ring stays open and acknowledged_total{kind=digest} does not move", async () => {
    const e = await vend();
    const a = await agent(e);
    await push(e, 'waiting');
    await settle();
    const backlog = await pushEligibleBacklog(db.sql, e.id);
    const digest = app.services.doorbell.deliverDigest(e.id, (ringId) => digestDoorbell(backlog, 'operator', app.clock.now(), ringId));
    expect(digest.rung).toBe(true);
    const digestRing = digest.rung ? digest.ringId : '';
    await until(async () => (await ringById(digestRing)) !== undefined, 'the digest ring');
    const digestsAcked = await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' });
    const started = await a.call('test_doorbell');
    await until(() => a.tests().length === 1, 'the test doorbell', 10_000);
    const testRing = a.tests()[0]!.params.meta.ring_id!;
    await until(async () => (await ringById(testRing)) !== undefined, 'the test ring');
    app.clock.advance(1000);
    expect(await a.call('claim', { id: started.todo_id })).toMatchObject({ id: started.todo_id, self_test: true });
    expect(await ringById(testRing)).toMatchObject({ kind: 'test', synthetic: true, acked_at: app.clock.now(), ack_via: 'claim' });
    expect(await ringById(digestRing)).toMatchObject({ kind: 'digest', acked_at: null, ack_via: null });
    expect(await metric(app, 'switchboard_doorbell_rings_acknowledged_total', { kind: 'digest', via: 'claim' })).toBe(digestsAcked);
  });

  it('a doorbell written as its client closes the socket fails with write_failed: no ring, the stream detached, the drop logged', async () => {
    const e = await vend();
    const todoId = await push(e, 'rung into a closing socket');
    const sid = await streamlessSession(e);
    const stream = http.get(`${app.url}/mcp/${e.slug}`, { headers: { authorization: `Bearer ${e.token}`, accept: 'text/event-stream', 'mcp-session-id': sid } });
    stream.on('error', () => {});
    const session = app.services.sessions.all().find((s) => s.id === sid)!;
    await until(() => session.stream !== null, 'the stream to open');
    await settle();
    let outcome: ReturnType<typeof app.services.doorbell.ring> | undefined;
    // The doorbell is written after the server saw the socket go and before the registry heard of it.
    session.stream!.res.prependOnceListener('close', () => {
      outcome = app.services.doorbell.ring({ id: todoId, endpoint_id: e.id, queue: 'reviews', title: 'rung into a closing socket', kind: null });
    });
    stream.destroy();
    await until(() => outcome !== undefined, 'the doorbell write');
    expect(outcome).toEqual({ rung: false, reason: 'write_failed' });
    expect(session.stream).toBeNull();
    await settle();
    expect(await ringsOf(todoId)).toEqual([]);
    expect(logs.filter((l) => l.msg === 'doorbell dropped' && l.todo_id === todoId)).toEqual([expect.objectContaining({ slug: e.slug, cause: 'write_failed' })]);
  });
});

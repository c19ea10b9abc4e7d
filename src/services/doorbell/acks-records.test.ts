import { describe, expect, it } from 'vitest';
import type { App } from '../../app.ts';
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
    });
    await settle();
    expect(await ringsOf(todoId)).toHaveLength(1);
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore + 1);
  });

  it('a failed write (no stream open) creates no ring and still counts toward the write-failure warning', async () => {
    const e = await vend();
    const sid = await streamlessSession(e);
    const ringsBefore = await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' });
    const ids = [await push(e, 'one'), await push(e, 'two')];
    await settle();
    expect(logs.filter((l) => l.msg === 'doorbell undeliverable: consumer attached but receiving nothing' && l.session === sid)).toHaveLength(0);
    ids.push(await push(e, 'three'));
    await settle();
    for (const id of ids) expect(await ringsOf(id)).toEqual([]);
    expect(await ringsOfEndpoint(e.id)).toEqual([]);
    const warnings = logs.filter((l) => l.msg === 'doorbell undeliverable: consumer attached but receiving nothing' && l.session === sid);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, slug: e.slug, failures: 3, cause: 'no_stream' });
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

  it('a ring that cannot be recorded still delivers its doorbell, and is logged and counted (REQ-11)', async () => {
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
    const logged = logs.filter((l) => l.msg === 'could not record a doorbell ring' && l.todo_id === todoId);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 50, stage: 'ring record', slug: e.slug, ring_id: meta.ring_id, err: expect.stringMatching(/test_ring_store_down/) });
    // The pump is unaffected: the next doorbell is recorded as usual.
    app.clock.advance(1000);
    const next = await ringOne(e, a, 'after the store is back');
    expect(next.ring.kind).toBe('todo');
    expect(await metric(app, 'switchboard_doorbell_rings_total', { kind: 'todo' })).toBe(ringsBefore + 2);
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
    const again = app.doorbell.ring({ id: first.todoId, endpoint_id: e.id, queue: 'reviews', title: 'first', kind: null });
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
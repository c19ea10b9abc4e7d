import type { Counter } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { apiCaller, startTestApp } from '../../../test/support/app.ts';
import type { App } from '../../app.ts';
import { ManualClock } from '../../lib/clock.ts';
import { insertEventAndTodo } from '../../store/todos/index.ts';
import {
  agent,
  app,
  capturingLogger,
  db,
  extraApps,
  human,
  instrument,
  logs,
  metric,
  ringById,
  ringOne,
  type RingRow,
  ringsOfEndpoint,
  useAcksSuite,
  vend,
  WINDOW_MS,
} from '../../../test/support/doorbell-acks.ts';

// Doorbell acknowledgement end to end: the unheard sweep across instances and the per-session unheard mark.

useAcksSuite();

/** Every doorbell counter of one app, keyed like `name{label=value,...}`. */
async function doorbellCounters(on: App): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const name of ['switchboard_doorbell_rings_total', 'switchboard_doorbell_rings_acknowledged_total', 'switchboard_doorbell_rings_unheard_total']) {
    const { values } = await (on.services.metrics.registry.getSingleMetric(name) as Counter).get();
    for (const v of values) {
      const labels = Object.entries(v.labels)
        .sort()
        .map(([k, x]) => `${k}=${x}`)
        .join(',');
      out[`${name}{${labels}}`] = v.value;
    }
  }
  return out;
}

describe('unheard rings (REQ-4, REQ-12)', () => {
  it('a ring nobody acts on by the end of its window is unheard at the next sweep, counted once; a late claim changes no state or counter', async () => {
    app.clock.set('2026-10-01T10:00:00Z');
    const e = await vend();
    const a = await agent(e);
    const { todoId, ring } = await ringOne(e, a, 'nobody acts');
    expect(ring.sent_at).toEqual(new Date('2026-10-01T10:00:00Z'));
    const unheardBefore = await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' });

    app.clock.set('2026-10-01T10:14:59Z');
    expect(await app.services.acks.sweep()).toBe(0);
    app.clock.set('2026-10-01T10:15:00Z');
    expect(await app.services.acks.sweep()).toBe(0);
    expect(await ringById(ring.ring_id)).toMatchObject({ unheard_at: null, acked_at: null });

    app.clock.set('2026-10-01T10:15:30Z');
    expect(await app.services.acks.sweep()).toBe(1);
    expect(await ringById(ring.ring_id)).toMatchObject({ unheard_at: new Date('2026-10-01T10:15:30Z'), acked_at: null });
    expect(await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(unheardBefore + 1);
    app.clock.set('2026-10-01T10:16:00Z');
    expect(await app.services.acks.sweep()).toBe(0);
    expect(await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(unheardBefore + 1);

    const counters = await doorbellCounters(app);
    app.clock.set('2026-10-01T10:20:00Z');
    expect(await a.call('claim', { id: todoId })).toMatchObject({ state: 'claimed' });
    expect(await ringById(ring.ring_id)).toMatchObject({
      acked_at: new Date('2026-10-01T10:20:00Z'),
      ack_via: 'claim',
      acked_session_id: a.sessionId,
      unheard_at: new Date('2026-10-01T10:15:30Z'),
    });
    expect(await doorbellCounters(app)).toEqual(counters);
    // A late ack_doorbell of an unheard ring answers its terminal state and moves nothing either.
    const late = await ringOne(e, a, 'late ack');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(1);
    const afterSweep = await doorbellCounters(app);
    expect(await a.call('ack_doorbell', { ring_id: late.ring.ring_id })).toEqual({ ring_id: late.ring.ring_id, state: 'unheard' });
    expect(await ringById(late.ring.ring_id)).toMatchObject({ ack_via: 'ack', acked_at: app.clock.now(), unheard_at: expect.any(Date) });
    expect(await doorbellCounters(app)).toEqual(afterSweep);
  });

  it('two instances sweeping the same expired rings: each ring is claimed by exactly one, counted once in total', async () => {
    const b = instrument(await startTestApp(db.url, new ManualClock(app.clock.now())));
    extraApps.push(b);
    const e = await vend();
    const a = await agent(e);
    const rings: RingRow[] = [];
    for (let i = 0; i < 5; i++) rings.push((await ringOne(e, a, `expiring ${i}`)).ring);
    const before = (await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })) + (await metric(b, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' }));
    app.clock.advance(WINDOW_MS + 1000);
    b.clock.set(app.clock.now());
    const [fromA, fromB] = await Promise.all([app.services.acks.sweep(), b.services.acks.sweep()]);
    expect(fromA + fromB).toBe(5);
    const after = (await metric(app, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })) + (await metric(b, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' }));
    expect(after - before).toBe(5);
    for (const r of rings) expect((await ringById(r.ring_id))!.unheard_at).toEqual(app.clock.now());
    // Sweeping again, anywhere, changes nothing.
    expect(await Promise.all([app.services.acks.sweep(), b.services.acks.sweep()])).toEqual([0, 0]);
  });

  it('a claim racing the unheard sweep after the window ends each ring unheard whichever commits first, with exactly one counter increment', async () => {
    const e = await vend();
    const a = await agent(e);
    const before = await doorbellCounters(app);
    for (let i = 0; i < 20; i++) {
      app.clock.advance(60_000);
      const { todoId, ring } = await ringOne(e, a, `race ${i}`);
      app.clock.advance(WINDOW_MS + 1);
      const claim = () => a.call('claim', { id: todoId });
      const sweep = () => app.services.acks.sweep();
      const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
      // The claim travels over HTTP first; stagger the sweep across its flight so that each side commits first in some rounds.
      const [claimed] = await Promise.all([claim(), delay(i % 10).then(sweep)]);
      expect(claimed).toMatchObject({ id: todoId, state: 'claimed' });
      const r = (await ringById(ring.ring_id))!;
      expect(r.acked_at).toEqual(app.clock.now());
      expect(r.ack_via).toBe('claim');
      // The window ended at sent_at + window, before either came: unheard, whoever marked it.
      expect(r.unheard_at).not.toBeNull();
      expect(await app.services.acks.sweep()).toBe(0);
    }
    const after = await doorbellCounters(app);
    const delta = (k: string) => after[k]! - (before[k] ?? 0);
    expect(delta('switchboard_doorbell_rings_unheard_total{kind=todo}')).toBe(20);
    expect(delta('switchboard_doorbell_rings_total{kind=todo}')).toBe(20);
    for (const [k, v] of Object.entries(after)) {
      if (!/unheard_total\{kind=todo\}|rings_total\{kind=todo\}/.test(k)) expect(v, k).toBe(before[k]);
    }
  });

  it('the window ends at sent_at + window: a claim or ack after it is not in window though no sweep has run, and is counted unheard once', async () => {
    app.clock.set('2026-10-02T10:00:00Z');
    const e = await vend();
    const a = await agent(e);
    const onTime = await ringOne(e, a, 'claimed as the window ends');
    const late = await ringOne(e, a, 'claimed 25 s after the window');
    const acked = await ringOne(e, a, 'acked 25 s after the window');
    const before = await doorbellCounters(app);
    const windowEnd = new Date('2026-10-02T10:15:00Z');

    app.clock.set(windowEnd);
    expect(await a.call('claim', { id: onTime.todoId })).toMatchObject({ state: 'claimed' });
    expect(await ringById(onTime.ring.ring_id)).toMatchObject({ acked_at: windowEnd, unheard_at: null });

    app.clock.set('2026-10-02T10:15:25Z');
    expect(await a.call('claim', { id: late.todoId })).toMatchObject({ state: 'claimed' });
    expect(await ringById(late.ring.ring_id)).toMatchObject({ acked_at: app.clock.now(), ack_via: 'claim', unheard_at: windowEnd });
    expect(await a.call('ack_doorbell', { ring_id: acked.ring.ring_id })).toEqual({ ring_id: acked.ring.ring_id, state: 'unheard' });
    expect(await ringById(acked.ring.ring_id)).toMatchObject({ acked_at: app.clock.now(), ack_via: 'ack', unheard_at: windowEnd });

    const delta = async () => {
      const after = await doorbellCounters(app);
      return Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - (before[k] ?? 0)]).filter(([, d]) => d !== 0));
    };
    const expected = {
      'switchboard_doorbell_rings_acknowledged_total{kind=todo,via=claim}': 1,
      'switchboard_doorbell_rings_unheard_total{kind=todo}': 2,
    };
    expect(await delta()).toEqual(expected);
    // The sweep finds nothing left to mark, and a second acknowledgement changes nothing.
    app.clock.set('2026-10-02T10:15:30Z');
    expect(await app.services.acks.sweep()).toBe(0);
    expect(await a.call('ack_doorbell', { ring_id: late.ring.ring_id })).toEqual({ ring_id: late.ring.ring_id, state: 'unheard' });
    expect(await delta()).toEqual(expected);
  });

  it('SWITCHBOARD_DOORBELL_ACK_WINDOW sets the window of the rings an instance sends', async () => {
    const w = instrument(await startTestApp(db.url, new ManualClock(app.clock.now()), { env: { SWITCHBOARD_DOORBELL_ACK_WINDOW: '1m' } }));
    extraApps.push(w);
    const viaW = apiCaller(w.url, human.token);
    const e = await vend(['reviews'], viaW);
    const a = await agent(e, w);
    const { ring } = await ringOne(e, a, 'one-minute window', viaW, w);
    expect(ring.window_seconds).toBe(60);
    w.clock.advance(60_000);
    expect(await w.services.acks.sweep()).toBe(0);
    w.clock.advance(1000);
    expect(await w.services.acks.sweep()).toBe(1);
    expect(await ringById(ring.ring_id)).toMatchObject({ unheard_at: w.clock.now() });
    expect(await metric(w, 'switchboard_doorbell_rings_unheard_total', { kind: 'todo' })).toBe(1);
    expect(await ringsOfEndpoint(e.id)).toHaveLength(1);
    await w.stop();
  });
});

describe('per-session unheard detection (REQ-5)', () => {
  it('a session whose last 3 rings went unheard is marked once, listed, gauged, and cleared by an ack', async () => {
    const captured = capturingLogger();
    const u = instrument(await startTestApp(db.url, new ManualClock(app.clock.now()), { log: captured.log }));
    extraApps.push(u);
    const viaU = apiCaller(u.url, human.token);
    const e = await vend(['reviews'], viaU);
    const a = await agent(e, u);
    const rings: RingRow[] = [];
    for (let i = 0; i < 3; i++) {
      u.clock.advance(1000);
      rings.push((await ringOne(e, a, `ignored ${i}`, viaU, u)).ring);
    }
    const session = () => u.services.sessions.all().find((s) => s.id === a.sessionId)!;
    const marks = () => captured.lines.filter((l) => l.msg === 'session marked unheard: its last 3 doorbells reached it but nothing acted on them');
    const listed = async () => (await viaU('GET', '/api/v1/endpoints')).json.find((x: { slug: string }) => x.slug === e.slug);
    expect(await listed()).toMatchObject({ sessions: 1, unheard_sessions: 0 });
    // The gauge counts the unheard sessions in u's own registry (REQ-6).
    const gaugeBefore = await metric(u, 'switchboard_doorbell_unheard_sessions');

    // Scoped to this endpoint: u's clock runs ahead of app's, so a ring app writes meanwhile is already expired here.
    const unheard = async () => (await ringsOfEndpoint(e.id)).filter((r) => r.unheard_at !== null).map((r) => r.ring_id);

    // Two unheard is not yet a mark.
    u.clock.advance(WINDOW_MS - 500);
    await u.services.acks.sweep();
    expect(await unheard()).toEqual([rings[0]!.ring_id, rings[1]!.ring_id]);
    expect(session().unheard).toBe(false);
    u.clock.advance(1000);
    await u.services.acks.sweep();
    expect(await unheard()).toEqual(rings.map((r) => r.ring_id));
    expect(session().unheard).toBe(true);
    expect(marks()).toHaveLength(1);
    expect(marks()[0]).toMatchObject({ level: 40, slug: e.slug, session: a.sessionId, client: { name: 'claude-code', version: '2.1.0' } });
    expect(await listed()).toMatchObject({ sessions: 1, unheard_sessions: 1 });
    expect(await metric(u, 'switchboard_doorbell_unheard_sessions')).toBe(gaugeBefore + 1);
    // One warning per marking, however often the sweep runs.
    u.clock.advance(30_000);
    await u.services.acks.sweep();
    expect(marks()).toHaveLength(1);

    // Any acknowledgement clears the mark, and the sweep does not put it back.
    expect(await a.call('ack_doorbell', { ring_id: rings[0]!.ring_id })).toEqual({ ring_id: rings[0]!.ring_id, state: 'unheard' });
    expect(session().unheard).toBe(false);
    expect(await listed()).toMatchObject({ unheard_sessions: 0 });
    expect(await metric(u, 'switchboard_doorbell_unheard_sessions')).toBe(gaugeBefore);
    u.clock.advance(30_000);
    await u.services.acks.sweep();
    expect(session().unheard).toBe(false);
    expect(marks()).toHaveLength(1);
  });

  it('a busy worker with two unheard rings that claims any todo is not marked by the third', async () => {
    const e = await vend();
    const a = await agent(e);
    const session = () => app.services.sessions.all().find((s) => s.id === a.sessionId)!;
    // A todo that never rings (its delivery was not verified): claiming it acknowledges no ring.
    const quiet = await insertEventAndTodo(
      db.sql,
      { source: 'github', family: 'webhook', trustMode: 'signed', verified: false },
      { endpointId: e.id, queue: 'reviews', title: 'never rung' },
      app.clock.now(),
    );
    for (let i = 0; i < 2; i++) {
      app.clock.advance(1000);
      await ringOne(e, a, `ignored ${i}`);
    }
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(2);
    app.clock.advance(1000);
    expect(await a.call('claim', { id: quiet.todo.id })).toMatchObject({ id: quiet.todo.id, state: 'claimed' });
    app.clock.advance(1000);
    await ringOne(e, a, 'ignored 2');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(1);
    expect(session().unheard).toBe(false);
    expect(logs.filter((l) => l.msg?.startsWith('session marked unheard') && l.session === a.sessionId)).toEqual([]);
    // Three more unheard rings after that claim do mark it.
    for (let i = 3; i < 6; i++) {
      app.clock.advance(1000);
      await ringOne(e, a, `ignored ${i}`);
    }
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(3);
    expect(session().unheard).toBe(true);
  });

  it('a session that claims a rung todo late is not marked by its next unheard rings', async () => {
    const e = await vend();
    const a = await agent(e);
    const session = () => app.services.sessions.all().find((s) => s.id === a.sessionId)!;
    const first = await ringOne(e, a, 'first');
    app.clock.advance(1000);
    await ringOne(e, a, 'second');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(2);
    expect(await a.call('claim_next')).toMatchObject({ todo: { id: first.todoId } });
    app.clock.advance(1000);
    await ringOne(e, a, 'third');
    app.clock.advance(WINDOW_MS + 1000);
    expect(await app.services.acks.sweep()).toBe(1);
    expect(session().unheard).toBe(false);
  });
});
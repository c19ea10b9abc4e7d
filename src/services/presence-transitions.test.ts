import { beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestApp } from '../../test/support/app.ts';
import { push as pushVia, vend as vendVia, withApp, type Api, type TestApp, type TestDb } from '../../test/support/fixtures.ts';
import { connectAgent, settle, until, type Agent, type Vended } from '../../test/support/agents.ts';
import type { App } from '../app.ts';
import { AGENT } from '../domain/actor.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLogger } from '../lib/log.ts';
import { claimPresenceTransitions, readPresence } from '../store/presence.ts';
import { RETURN_DIGEST_GRACE_SECONDS } from '../store/todos/index.ts';
import { sweepOnce } from './maintenance/doorbell-sweep.ts';

/**
 * Presence transitions and their digests (SPEC-0022, DESIGN decision 9): whoever sees a return to
 * in first (sweep, evaluator, push path) claims it through one code path, and the claimant sends
 * the one digest; no todo is rung singly before that. Driven by the injected clock.
 */

const fixture = withApp({ clock: new ManualClock('2026-10-05T08:00:00Z') });
let db: TestDb;
let app: TestApp;
let api: Api;
beforeAll(() => void ({ db, app, api } = fixture));

const SHIFT = 'Mon-Fri 09:00-13:00';
const agent = (e: Vended, on: App = app): Promise<Agent> => connectAgent(on, e, { track: fixture.clients });
const vend = (): Promise<Vended> => vendVia(api, { name: 'agent', queues: ['reviews'] });
const push = async (e: Vended, title: string): Promise<string> => (await pushVia(api, e, { title, queue: 'reviews' })).id;
/** One sweep as the composed loop runs it (with the presence service). */
const sweep = (on: TestApp = app) =>
  sweepOnce({ sql: db.sql, clock: on.clock, log: createLogger('silent'), doorbell: on.services.doorbell, presence: on.services.presence });
const ringAttempts = async (ids: string[]) =>
  (await db.sql<{ ring_attempts: number }[]>`select ring_attempts from todos where id = any(${ids}::text[])`).map((r) => r.ring_attempts);
const lastRingedAt = async (id: string) => (await db.sql<{ last_ringed_at: Date | null }[]>`select last_ringed_at from todos where id = ${id}`)[0]!.last_ringed_at;

/** An endpoint held out by `hold` with `n` todos waiting and a connected agent; the clock then moves to `back`. */
async function heldWithBacklog(at: string, hold: (e: Vended) => Promise<unknown>, n: number, back: string) {
  app.clock.set(at);
  const e = await vend();
  await hold(e);
  const a = await agent(e);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await push(e, `held ${i}`));
  await settle();
  expect(a.heard).toEqual([]);
  app.clock.set(back);
  return { e, a, ids };
}

/** After the return: exactly one digest with this reason and count, no single doorbell, no ring charged. */
async function expectOneDigestOnly(a: Agent, ids: string[], reason: string) {
  await until(() => a.digests().length >= 1, `the ${reason} digest`);
  await settle(200);
  expect(a.heard).toHaveLength(1);
  expect(a.digests()[0]!.params.meta).toMatchObject({ reason, pending: String(ids.length) });
  expect(await ringAttempts(ids)).toEqual(ids.map(() => 0));
}

describe('a return to in rings no todo singly before its claimed digest, in either order of the loops', () => {
  const orders = {
    'the sweep ticks first': async () => {
      await sweep();
      await app.services.presence.evaluate();
    },
    'the evaluator ticks first': async () => {
      await app.services.presence.evaluate();
      await sweep();
    },
  };

  it.each(Object.keys(orders).map((o, i) => [o, i]))('at a shift start, when %s', async (order, i) => {
    const day = `2026-10-0${6 + (i as number)}`; // Tuesday, Wednesday
    const setShift = async (e: Vended) => expect((await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT })).status).toBe(200);
    const { a, ids } = await heldWithBacklog(`${day}T08:30:00Z`, setShift, 7, `${day}T09:00:10Z`);
    await orders[order as keyof typeof orders]();
    await expectOneDigestOnly(a, ids, 'shift_start');
    // And the next sweep still waits a full backoff from the digest.
    await sweep();
    expect(await ringAttempts(ids)).toEqual(ids.map(() => 0));
  });

  it.each(Object.keys(orders).map((o, i) => [o, i]))('when an override expires, when %s', async (order, i) => {
    const day = `2026-10-0${8 + (i as number)}`; // Thursday, Friday; no shift
    const clockOut = async (e: Vended) =>
      expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: `${day}T10:00:00Z` })).status).toBe(200);
    const { a, ids } = await heldWithBacklog(`${day}T09:30:00Z`, clockOut, 3, `${day}T10:00:10Z`);
    await orders[order as keyof typeof orders]();
    await expectOneDigestOnly(a, ids, 'override_end');
  });

  it('a todo pushed before any loop ticked claims the return itself: one digest counting it, no single ring', async () => {
    const day = '2026-10-12'; // Monday
    const setShift = async (e: Vended) => api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT });
    const { e, a, ids } = await heldWithBacklog(`${day}T08:30:00Z`, setShift, 2, `${day}T09:00:10Z`);
    ids.push(await push(e, 'arrives at the shift start'));
    await expectOneDigestOnly(a, ids, 'shift_start');
    expect((await readPresence(db.sql, e.id))!.presence_seen).toBe('in');
  });
});

describe('the digest reason', () => {
  it('is shift_start when a clock-out left over from yesterday ends at the shift start', async () => {
    app.clock.set('2026-10-13T08:00:00Z'); // Tuesday
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT });
    const a = await agent(e);
    app.clock.set('2026-10-13T14:00:00Z');
    expect(await a.call('clock_out')).toMatchObject({ presence: 'out', source: 'agent', until: '2026-10-14T09:00:00Z' });
    await push(e, 'waiting');
    app.clock.set('2026-10-14T09:00:05Z');
    await app.services.presence.evaluate();
    await until(() => a.digests().length >= 1, 'the digest');
    await settle(200);
    expect(a.digests().map((d) => d.params.meta.reason)).toEqual(['shift_start']);
    expect((await readPresence(db.sql, e.id))!.presence_changed_by).toBe('shift');
  });
});

describe('stale transitions', () => {
  it('a claim computed before a clock-out does not apply, and a stale `in` broadcast sends no digest', async () => {
    app.clock.set('2026-10-15T08:30:00Z'); // Thursday
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT });
    const a = await agent(e);
    await settle(); // the stream's attach is handled before the shift starts
    app.clock.set('2026-10-15T09:00:05Z');
    // An evaluator reads the row (the shift has started) ...
    const seen = (await readPresence(db.sql, e.id))!;
    // ... meanwhile the agent clocks out (this instance claims nothing: still out) ...
    await app.services.presence.setOverride(e.id, { override: 'out', overrideUntil: null, overrideSetAt: app.clock.now(), overrideBy: 'agent' }, AGENT);
    await push(e, 'held');
    // ... and then the stale evaluator claims what it computed.
    const from = { override: seen.presence_override, overrideSetAt: seen.override_set_at, shift: seen.shift };
    expect(await claimPresenceTransitions(db.sql, [{ endpointId: e.id, to: 'in', by: 'shift', reason: 'shift_start', from, record: { from: 'out', source: 'shift', until: null, reason: 'shift_start' } }], app.clock.now())).toEqual([]);
    expect(await readPresence(db.sql, e.id)).toMatchObject({ presence_seen: 'out', presence_override: 'out' });
    // A broadcast `in` that arrives late is re-checked against the row before any digest.
    await app.services.presence.onWakeup({ endpointId: e.id, change: 'in' });
    await app.services.presence.evaluate();
    await settle(200);
    expect(a.heard).toEqual([]);
  });
});

describe('the claimant sends its own digest', () => {
  it('even while its own listener hears nothing', async () => {
    app.clock.set('2026-10-16T10:00:00Z');
    const e = await vend();
    const a = await agent(e);
    await a.call('clock_out');
    await push(e, 'held');
    const deaf = vi.spyOn(app.services.presence, 'onWakeup').mockResolvedValue(undefined);
    try {
      app.clock.advance(60_000);
      expect(await a.call('clock_in')).toMatchObject({ presence: 'in', pending: 1 });
      await until(() => a.digests().length === 1, 'the clock_in digest');
    } finally {
      deaf.mockRestore();
    }
    expect(a.digests()[0]!.params.meta.reason).toBe('clock_in');
  });
});

describe('until on the wire', () => {
  it('is rounded up to the whole second, never earlier than the real change', async () => {
    app.clock.set('2026-10-19T20:00:00.400Z'); // Monday, after the shift
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT });
    const a = await agent(e);
    // In until 21:00:00.400: whole seconds may only say 21:00:01.
    expect(await a.call('clock_in', { for: '1h' })).toMatchObject({ presence: 'in', source: 'agent', until: '2026-10-19T21:00:01Z' });
    expect((await api('GET', `/api/v1/endpoints/${e.slug}/presence`)).json.until).toBe('2026-10-19T21:00:01Z');
    const listed = (await api('GET', '/api/v1/endpoints')).json.find((x: { slug: string }) => x.slug === e.slug);
    expect(listed.presence.until).toBe('2026-10-19T21:00:01Z');
  });
});

describe('digest count and mark', () => {
  it('a todo claimed while the digest counts is neither counted nor marked (SPEC-0022: the rows marked are the rows counted)', async () => {
    app.clock.set('2026-10-20T10:00:00Z');
    const e = await vend();
    const a = await agent(e);
    const ids = [await push(e, 'one'), await push(e, 'two')];
    await settle();
    await db.sql`update todos set last_ringed_at = null, last_ringed_by = null where id = any(${ids}::text[])`;
    app.clock.advance(1000);
    // A claim of the first holds its row while the digest's count-and-mark reaches it, and commits.
    const sent = await db.sql.begin(async (tx) => {
      await tx`update todos set state = 'claimed', owner = 'someone', claimed_at = now(), lease_expires_at = now() + interval '5 minutes' where id = ${ids[0]!}`;
      const sending = app.services.presence.sendDigest(e.id, 'operator', { since: app.clock.now() });
      await settle(100);
      return { sending };
    });
    expect(await sent.sending).toBe(true);
    expect(await lastRingedAt(ids[0]!)).toBeNull();
    expect(await lastRingedAt(ids[1]!)).toEqual(app.clock.now());
    await until(() => a.digests().length === 1, 'the digest');
    expect(a.digests()[0]!.params.meta).toMatchObject({ pending: '1' });
  });
});

describe('reconnect digests', () => {
  it('none while the endpoint is out', async () => {
    app.clock.set('2026-10-21T10:00:00Z');
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null });
    await push(e, 'held');
    app.clock.advance(12 * 3_600_000);
    const a = await agent(e);
    await settle(200);
    expect(a.heard).toEqual([]);
  });

  it('are limited per instance: one per 10 minutes on each', async () => {
    app.clock.set('2026-10-22T10:00:00Z');
    const b = await startTestApp(db.url, new ManualClock(app.clock.now()));
    try {
      const e = await vend();
      await push(e, 'waiting');
      const digestsOnReconnect = async (on: TestApp) => {
        const a = await agent(e, on);
        await settle(200);
        await a.client.close();
        await until(() => !on.services.sessions.sessionsOf(e.id).some((s) => s.stream), 'the stream to close');
        return a.digests().length;
      };
      expect(await digestsOnReconnect(app)).toBe(1);
      expect(await digestsOnReconnect(b)).toBe(1);
      for (const c of [app.clock, b.clock]) c.advance(5 * 60_000);
      expect(await digestsOnReconnect(app)).toBe(0);
      expect(await digestsOnReconnect(b)).toBe(0);
      for (const c of [app.clock, b.clock]) c.advance(5 * 60_000);
      expect(await digestsOnReconnect(app)).toBe(1);
    } finally {
      await b.stop();
    }
  });
});

describe('a missed broadcast', () => {
  it('is made up by the next evaluator pass (every 30 s): the other instance then holds doorbells', async () => {
    app.clock.set('2026-10-23T10:00:00Z');
    const b = await startTestApp(db.url, new ManualClock(app.clock.now()));
    try {
      const e = await vend();
      const onB = await agent(e, b);
      const missed = vi.spyOn(b.services.presence, 'onWakeup').mockResolvedValue(undefined);
      try {
        expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null })).status).toBe(200);
        await settle(200);
        expect(b.services.presence.presenceOf(e.id)).toBe('in');
      } finally {
        missed.mockRestore();
      }
      b.clock.advance(30_000);
      await b.services.presence.evaluate();
      expect(b.services.presence.presenceOf(e.id)).toBe('out');
      await push(e, 'held on B');
      await settle(200);
      expect(onB.heard).toEqual([]);
    } finally {
      await b.stop();
    }
  });
});

describe('two instances at a shift start', () => {
  /** At 08:30 on `day`, before the shift: a second instance B and an endpoint with the shift; B stops after `run`. */
  async function withTwoHeld(day: string, run: (b: TestApp, e: Vended) => Promise<void>) {
    app.clock.set(`${day}T08:30:00Z`);
    const b = await startTestApp(db.url, new ManualClock(app.clock.now()));
    try {
      const e = await vend();
      await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT });
      await run(b, e);
    } finally {
      await b.stop();
    }
  }
  const pushTwo = async (e: Vended) => [await push(e, 'one'), await push(e, 'two')];
  const shiftStarts = (day: string, b: TestApp) => {
    for (const c of [app.clock, b.clock]) c.set(`${day}T09:00:10Z`);
  };

  it('the sweep on B claims it: each instance sends its own session one digest (SPEC-0022: one per hosting instance), nobody is rung singly', async () => {
    const day = '2026-10-26'; // Monday
    await withTwoHeld(day, async (b, e) => {
      const [onA, onB] = [await agent(e, app), await agent(e, b)];
      const ids = await pushTwo(e);
      shiftStarts(day, b);
      await sweep(b);
      await sweep(app);
      await app.services.presence.evaluate();
      await until(() => onA.digests().length >= 1 && onB.digests().length >= 1, 'a digest on each instance');
      await settle(200);
      for (const on of [onA, onB]) {
        expect(on.heard.map((n) => n.params.meta.kind)).toEqual(['digest']);
        expect(on.digests()[0]!.params.meta).toMatchObject({ reason: 'shift_start', pending: '2' });
      }
      expect(await ringAttempts(ids)).toEqual([0, 0]);
    });
  });

  it('a sweep on the other instance between the claim and the digest rings nothing singly; with no digest written it rings after the grace, not a backoff later', async () => {
    const day = '2026-11-02'; // Monday
    await withTwoHeld(day, async (b, e) => {
      const onB = await agent(e, b);
      const ids = await pushTwo(e);
      shiftStarts(day, b);
      // A claims the return; B never hears its broadcast, so no digest is written anywhere.
      const deaf = vi.spyOn(b.services.presence, 'onWakeup').mockResolvedValue(undefined);
      try {
        expect(await app.services.presence.evaluate({ endpointId: e.id })).toBe(1);
        await b.services.presence.evaluate({ endpointId: e.id });
        expect(b.services.presence.presenceOf(e.id)).toBe('in');
        expect(await sweep(b)).toBe(0);
        expect(await ringAttempts(ids)).toEqual([0, 0]);
        // Issue 34 item 6: the held todos ring on their own schedule once the grace is over (they
        // were created half an hour ago), not a full backoff after the return no digest announced.
        for (const c of [app.clock, b.clock]) c.advance((RETURN_DIGEST_GRACE_SECONDS + 1) * 1000);
        expect(await sweep(b)).toBe(2);
        await until(() => onB.heard.length >= 2, 'the two rings');
        expect(onB.digests()).toEqual([]);
        expect(await ringAttempts(ids)).toEqual([1, 1]);
      } finally {
        deaf.mockRestore();
      }
    });
  });
});

describe('an override that runs out', () => {
  it('is cleared by the claim of the return, in the same update: no instance can read it gone while the return is unclaimed', async () => {
    // Last in the file: its clock is the latest, and going back would leave the rate limiters empty.
    // A separate clear before the claim let another instance read the row in between, find no
    // override, and claim the return as a shift start (seen in the postgres-restart fault test).
    await db.sql.unsafe(`
      create table override_clears (endpoint_id uuid, presence_seen text);
      create function log_override_clear() returns trigger language plpgsql as $$
      begin
        if old.presence_override is not null and new.presence_override is null then
          insert into override_clears values (new.id, new.presence_seen);
        end if;
        return new;
      end $$;
      create trigger log_override_clear after update on endpoints for each row execute function log_override_clear()`);
    try {
      app.clock.set('2026-11-02T09:30:00Z');
      const e = await vend();
      expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: '2026-11-02T10:00:00Z' })).status).toBe(200);
      app.clock.set('2026-11-02T10:00:10Z');
      await app.services.presence.evaluate();
      expect(await db.sql`select presence_seen from override_clears where endpoint_id = ${e.id}`).toEqual([{ presence_seen: 'in' }]);
      expect(await readPresence(db.sql, e.id)).toMatchObject({ presence_seen: 'in', presence_override: null, presence_change_reason: 'override_end' });
    } finally {
      await db.sql.unsafe('drop trigger log_override_clear on endpoints; drop function log_override_clear(); drop table override_clears');
    }
  });
});

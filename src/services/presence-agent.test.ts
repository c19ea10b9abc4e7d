import { Writable } from 'node:stream';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, vend as vendVia, withApp, type Api, type AppFixture, type TestApp, type TestDb, type Vended } from '../../test/support/fixtures.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLogger } from '../lib/log.ts';
import { settle, until } from '../../test/support/agents.ts';

/**
 * Who may change presence, and what every change leaves behind (SPEC-0022, ADR-0027 "The human
 * decides", DESIGN decision 8): an agent's clock_in never undoes its human's override, repeating
 * it changes nothing, and every write is logged and recorded with who and when.
 */

let logged: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    for (const line of chunk.toString().split('\n')) if (line.trim()) logged.push(JSON.parse(line));
    done();
  },
});

const MONDAY_2000 = '2026-09-21T20:00:00Z';
const fixture: AppFixture = withApp({ clock: new ManualClock(MONDAY_2000), log: createLogger('info', sink) });
let db: TestDb;
let app: TestApp;
let api: Api;
beforeAll(() => void ({ db, app, api } = fixture));
// Each test starts a week later (same weekday and hour), so the clock-driven rate limits refill.
let weeks = 0;
/** A time of the first test's week, moved to the current test's week. */
const w = (iso: string) => new Date(Date.parse(iso) + weeks * 7 * 86_400_000).toISOString().replace('.000Z', 'Z');
beforeEach(() => {
  weeks++;
  app.clock.set(w(MONDAY_2000));
  logged = [];
});

const vend = (): Promise<Vended> => vendVia(api, { name: 'agent', queues: ['reviews'] });
const row = async (id: string) =>
  (
    await db.sql`
      select presence_override, override_until, override_set_at, override_by, shift, presence_written_at, presence_written_by
      from endpoints where id = ${id}`
  )[0]!;
const writes = (slug: string) => logged.filter((l) => l.msg === 'presence written' && l.slug === slug);

describe("an agent's clock_in and its human's override", () => {
  it("clock_out then clock_in cannot undo the human's clock-out (DESIGN decision 8): the operator's override stays", async () => {
    const e = await vend();
    const a = await fixture.agent(e);
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null })).status).toBe(200);
    const before = await row(e.id);
    app.clock.advance(60_000);
    expect(await a.call('clock_out')).toMatchObject({ presence: 'out', source: 'operator' });
    expect(await row(e.id)).toEqual(before);
    const refused = await a.call('clock_in');
    expect(refused.error).toMatch(/^failed_precondition: /);
    expect(await a.call('presence')).toMatchObject({ presence: 'out', source: 'operator' });
    expect((await api('GET', `/api/v1/endpoints/${e.slug}/presence`)).json).toMatchObject({ presence: 'out', source: 'operator' });
  });

  it("is refused over the operator's clock-out with failed_precondition naming the human and the end; pulls still work", async () => {
    const e = await vend();
    const a = await fixture.agent(e);
    const until = w('2026-09-21T23:00:00Z');
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until })).status).toBe(200);
    const before = await row(e.id);
    const todo = (await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: 'held', queue: 'reviews' })).json.id;

    app.clock.advance(60_000);
    for (const args of [{}, { for: '2h' }]) {
      const refused = await a.call('clock_in', args);
      expect(refused.error).toMatch(/^failed_precondition: /);
      expect(refused.error).toContain(fixture.human.handle);
      expect(refused.error).toContain(until);
      expect(refused.error).toMatch(/list_todos and claim_next/);
      expect(refused.details).toMatchObject({ code: 'failed_precondition', set_by: `operator:${fixture.human.id}`, until });
    }
    expect(await row(e.id)).toEqual(before);
    expect(await a.call('presence')).toMatchObject({ presence: 'out', source: 'operator', until });
    expect(writes(e.slug)).toHaveLength(1); // the operator's; the refusals wrote nothing
    expect(await a.call('claim_next')).toMatchObject({ empty: false, todo: { id: todo } });
  });

  it("leaves the operator's in untouched, and the agent's clock_out may still end it", async () => {
    const e = await vend();
    const a = await fixture.agent(e);
    await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'in', until: null });
    const before = await row(e.id);
    app.clock.advance(60_000);
    expect(await a.call('clock_in')).toMatchObject({ presence: 'in', source: 'operator' });
    expect(await row(e.id)).toEqual(before);
    expect(await a.call('clock_out')).toMatchObject({ presence: 'out', source: 'agent', until: null });
    expect((await row(e.id)).override_by).toBe('agent');
  });
});

describe('clock_in is idempotent', () => {
  it('repeating {for: "2h"} while its in override is live changes nothing: same until, nothing written', async () => {
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'Mon-Fri 09:00-13:00' });
    const a = await fixture.agent(e);
    const first = await a.call('clock_in', { for: '2h' });
    expect(first).toMatchObject({ presence: 'in', source: 'agent', until: w('2026-09-21T22:00:00Z') });
    const stored = await row(e.id);
    app.clock.advance(30 * 60_000);
    expect(await a.call('clock_in', { for: '2h' })).toEqual(first);
    app.clock.advance(60 * 60_000);
    expect(await a.call('clock_in', { for: '8h' })).toEqual(first);
    expect(await row(e.id)).toEqual(stored);
    expect(writes(e.slug).filter((l) => l.by === 'agent')).toHaveLength(1);
  });
});

describe('every presence write is audited', () => {
  it('logs slug, old and new presence, source and until, and records who and when, also when presence stays the same', async () => {
    const e = await vend();
    const a = await fixture.agent(e);
    const human = `operator:${fixture.human.id}`;

    // A shift that puts the endpoint out (Monday 20:00 is outside it): a shift write, by the operator.
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'Mon-Fri 09:00-13:00' });
    expect(writes(e.slug).at(-1)).toMatchObject({ write: 'shift', by: human, at: w(MONDAY_2000), from: 'in', to: 'out', source: 'shift', until: w('2026-09-22T09:00:00Z') });
    expect(await row(e.id)).toMatchObject({ presence_written_by: human, presence_written_at: new Date(w(MONDAY_2000)) });

    // An operator clock-out while already out by the shift changes no presence, and is still logged.
    app.clock.advance(60_000);
    await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: null });
    expect(writes(e.slug).at(-1)).toMatchObject({ write: 'override', by: human, from: 'out', to: 'out', source: 'operator', until: w('2026-09-22T09:00:00Z') });

    // A shift change while out: logged, recorded.
    app.clock.advance(60_000);
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'Mon-Fri 08:00-12:00' });
    expect(writes(e.slug).at(-1)).toMatchObject({ write: 'shift', by: human, from: 'out', to: 'out' });
    expect((await row(e.id)).presence_written_at).toEqual(app.clock.now());

    // The agent's clock_out over it keeps the operator's override and writes nothing (decision 8);
    // then the operator's clear.
    app.clock.advance(60_000);
    expect(await a.call('clock_out')).toMatchObject({ presence: 'out', source: 'operator' });
    expect(writes(e.slug)).toHaveLength(3);
    app.clock.advance(60_000);
    await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`);
    expect(writes(e.slug).at(-1)).toMatchObject({ write: 'override', by: human, from: 'out', to: 'out', source: 'shift' });
    // The agent's own clock_out, a write of its own.
    app.clock.advance(60_000);
    await a.call('clock_out');
    expect(writes(e.slug).at(-1)).toMatchObject({ write: 'override', by: 'agent', from: 'out', to: 'out', source: 'agent' });
    expect(await row(e.id)).toMatchObject({ presence_written_by: 'agent', presence_written_at: app.clock.now() });
    expect(writes(e.slug)).toHaveLength(5);
    for (const line of writes(e.slug)) expect(Object.keys(line)).toEqual(expect.arrayContaining(['slug', 'from', 'to', 'source', 'until', 'by', 'at']));
  });

  it('an override running out is recorded as changed by shift, and the digest on another instance still says override_end', async () => {
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: w('2026-09-21T21:00:00Z') });
    const b = await startTestApp(db.url, new ManualClock(app.clock.now()));
    try {
      const onB = await fixture.agent(e, b);
      await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: 'held', queue: 'reviews' });
      // The stream's attach and the push's wakeup are handled before the override runs out, so the
      // evaluator on A, not a late wakeup on B, is the one that sees the return.
      await settle(200);
      app.clock.set(w('2026-09-21T21:00:01Z'));
      b.clock.set(w('2026-09-21T21:00:01Z'));
      expect(await app.services.presence.evaluate({ endpointId: e.id })).toBe(1);
      const [changed] = await db.sql`select presence_seen, presence_changed_by from endpoints where id = ${e.id}`;
      expect(changed).toEqual({ presence_seen: 'in', presence_changed_by: 'shift' });
      await until(() => onB.digests().length === 1, "B's digest");
      expect(onB.digests()[0]!.params.meta).toMatchObject({ kind: 'digest', reason: 'override_end', pending: '1' });
    } finally {
      await b.stop();
    }
  });
});

import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, vend as vendVia, withApp, type Api, type AppFixture, type TestApp, type TestDb, type Vended } from '../../test/support/fixtures.ts';
import { ManualClock } from '../lib/clock.ts';

/**
 * Presence history (issue 39 item 2): every change of an endpoint's effective presence leaves
 * exactly one row, whoever or whatever made it (the agent's verbs over MCP, the operator's API,
 * a shift boundary, an override running out), written by the claim that decided it; a write that
 * leaves the effective presence as it was leaves none; two instances record a change once.
 */

const MONDAY_0830 = '2026-10-05T08:30:00Z';
const fixture: AppFixture = withApp({ clock: new ManualClock(MONDAY_0830) });
let db: TestDb;
let app: TestApp;
let api: Api;
beforeAll(() => void ({ db, app, api } = fixture));
// Each test runs a week after the last one (same weekday and hour): the rate limits refill.
let weeks = 0;
const w = (iso: string) => new Date(Date.parse(iso) + weeks * 7 * 86_400_000);
const at = (iso: string) => w(iso).toISOString().replace('.000Z', 'Z');
beforeEach(() => {
  weeks++;
  app.clock.set(w(MONDAY_0830));
});

const SHIFT = 'Mon-Fri 09:00-13:00';
const vend = (): Promise<Vended> => vendVia(api, { name: 'agent', queues: ['reviews'] });
const history = async (e: Vended) =>
  db.sql`
    select at, from_presence as from, to_presence as to, source, changed_by as by, reason, until
    from presence_history where endpoint_id = ${e.id} order by id`;
const operator = () => `operator:${fixture.human.id}`;
/** The evaluator's pass (every endpoint, as the loop ticks it) at `iso` of this test's week. */
const evaluateAt = async (iso: string): Promise<void> => {
  app.clock.set(w(iso));
  await app.services.presence.evaluate();
};
const rows = async (e: Vended) => (await history(e)).length;

describe('a change by a write leaves one row, at the write', () => {
  it("the agent's clock_out and clock_in over MCP; repeating one writes nothing more", async () => {
    const e = await vend();
    const a = await fixture.agent(e);
    expect(await a.call('clock_out')).toMatchObject({ presence: 'out', source: 'agent' });
    app.clock.advance(60_000);
    await a.call('clock_out');
    app.clock.advance(60_000);
    expect(await a.call('clock_in')).toMatchObject({ presence: 'in', source: 'default' });
    expect(await history(e)).toEqual([
      { at: w(MONDAY_0830), from: 'in', to: 'out', source: 'agent', by: 'agent', reason: 'clock_out', until: null },
      { at: w('2026-10-05T08:32:00Z'), from: 'out', to: 'in', source: 'default', by: 'agent', reason: 'clock_in', until: null },
    ]);
  });

  it("the operator's PUT and DELETE presence; a PUT that keeps it in writes none", async () => {
    const e = await vend();
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'in', until: null })).status).toBe(200);
    expect(await history(e)).toEqual([]);
    app.clock.advance(60_000);
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: at('2026-10-05T12:00:00Z') })).status).toBe(200);
    app.clock.advance(60_000);
    expect((await api('DELETE', `/api/v1/endpoints/${e.slug}/presence`)).status).toBe(200);
    expect(await history(e)).toEqual([
      { at: w('2026-10-05T08:31:00Z'), from: 'in', to: 'out', source: 'operator', by: operator(), reason: 'operator', until: w('2026-10-05T12:00:00Z') },
      { at: w('2026-10-05T08:32:00Z'), from: 'out', to: 'in', source: 'default', by: operator(), reason: 'operator', until: null },
    ]);
  });
});

describe('a change by time leaves one row, at the evaluation that claims it', () => {
  it('a shift starting and ending; a shift edit that keeps it in writes none', async () => {
    const e = await vend();
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT })).status).toBe(200);
    await evaluateAt('2026-10-05T08:59:59Z');
    expect(await rows(e)).toBe(1);
    await evaluateAt('2026-10-05T09:00:05Z');
    await evaluateAt('2026-10-05T09:00:35Z');
    // Inside the shift, a longer shift keeps the endpoint in: written, audited, not a change.
    expect((await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: 'Mon-Fri 08:00-14:00' })).status).toBe(200);
    await evaluateAt('2026-10-05T13:00:05Z');
    await evaluateAt('2026-10-05T14:00:30Z');
    expect(await history(e)).toEqual([
      { at: w(MONDAY_0830), from: 'in', to: 'out', source: 'shift', by: operator(), reason: 'shift_edit', until: w('2026-10-05T09:00:00Z') },
      { at: w('2026-10-05T09:00:05Z'), from: 'out', to: 'in', source: 'shift', by: 'shift', reason: 'shift_start', until: w('2026-10-05T13:00:00Z') },
      { at: w('2026-10-05T14:00:30Z'), from: 'in', to: 'out', source: 'shift', by: 'shift', reason: 'shift_end', until: w('2026-10-06T08:00:00Z') },
    ]);
  });

  it("an operator's clock-out running out (no shift), and an agent's clock-in running out outside its shift", async () => {
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence: 'out', until: at('2026-10-05T10:00:00Z') });
    await evaluateAt('2026-10-05T10:00:10Z');
    expect((await history(e)).at(-1)).toEqual({ at: w('2026-10-05T10:00:10Z'), from: 'out', to: 'in', source: 'default', by: 'shift', reason: 'override_end', until: null });

    const f = await vend();
    app.clock.set(w('2026-10-05T14:00:00Z'));
    await api('PUT', `/api/v1/endpoints/${f.slug}/shift`, { shift: SHIFT });
    const a = await fixture.agent(f);
    expect(await a.call('clock_in', { for: '1h' })).toMatchObject({ presence: 'in', source: 'agent', until: at('2026-10-05T15:00:00Z') });
    await evaluateAt('2026-10-05T15:00:01Z');
    expect(await history(f)).toEqual([
      { at: w('2026-10-05T14:00:00Z'), from: 'in', to: 'out', source: 'shift', by: operator(), reason: 'shift_edit', until: w('2026-10-06T09:00:00Z') },
      { at: w('2026-10-05T14:00:00Z'), from: 'out', to: 'in', source: 'agent', by: 'agent', reason: 'clock_in', until: w('2026-10-05T15:00:00Z') },
      { at: w('2026-10-05T15:00:01Z'), from: 'in', to: 'out', source: 'shift', by: 'shift', reason: 'override_end', until: w('2026-10-06T09:00:00Z') },
    ]);
  });

  it("a clock-out inside the shift ends with it (no change: out either way); the next morning's return is the shift starting", async () => {
    const e = await vend();
    await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT });
    await evaluateAt('2026-10-05T09:00:01Z');
    const a = await fixture.agent(e);
    app.clock.set(w('2026-10-05T10:00:00Z'));
    expect(await a.call('clock_out')).toMatchObject({ presence: 'out', source: 'agent', until: at('2026-10-06T09:00:00Z') });
    // 13:00: the clock-out ends at the shift's end, where the shift is out too: no row.
    await evaluateAt('2026-10-05T13:00:01Z');
    await evaluateAt('2026-10-06T09:00:01Z');
    expect((await history(e)).slice(2)).toEqual([
      { at: w('2026-10-05T10:00:00Z'), from: 'in', to: 'out', source: 'agent', by: 'agent', reason: 'clock_out', until: w('2026-10-06T09:00:00Z') },
      { at: w('2026-10-06T09:00:01Z'), from: 'out', to: 'in', source: 'shift', by: 'shift', reason: 'shift_start', until: w('2026-10-06T13:00:00Z') },
    ]);
  });
});

describe('two instances on one database', () => {
  it('record a change by time once, whichever evaluates, and together', async () => {
    const b = await startTestApp(db.url, new ManualClock(app.clock.now()));
    try {
      const e = await vend();
      await api('PUT', `/api/v1/endpoints/${e.slug}/shift`, { shift: SHIFT });
      for (const [i, t] of ['2026-10-05T09:00:02Z', '2026-10-05T13:00:02Z', '2026-10-06T09:00:02Z'].entries()) {
        app.clock.set(w(t));
        b.clock.set(w(t));
        // Both evaluators at once, and B's claim path for this endpoint (a push or a sweep finding it unclaimed).
        await Promise.all([app.services.presence.evaluate(), b.services.presence.evaluate(), b.services.presence.claim(e.id)]);
        // And again, one after the other: nothing new.
        await b.services.presence.evaluate();
        await app.services.presence.evaluate();
        expect(await rows(e)).toBe(i + 2);
      }
      expect((await history(e)).map((r) => `${r.reason} ${r.to}`)).toEqual(['shift_edit out', 'shift_start in', 'shift_end out', 'shift_start in']);
    } finally {
      await b.stop();
    }
  });
});

import { describe, expect, it } from 'vitest';
import { app, expectError, expectInvalid, operator, revoke, useOperatorApiSuite, vend, wire, type Operator } from '../../test/support/operator-api.ts';

// GET /api/v1/endpoints/{ref}/presence/history over real HTTP: the endpoint's presence changes,
// newest first, since 7 days ago unless `since` says otherwise, at most `limit` (200; 1000).

useOperatorApiSuite();

const DAY = 86_400_000;
const historyPath = (ref: string, query = '') => `/api/v1/endpoints/${encodeURIComponent(ref)}/presence/history${query}`;
const clock = async (op: Operator, ref: string, presence: 'in' | 'out', until: string | null = null) =>
  expect((await op.call('PUT', `/api/v1/endpoints/${encodeURIComponent(ref)}/presence`, { presence, until })).status).toBe(200);

describe('GET /api/v1/endpoints/{ref}/presence/history', () => {
  it('lists the changes newest first, in the wire shape, since 7 days ago by default', async () => {
    const op = await operator();
    const e = await vend(op);
    const first = app.clock.now();
    await clock(op, e.slug, 'out');
    app.clock.advance(8 * DAY);
    await clock(op, e.slug, 'in');
    app.clock.advance(60_000);
    const until = wire(new Date(app.clock.now().getTime() + 3_600_000));
    await clock(op, e.slug, 'out', until);
    const now = app.clock.now();

    const res = await op.call('GET', historyPath(e.slug));
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({
      since: wire(new Date(now.getTime() - 7 * DAY)),
      changes: [
        { at: wire(now), from: 'in', to: 'out', source: 'operator', by: `operator:${op.id}`, by_handle: op.handle, reason: 'operator', until },
        { at: wire(new Date(now.getTime() - 60_000)), from: 'out', to: 'in', source: 'operator', by: `operator:${op.id}`, by_handle: op.handle, reason: 'operator', until: null },
      ],
    });
    // An older `since` reaches the first change; by id as by slug.
    const all = await op.call('GET', historyPath(e.id, `?since=${wire(first)}`));
    expect(all.json.since).toBe(wire(first));
    expect(all.json.changes.map((c: { to: string }) => c.to)).toEqual(['out', 'in', 'out']);
    // An offset is read as the instant it names.
    const offset = await op.call('GET', historyPath(e.slug, `?since=${encodeURIComponent(wire(first).replace('Z', '+00:00'))}`));
    expect(offset.json.changes).toHaveLength(3);
    // `limit` keeps the newest.
    const one = await op.call('GET', historyPath(e.slug, `?since=${wire(first)}&limit=1`));
    expect(one.json.changes.map((c: { at: string }) => c.at)).toEqual([wire(now)]);
  });

  it('refuses a bad since or limit naming the field, and any other parameter', async () => {
    const op = await operator();
    const e = await vend(op);
    for (const q of ['?since=yesterday', '?since=2026-13-01T00:00:00Z', '?since=2026-01-01']) expectInvalid(await op.call('GET', historyPath(e.slug, q)), 'since');
    for (const q of ['?limit=0', '?limit=1001', '?limit=ten', '?limit=-1']) expectInvalid(await op.call('GET', historyPath(e.slug, q)), 'limit');
    expect((await op.call('GET', historyPath(e.slug, '?limit=1000'))).status).toBe(200);
    expectError(await op.call('GET', historyPath(e.slug, '?queue=x')), 400, 'invalid_argument', { field: 'queue' });
  });

  it("answers another human's endpoint like an unknown one (404), and keeps a revoked endpoint's history readable", async () => {
    const owner = await operator();
    const stranger = await operator();
    const e = await vend(owner);
    await clock(owner, e.slug, 'out');
    const unknown = await stranger.call('GET', historyPath('no-such-endpoint'));
    expectError(unknown, 404, 'not_found');
    for (const ref of [e.slug, e.id]) {
      const res = await stranger.call('GET', historyPath(ref));
      expectError(res, 404, 'not_found');
      expect(res.json.error).toBe(unknown.json.error.replace('no-such-endpoint', ref));
    }
    expect((await revoke(owner, e.slug)).status).toBe(200);
    const kept = await owner.call('GET', historyPath(e.slug));
    expect(kept.status).toBe(200);
    expect(kept.json.changes.map((c: { reason: string; to: string }) => `${c.reason} ${c.to}`)).toEqual(['operator out']);
  });
});

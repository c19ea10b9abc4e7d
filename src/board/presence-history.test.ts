import { describe, expect, it } from 'vitest';
import { alice, app, bob, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';

// The board's "Presence this week" on an endpoint's page: the endpoint's presence changes of the
// last 7 days, newest first, as a plain table (no script), with what the week began with.

useBoardSuite();

const DAY = 86_400_000;

/** The rows of the page's presence table: [change, by, reason] each. */
const weekRows = (page: string) =>
  [...page.matchAll(/<tr class="presence-change presence-(in|out)">(.*?)<\/tr>/gs)].map((m) => {
    const cells = [...m[2]!.matchAll(/<td[^>]*>(.*?)<\/td>/gs)].map((c) => c[1]!.replace(/<[^>]+>/g, '').trim());
    const reason = /data-reason="([a-z_]+)"/.exec(m[2]!)![1]!;
    return [cells[1], cells[3], reason];
  });

describe('Presence this week', () => {
  it("lists the week's changes newest first, by the human or the clock, and says what the week began with", async () => {
    const e = await vend(alice, 'weekly');
    let b = await signedIn(alice);
    expect(weekRows((await b.get(`/endpoints/${e.id}`)).text)).toEqual([]);
    expect((await b.get(`/endpoints/${e.id}`)).text).toContain('No presence changes in the last 7 days.');

    // Eight days ago: clocked out from the board (outside the week, but what it began with).
    expect((await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: '', csrf_token: b.csrfToken })).status).toBe(303);
    app.clock.advance(8 * DAY);
    b = await signedIn(alice);
    expect((await b.post(`/endpoints/${e.id}/presence`, { presence: 'in', until: '', csrf_token: b.csrfToken })).status).toBe(303);
    app.clock.advance(60_000);
    expect((await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: '30m', csrf_token: b.csrfToken })).status).toBe(303);
    // The clock-out runs out; the evaluator's pass claims the return.
    app.clock.advance(30 * 60_000 + 5_000);
    await app.services.presence.evaluate();

    const page = (await b.get(`/endpoints/${e.id}`)).text;
    expect(page).toContain('<h2>Presence this week</h2>');
    expect(weekRows(page)).toEqual([
      ['out → in', 'the clock', 'override_end'],
      ['in → out', alice.handle, 'operator'],
      ['out → in', alice.handle, 'operator'],
    ]);
    expect(page).toContain('a clock-in or clock-out ran out');
    expect(page).toMatch(/The week began <strong>out<\/strong>/);
    // No script needed: a plain table, and the page's policy forbids inline script anyway.
    expect(page).not.toMatch(/<script>[^<]/);

    // Another human's endpoint page is not theirs to see.
    const other = await signedIn(bob);
    const refused = await other.get(`/endpoints/${e.id}`);
    expect(refused.status).toBe(404);
    expect(refused.text).not.toContain('Presence this week');
  });
});

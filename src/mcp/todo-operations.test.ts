import { beforeAll, describe, expect, it } from 'vitest';
import { settle, until } from '../../test/support/agents.ts';
import { push, vend, withApp, type Api, type TestApp } from '../../test/support/fixtures.ts';
import { createLogger } from '../lib/log.ts';
import { reapOnce } from '../services/maintenance/reaper.ts';

// Todo operations as an agent sees them, through the MCP SDK's own Client over real HTTP:
// list_todos pages and dead letters, delayed todos ringing once due, a cancel taking a claim away,
// and a retried dead letter ringing again.

const fixture = withApp({ refillMs: 60_000 });
let app: TestApp;
let api: Api;
beforeAll(() => void ({ app, api } = fixture));

const todoPath = (slug: string, id: string, action: string) => `/api/v1/endpoints/${slug}/todos/${id}/${action}`;
const announced: { due: string[]; requeued: string[] } = { due: [], requeued: [] };
/** The reaper with the app's own TodoEvents, watched: which todos it announced, and how. */
const reap = () => {
  const events = app.services.events;
  return reapOnce({
    sql: app.sql,
    clock: app.clock,
    log: createLogger('silent'),
    events: {
      becameClaimable: (todos, how, broadcast) => {
        if (how === 'due' || how === 'requeued') announced[how].push(...todos.filter((t) => t.pushEligible).map((t) => t.todo.id));
        events.becameClaimable(todos, how, broadcast);
      },
    },
  });
};
const rungFor = (heard: { params: { meta: Record<string, string> } }[], id: string) => heard.filter((n) => n.params.meta.todo_id === id);

describe('list_todos', () => {
  it('pages with cursor until next_cursor is null, and state dead lists dead letters marked dead: true', async () => {
    const e = await vend(api, { name: 'pager', queues: ['inbox'] });
    const a = await fixture.agent(e);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      app.clock.advance(1000);
      ids.push((await push(api, e, { title: `t${i}`, max_attempts: 1 })).id);
    }
    const pages: string[][] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await a.call('list_todos', { limit: 2, ...(cursor ? { cursor } : {}) });
      pages.push(page.todos.map((t: { id: string }) => t.id));
      if (page.next_cursor === null) break;
      cursor = page.next_cursor;
    }
    const newest = [...ids].reverse();
    expect(pages).toEqual([newest.slice(0, 2), newest.slice(2, 4), newest.slice(4)]);

    // ids[0] becomes a dead letter (one attempt, failed); ids[1] is claimed, not dead.
    expect(await a.call('claim', { id: ids[0] })).toMatchObject({ id: ids[0] });
    expect(await a.call('fail', { id: ids[0], result: { why: 'broken' } })).toMatchObject({ dead: true });
    await a.call('claim', { id: ids[1] });
    expect((await a.call('list_todos', { state: 'dead' })).todos).toEqual([expect.objectContaining({ id: ids[0], state: 'failed', dead: true })]);
    expect((await a.call('list_todos', { state: 'claimed' })).todos).toEqual([expect.not.objectContaining({ dead: true })]);

    const bad = await a.call('list_todos', { cursor: 'not-a-cursor' });
    expect(bad.error).toMatch(/^invalid_argument: cursor/);
  });
});

describe('delayed todos', () => {
  it('ring once the reaper finds them due, not before', async () => {
    const e = await vend(api, { name: 'later', queues: ['inbox'] });
    const a = await fixture.agent(e);
    const { id } = await push(api, e, { title: 'in ten minutes', delay: '10m' });
    await settle();
    await reap();
    await settle();
    expect(rungFor(a.heard, id)).toEqual([]);
    expect(await a.call('claim_next')).toEqual({ empty: true });

    app.clock.advance(10 * 60_000);
    const { released } = await reap();
    expect(released.map((m) => m.id)).toEqual([id]);
    // The notify hooks hear of it as ready for the first time (created), not as requeued.
    expect(announced).toEqual({ due: [id], requeued: [] });
    await until(() => rungFor(a.heard, id).length === 1, 'the doorbell of the todo that came due');
    expect(await a.call('claim_next')).toMatchObject({ todo: { id } });
  });
});

describe('cancel and retry', () => {
  it("a cancel takes the claim away: the agent's complete is a conflict; a retried dead letter rings again", async () => {
    const e = await vend(api, { name: 'ops', queues: ['inbox'] });
    const a = await fixture.agent(e);
    const held = await push(api, e, { title: 'held' });
    const claimed = await a.call('claim', { id: held.id, require_fence: true });
    expect((await api('POST', todoPath(e.slug, held.id, 'cancel'))).status).toBe(200);
    const refused = await a.call('complete', { id: held.id, lease_token: claimed.lease_token, result: { ok: true } });
    expect(refused.error).toMatch(/^conflict: .*canceled/);
    expect(await a.call('get_todo', { id: held.id })).toMatchObject({ state: 'canceled', result: expect.objectContaining({ previous_state: 'claimed' }) });

    const dead = await push(api, e, { title: 'dead', max_attempts: 1 });
    await until(() => rungFor(a.heard, dead.id).length === 1, 'the first doorbell');
    await a.call('claim', { id: dead.id });
    await a.call('fail', { id: dead.id });
    // A todo rings at most once a minute (the creation gate absorbs double fires).
    app.clock.advance(61_000);
    const retried = await api('POST', todoPath(e.slug, dead.id, 'retry'));
    expect(retried.json).toMatchObject({ state: 'pending', attempt: 0 });
    await until(() => rungFor(a.heard, dead.id).length === 2, 'the doorbell of the retried todo');
  });
});

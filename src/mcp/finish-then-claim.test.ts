import { beforeAll, describe, expect, it } from 'vitest';
import { until, untilRingRecorded } from '../../test/support/agents.ts';
import { push, vend, withApp, type Api, type TestApp } from '../../test/support/fixtures.ts';

// `next` on complete and fail, through the MCP SDK's own Client over real HTTP: the todo is
// finished, then the next one is claimed in the same call, as claim_next would claim it.

const fixture = withApp();
let app: TestApp;
let api: Api;
beforeAll(() => void ({ app, api } = fixture));

const stateOf = async (id: string) => (await app.sql`select state, claimed_session_id from todos where id = ${id}`)[0]!;

describe('complete with next', () => {
  it('completes the todo, then claims the oldest claimable one and answers with it as next, until next is empty', async () => {
    const e = await vend(api, { name: 'next-complete', queues: ['work'] });
    const a = await fixture.agent(e);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      app.clock.advance(1000);
      ids.push((await push(api, e, { queue: 'work', title: `t${i}` })).id);
    }
    const first = await a.call('claim_next');
    expect(first.todo.id).toBe(ids[0]);

    const second = await a.call('complete', { id: ids[0], result: { ok: 1 }, next: true });
    expect(second).toMatchObject({ id: ids[0], state: 'done', next: { empty: false, todo: { id: ids[1], state: 'claimed', title: 't1' } } });
    expect(await stateOf(ids[0]!)).toMatchObject({ state: 'done' });
    expect(await stateOf(ids[1]!)).toEqual({ state: 'claimed', claimed_session_id: a.sessionId });

    const third = await a.call('complete', { id: ids[1], next: true });
    expect(third.next.todo.id).toBe(ids[2]);
    expect(await a.call('complete', { id: ids[2], next: true })).toMatchObject({ id: ids[2], state: 'done', next: { empty: true } });
    expect(await a.call('complete', { id: ids[2], next: false })).toMatchObject({ error: expect.stringMatching(/^conflict: /) });
  });

  it('without next answers the completed row alone', async () => {
    const e = await vend(api, { name: 'next-absent', queues: ['work'] });
    const a = await fixture.agent(e);
    const [x, y] = [(await push(api, e, { queue: 'work', title: 'x' })).id, (await push(api, e, { queue: 'work', title: 'y' })).id];
    await a.call('claim', { id: x });
    const done = await a.call('complete', { id: x });
    expect(done).toMatchObject({ id: x, state: 'done' });
    expect(done).not.toHaveProperty('next');
    expect(await stateOf(y)).toMatchObject({ state: 'pending' });
  });

  it("claims with claim_next's arguments: the queue, the lease and a fence", async () => {
    const e = await vend(api, { name: 'next-args', queues: ['work', 'inbox'] });
    const a = await fixture.agent(e);
    const done = (await push(api, e, { queue: 'work', title: 'done' })).id;
    app.clock.advance(1000);
    await push(api, e, { queue: 'work', title: 'older work' });
    app.clock.advance(1000);
    const inbox = (await push(api, e, { queue: 'inbox', title: 'inbox' })).id;
    await a.call('claim', { id: done });

    const answer = await a.call('complete', { id: done, next: { queue: 'inbox', lease_ttl_seconds: 120, require_fence: true } });
    expect(answer.next).toMatchObject({ empty: false, todo: { id: inbox, queue: 'inbox' } });
    expect(Date.parse(answer.next.todo.lease_expires_at) - app.clock.now().getTime()).toBe(120_000);
    expect(answer.next.lease_token).toEqual(expect.any(String));
    expect(await a.call('complete', { id: inbox })).toMatchObject({ error: expect.stringMatching(/^conflict: /) });
    expect(await a.call('complete', { id: inbox, lease_token: answer.next.lease_token })).toMatchObject({ id: inbox, state: 'done' });
  });

  it('with next.wait, waits for work after the finish and claims what is pushed meanwhile', async () => {
    const e = await vend(api, { name: 'next-wait', queues: ['work'] });
    const a = await fixture.agent(e);
    const held = (await push(api, e, { queue: 'work', title: 'held' })).id;
    await a.call('claim', { id: held });
    const answering = a.call('complete', { id: held, next: { wait: '20s' } });
    await until(async () => (await stateOf(held)).state === 'done' && app.services.sessions.all().some((s) => s.id === a.sessionId && s.inFlight === 1), 'the finish, then the wait');
    const later = (await push(api, e, { queue: 'work', title: 'later' })).id;
    expect(await answering).toMatchObject({ id: held, state: 'done', next: { empty: false, todo: { id: later } } });
  });

  it("acknowledges the doorbell of the todo it claims, as claim_next does", async () => {
    const e = await vend(api, { name: 'next-ack', queues: ['work'] });
    const a = await fixture.agent(e);
    const held = (await push(api, e, { queue: 'work', title: 'held' })).id;
    await until(() => a.heard.some((n) => n.params.meta.todo_id === held), 'the first doorbell');
    await a.call('claim', { id: held });
    const rung = (await push(api, e, { queue: 'work', title: 'rung' })).id;
    await until(() => a.heard.some((n) => n.params.meta.todo_id === rung), 'the second doorbell');
    await untilRingRecorded(app.sql, { todo_id: rung });

    const answer = await a.call('complete', { id: held, next: true });
    expect(answer.next.todo.id).toBe(rung);
    const rings = await app.sql`select ack_via, acked_session_id from doorbell_rings where todo_id = ${rung}`;
    expect(rings).toEqual([{ ack_via: 'claim', acked_session_id: a.sessionId }]);
  });
});

describe('a next claim that fails after the finish', () => {
  it('answers the finished todo with next.error naming why nothing was claimed (eight waits already held)', async () => {
    const e = await vend(api, { name: 'next-exhausted', queues: ['work', 'idle'] });
    const waiter = await fixture.agent(e);
    const waits = Array.from({ length: 8 }, () => waiter.call('claim_next', { queue: 'idle', wait: '30s' }));
    await until(() => app.services.sessions.all().filter((s) => s.endpoint.slug === e.slug).reduce((n, s) => n + s.inFlight, 0) === 8, 'eight waits');
    const a = await fixture.agent(e);
    const held = (await push(api, e, { queue: 'work', title: 'held' })).id;
    await a.call('claim', { id: held });

    const answer = await a.call('complete', { id: held, next: { queue: 'idle', wait: '30s' } });
    expect(answer).toMatchObject({ id: held, state: 'done', next: { error: { code: 'resource_exhausted', message: expect.stringMatching(/the limit is 8 per endpoint/) } } });
    expect(await stateOf(held)).toMatchObject({ state: 'done' });
    await waiter.client.close();
    await Promise.allSettled(waits);
  });
});

describe('fail with next', () => {
  it('fails the todo (retried later, so not the one claimed) and claims the next', async () => {
    const e = await vend(api, { name: 'next-fail', queues: ['work'] });
    const a = await fixture.agent(e);
    const failing = (await push(api, e, { queue: 'work', title: 'failing' })).id;
    app.clock.advance(1000);
    const after = (await push(api, e, { queue: 'work', title: 'after' })).id;
    await a.call('claim', { id: failing });
    const answer = await a.call('fail', { id: failing, result: { why: 'flaky' }, next: true });
    expect(answer).toMatchObject({ id: failing, state: 'failed', next: { empty: false, todo: { id: after } } });
    expect(await a.call('complete', { id: after, next: true })).toMatchObject({ next: { empty: true } });
  });
});

describe('a refused next changes nothing', () => {
  it('is refused with forbidden, before the todo is finished, when claim_next is not granted', async () => {
    const e = await vend(api, { name: 'next-ungranted', queues: ['work'], verbs: ['claim', 'complete', 'fail'] });
    const a = await fixture.agent(e);
    const held = (await push(api, e, { queue: 'work', title: 'held' })).id;
    const waiting = (await push(api, e, { queue: 'work', title: 'waiting' })).id;
    await a.call('claim', { id: held });
    const refused = await a.call('complete', { id: held, next: true });
    expect(refused.error).toMatch(/^forbidden: verb "claim_next" is not granted/);
    expect(await stateOf(held)).toMatchObject({ state: 'claimed' });
    expect(await stateOf(waiting)).toMatchObject({ state: 'pending' });
    expect(await a.call('complete', { id: held })).toMatchObject({ id: held, state: 'done' });
  });

  it('is refused with forbidden, before the todo is finished, when next names a queue not granted', async () => {
    const e = await vend(api, { name: 'next-queue', queues: ['work'] });
    const a = await fixture.agent(e);
    const held = (await push(api, e, { queue: 'work', title: 'held' })).id;
    await a.call('claim', { id: held });
    expect((await a.call('complete', { id: held, next: { queue: 'elsewhere' } })).error).toMatch(/^forbidden: queue: "elsewhere" is not one of endpoint [a-z0-9-]+'s queues/);
    expect(await stateOf(held)).toMatchObject({ state: 'claimed' });
  });

  it('names the field of a bad next, and finishes nothing', async () => {
    const e = await vend(api, { name: 'next-bad', queues: ['work'] });
    const a = await fixture.agent(e);
    const held = (await push(api, e, { queue: 'work', title: 'held' })).id;
    await a.call('claim', { id: held });
    expect((await a.call('complete', { id: held, next: 'yes' })).error).toMatch(/^invalid_argument: next: must be true, false, or an object of claim_next arguments/);
    expect((await a.call('complete', { id: held, next: { wait: '2h' } })).error).toMatch(/^invalid_argument: next\.wait: must be a duration/);
    expect((await a.call('fail', { id: held, next: { limit: 3 } })).error).toMatch(/^invalid_argument: next\.limit: unknown argument "limit"/);
    expect((await a.call('release', { id: held, next: true })).error).toMatch(/^invalid_argument: next: unknown argument "next"/);
    expect(await stateOf(held)).toMatchObject({ state: 'claimed' });
  });

  it('claims nothing when the finish is refused: a todo this session does not hold', async () => {
    const e = await vend(api, { name: 'next-conflict', queues: ['work'] });
    const a = await fixture.agent(e);
    const notHeld = (await push(api, e, { queue: 'work', title: 'not held' })).id;
    const refused = await a.call('complete', { id: notHeld, next: true });
    expect(refused.error).toMatch(/^conflict: /);
    expect(await stateOf(notHeld)).toMatchObject({ state: 'pending' });
  });
});

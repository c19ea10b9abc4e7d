import { describe, expect, it } from 'vitest';
import { createLogger } from '../src/lib/log.ts';
import { retentionPass, type RetentionDeps, type RetentionWalk } from '../src/services/maintenance/retention.ts';
import { push, vend, withApp } from './support/fixtures.ts';

// Retention (issue 17 item 15a): finished todos, their events and events no todo points at older
// than SWITCHBOARD_RETENTION are deleted in batches; live todos never are. Ring records and
// self-test reports are not retention's: they live 7 days whatever it says (issue 34 item 8).

const f = withApp();
const DAY = 24 * 3_600_000;
const RETENTION = 30 * DAY;
const deps = (extra: Partial<RetentionDeps> = {}): RetentionDeps => ({ sql: f.sql, clock: f.app.clock, log: createLogger('silent'), retentionMs: RETENTION, ...extra });

async function todoIn(slug: string, state: 'pending' | 'claimed' | 'done' | 'failed' | 'retrying' | 'canceled'): Promise<{ id: string; eventId: string }> {
  const todo = await push(f.api, slug, { queue: 'reviews', title: `a ${state} todo` });
  const now = f.app.clock.now();
  if (state === 'claimed') await f.sql`update todos set state = 'claimed', owner = 's', lease_expires_at = ${new Date(now.getTime() + 60 * DAY)} where id = ${todo.id}`;
  if (state === 'done') await f.sql`update todos set state = 'done', completed_at = ${now}, updated_at = ${now} where id = ${todo.id}`;
  if (state === 'canceled') await f.sql`update todos set state = 'canceled', completed_at = ${now}, updated_at = ${now} where id = ${todo.id}`;
  if (state === 'failed') await f.sql`update todos set state = 'failed', completed_at = ${now}, updated_at = ${now} where id = ${todo.id}`;
  if (state === 'retrying') await f.sql`update todos set state = 'failed', next_retry_at = ${new Date(now.getTime() + 60 * DAY)}, updated_at = ${now} where id = ${todo.id}`;
  const [row] = await f.sql<{ event_id: string }[]>`select event_id::text as event_id from todos where id = ${todo.id}`;
  return { id: todo.id, eventId: row!.event_id };
}

const exists = async (table: 'todos' | 'events', id: string) =>
  (await (table === 'todos' ? f.sql`select 1 from todos where id = ${id}` : f.sql`select 1 from events where id = ${id}`)).length === 1;

async function ring(endpointId: string, sentAt: Date): Promise<string> {
  const id = `rg_${'0'.repeat(10)}${Math.floor(Math.random() * 1e15).toString(32).toUpperCase().replace(/[ILOU]/g, '0').padStart(16, '0')}`.slice(0, 29);
  await f.sql`insert into doorbell_rings (ring_id, endpoint_id, session_id, kind, window_seconds, sent_at) values (${id}, ${endpointId}, 's', 'digest', 900, ${sentAt})`;
  return id;
}

/** A self-test report whose test expired at `expiredAt` (its synthetic todo long gone). */
async function report(endpointId: string, expiredAt: Date): Promise<string> {
  const id = `dt_${'0'.repeat(10)}${Math.floor(Math.random() * 1e15).toString(32).toUpperCase().replace(/[ILOU]/g, '0').padStart(16, '0')}`.slice(0, 29);
  const createdAt = new Date(expiredAt.getTime() - 6 * 60_000);
  await f.sql`
    insert into doorbell_tests (test_id, endpoint_id, todo_id, wait_seconds, created_at, ring_due_at, expires_at, server_version, stream_attached, channel_capability)
    values (${id}, ${endpointId}, ${`td_${id.slice(3)}`}, 60, ${createdAt}, ${createdAt}, ${expiredAt}, 'test', true, ${f.sql.json({})})`;
  return id;
}

describe('the retention pass', () => {
  it('deletes finished todos, their events and orphan events past retention; live todos and newer rows stay', async () => {
    const e = await vend(f.api, { name: 'ret', queues: ['reviews'] });
    const old = {
      done: await todoIn(e.slug, 'done'),
      failed: await todoIn(e.slug, 'failed'),
      canceled: await todoIn(e.slug, 'canceled'),
      pending: await todoIn(e.slug, 'pending'),
      claimed: await todoIn(e.slug, 'claimed'),
      retrying: await todoIn(e.slug, 'retrying'),
      orphan: await todoIn(e.slug, 'pending'),
    };
    // An event whose todo went some other way.
    await f.sql`delete from todos where id = ${old.orphan.id}`;
    f.app.clock.advance(RETENTION - DAY);
    const recent = { done: await todoIn(e.slug, 'done'), orphan: await todoIn(e.slug, 'pending') };
    await f.sql`delete from todos where id = ${recent.orphan.id}`;

    // Nothing is past retention yet.
    expect(await retentionPass(deps())).toEqual({ todos: 0, events: 0, replayKeys: 0, oauth: 0, presenceHistory: 0, webhookRefusals: 0, more: false });

    f.app.clock.advance(2 * DAY);
    expect(await retentionPass(deps())).toEqual({ todos: 3, events: 4, replayKeys: 0, oauth: 0, presenceHistory: 0, webhookRefusals: 0, more: false });
    for (const t of [old.done, old.failed, old.canceled]) {
      expect(await exists('todos', t.id)).toBe(false);
      expect(await exists('events', t.eventId)).toBe(false);
    }
    expect(await exists('events', old.orphan.eventId)).toBe(false);
    for (const t of [old.pending, old.claimed, old.retrying, recent.done]) {
      expect(await exists('todos', t.id)).toBe(true);
      expect(await exists('events', t.eventId)).toBe(true);
    }
    expect(await exists('events', recent.orphan.eventId)).toBe(true);
  });

  it('keeps ring records and self-test reports 7 days whatever SWITCHBOARD_RETENTION says (SPEC-0025 REQ-1, REQ-8)', async () => {
    const e = await vend(f.api, { name: 'ret-rings', queues: ['reviews'] });
    const now = f.app.clock.now().getTime();
    const ago = (days: number) => new Date(now - days * DAY);
    const rings = { young: await ring(e.id, ago(2)), old: await ring(e.id, ago(8)) };
    const reports = { young: await report(e.id, ago(2)), old: await report(e.id, ago(8)) };
    const left = async () => ({
      rings: (await f.sql`select ring_id from doorbell_rings where ring_id in ${f.sql(Object.values(rings))}`).map((r) => r.ring_id),
      reports: (await f.sql`select test_id from doorbell_tests where test_id in ${f.sql(Object.values(reports))}`).map((r) => r.test_id),
    });

    // A retention of 24 h (and one of 60 days) runs with the self-test housekeeping, as the loops do.
    await retentionPass(deps({ retentionMs: DAY }));
    await f.app.services.selfTests.cleanUp();
    expect(await left()).toEqual({ rings: [rings.young], reports: [reports.young] });
    await retentionPass(deps({ retentionMs: 60 * DAY }));
    await f.app.services.selfTests.cleanUp();
    expect(await left()).toEqual({ rings: [rings.young], reports: [reports.young] });

    // Past 7 days the young ones go too, whatever the retention.
    f.app.clock.advance(5 * DAY + 60_000);
    await retentionPass(deps({ retentionMs: 60 * DAY }));
    await f.app.services.selfTests.cleanUp();
    expect(await left()).toEqual({ rings: [], reports: [] });
  });

  it('works in batches: a backlog larger than one tick drains over several', async () => {
    // Clear what the first test left (newer than retention then), so only these todos are counted.
    f.app.clock.advance(RETENTION + DAY);
    await retentionPass(deps());
    const e = await vend(f.api, { name: 'ret-batch', queues: ['reviews'] });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await todoIn(e.slug, 'done')).id);
    f.app.clock.advance(RETENTION + DAY);
    const left = async () => (await f.sql`select count(*)::int as n from todos where id in ${f.sql(ids)}`)[0]!.n;
    expect(await retentionPass(deps({ batch: 3, batchesPerTick: 2 }))).toMatchObject({ todos: 6, more: true });
    expect(await left()).toBe(4);
    expect(await retentionPass(deps({ batch: 3, batchesPerTick: 2 }))).toMatchObject({ todos: 4, more: false });
    expect(await left()).toBe(0);
  });

  it('deletes the replay keys of signed bodies received before the cutoff, and keeps newer ones', async () => {
    const e = await vend(f.api, { name: 'ret-keys', queues: ['reviews'] });
    const w = await f.api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'reviews' });
    const key = async (body: string, at: Date) =>
      f.sql`insert into replay_keys (webhook_id, body_sha256, received_at, event_id) values (${w.json.webhook_id}, ${Buffer.from(body)}, ${at}, 1)`;
    const now = f.app.clock.now();
    await key('old body', new Date(now.getTime() - RETENTION - DAY));
    await key('new body', new Date(now.getTime() - DAY));
    expect(await retentionPass(deps())).toMatchObject({ replayKeys: 1 });
    const left = await f.sql<{ body: Buffer }[]>`select body_sha256 as body from replay_keys where webhook_id = ${w.json.webhook_id}`;
    expect(left.map((r) => r.body.toString())).toEqual(['new body']);
  });

  it('deletes the refusal counts of webhooks older than the cutoff, as the events, and keeps newer ones', async () => {
    const e = await vend(f.api, { name: 'ret-refusals', queues: ['reviews'] });
    const w = await f.api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'reviews' });
    const refuse = async () => expect((await fetch(w.json.ingest_url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'not json' })).status).toBe(400);
    await refuse();
    await f.app.services.webhookRefusals.flush();
    f.app.clock.advance(RETENTION - DAY);
    await refuse();
    await f.app.services.webhookRefusals.flush();
    const kept = async () => (await f.sql`select n from webhook_refusals where webhook_id = ${w.json.webhook_id} order by bucket`).map((r) => r.n);
    expect(await kept()).toEqual([1, 1]);
    f.app.clock.advance(2 * DAY);
    expect(await retentionPass(deps())).toMatchObject({ webhookRefusals: 1 });
    expect(await kept()).toEqual([1]);
  });

  it('deletes presence history older than 30 days whatever SWITCHBOARD_RETENTION says, and keeps younger rows', async () => {
    const e = await vend(f.api, { name: 'ret-presence', queues: ['reviews'] });
    const clock = async (presence: 'in' | 'out') => expect((await f.api('PUT', `/api/v1/endpoints/${e.slug}/presence`, { presence, until: null })).status).toBe(200);
    await clock('out');
    f.app.clock.advance(2 * DAY);
    await clock('in');
    const kept = async () => (await f.sql`select to_presence from presence_history where endpoint_id = ${e.id} order by at`).map((r) => r.to_presence);
    expect(await kept()).toEqual(['out', 'in']);
    // 29 days after the first change: a retention of one day deletes neither.
    f.app.clock.advance(27 * DAY);
    expect(await retentionPass(deps({ retentionMs: DAY }))).toMatchObject({ presenceHistory: 0 });
    // Past 30 days the first goes, even with a retention of 60 days; then the second.
    f.app.clock.advance(DAY + 60_000);
    expect(await retentionPass(deps({ retentionMs: 60 * DAY }))).toMatchObject({ presenceHistory: 1 });
    expect(await kept()).toEqual(['in']);
    f.app.clock.advance(2 * DAY);
    expect(await retentionPass(deps({ batch: 1, batchesPerTick: 1 }))).toMatchObject({ presenceHistory: 1 });
    expect(await kept()).toEqual([]);
  });

  it('deletes deliveries routing kept no todo for by their own index, and walks for other orphan events from where the last pass stopped', async () => {
    // Issue 40: at 1,000,000 pending todos every batch of the old statement read the old events
    // live todos keep again, to find orphans behind them.
    f.app.clock.advance(RETENTION + DAY);
    await retentionPass(deps());
    const e = await vend(f.api, { name: 'ret-walk', queues: ['reviews'] });
    const kept = [await todoIn(e.slug, 'pending'), await todoIn(e.slug, 'pending'), await todoIn(e.slug, 'pending')];
    f.app.clock.advance(60_000);
    const orphan = await todoIn(e.slug, 'pending');
    await f.sql`delete from todos where id = ${orphan.id}`;
    const [dropped] = await f.sql<{ id: string }[]>`
      insert into events (source, family, trust_mode, verified, endpoint_id, received_at, disposition)
      values ('github', 'webhook', 'signed', true, ${e.id}, ${f.app.clock.now()}, 'dropped') returning id::text`;
    f.app.clock.advance(RETENTION + DAY);
    // The walk reads 2 events a pass: the first pass reads two kept ones and stops there.
    const walk: RetentionWalk = { orphanEventsAfter: null };
    const pass = () => retentionPass(deps({ walk, walkEvents: 2 }));
    const walked = [];
    for (let i = 0; i < 4 && (await exists('events', orphan.eventId)); i++) walked.push(await pass());
    // The dropped delivery went in the first pass, whatever the walk had read.
    expect(walked[0]).toMatchObject({ events: 1 });
    expect(await exists('events', dropped!.id)).toBe(false);
    expect(await exists('events', orphan.eventId)).toBe(false);
    expect(walked.length).toBeGreaterThanOrEqual(2);
    for (const t of kept) expect(await exists('events', t.eventId)).toBe(true);
  });
});

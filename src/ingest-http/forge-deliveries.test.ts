import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  formBody,
  giteaHeaders,
  giteaIssueOpened,
  giteaPush,
  giteaTestPush,
  githubFormHeaders,
  githubHeaders,
  githubIssueOpened,
  githubPing,
  signSha256,
} from '../domain/ingest/fixtures.testkit.ts';
import {
  api,
  counts,
  db,
  doorbellsFor,
  type Minted,
  type Notification,
  post,
  refused,
  seedForgeWebhooks,
  settle,
  todo,
  until,
  untilRingRecorded,
  useIngestSuite,
  listener,
  type Vended,
} from '../../test/support/ingest.ts';

// What GitHub and Gitea really send besides work: GitHub's ping and Gitea's test delivery (recorded,
// no todo, no ring), and form-encoded deliveries (GitHub's default content type, Gitea's other one).

useIngestSuite();

let forge: Vended;
let gh: Minted;
let gt: Minted;
let bell: { client: Client; heard: Notification[] };

beforeAll(async () => {
  ({ forge, gh, gt } = await seedForgeWebhooks());
  bell = await listener(forge);
});

/** The rings recorded, once every doorbell heard so far has its record (untilRingRecorded). */
async function rings(): Promise<number> {
  for (const n of bell.heard) await untilRingRecorded(db.sql, { ring_id: n.params.meta.ring_id! });
  return (await db.sql<{ n: number }[]>`select count(*)::int as n from doorbell_rings`)[0]!.n;
}

async function eventRow(id: string) {
  const [row] = await db.sql`
    select id::text as id, source, event_type, external_id, trust_mode, verified, verify_detail, content_type, headers,
           payload, webhook_id, endpoint_id, (select count(*)::int from todos t where t.event_id = events.id) as todos
    from events where id = ${id}`;
  return row!;
}

/** Everything a recorded delivery may change: one event more, no todo, no ring, nothing heard. */
async function expectRecordedOnly(before: { todos: number; events: number }, ringsBefore: number, heardBefore: number, events = 1) {
  await settle();
  expect(await counts()).toEqual({ todos: before.todos, events: before.events + events });
  expect(await rings()).toBe(ringsBefore);
  expect(bell.heard).toHaveLength(heardBefore);
}

describe("GitHub's ping", () => {
  const delivery = randomUUID();
  const body = JSON.stringify(githubPing);
  let eventId = '';

  it('is answered 200 and recorded as a verified event: no todo, no ring', async () => {
    const [before, ringsBefore, heardBefore] = [await counts(), await rings(), bell.heard.length];
    const r = await post(gh.ingest_url, body, githubHeaders('ping', body, gh.signing_secret!, delivery));
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      ok: true,
      event: 'ping',
      disposition: 'recorded',
      reason: 'ping',
      event_id: expect.stringMatching(/^\d+$/),
      created: true,
      todos: [],
      trust_mode: 'signed',
      verified: true,
    });
    eventId = r.json.event_id;
    await expectRecordedOnly(before, ringsBefore, heardBefore);
    const ev = await eventRow(eventId);
    expect(ev).toMatchObject({
      source: 'github',
      event_type: 'ping',
      external_id: delivery,
      trust_mode: 'signed',
      verified: true,
      verify_detail: 'hmac-sha256 ok',
      content_type: 'application/json',
      webhook_id: gh.webhook_id,
      endpoint_id: forge.id,
      todos: 0,
    });
    expect(Buffer.from(ev.payload).toString()).toBe(body);
    expect(ev.headers).toMatchObject({ 'x-github-event': 'ping', 'x-github-hook-id': '512345678', 'user-agent': 'GitHub-Hookshot/8e5a9c1', 'x-hub-signature-256': '«redacted»' });
    const [hook] = await db.sql`select last_delivery_at from webhooks where id = ${gh.webhook_id}`;
    expect(hook!.last_delivery_at).not.toBeNull();
  });

  it('shows in the event history as recorded, with no todo', async () => {
    const r = await api('GET', `/api/v1/events?endpoint=${forge.slug}`);
    expect(r.json.events.find((e: { id: string }) => e.id === eventId)).toMatchObject({ event_type: 'ping', disposition: 'recorded', todo_id: null, verified: true });
  });

  it('a redelivery of the ping answers 200 with the same event and writes nothing', async () => {
    const [before, ringsBefore, heardBefore] = [await counts(), await rings(), bell.heard.length];
    const r = await post(gh.ingest_url, body, githubHeaders('ping', body, gh.signing_secret!, delivery));
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ event: 'ping', event_id: eventId, created: false, todos: [] });
    await expectRecordedOnly(before, ringsBefore, heardBefore, 0);
  });

  it("the ping's signed body relabelled as another event is a replay: 409, nothing written, no ring", async () => {
    const [ringsBefore, heardBefore] = [await rings(), bell.heard.length];
    const { r } = await refused(409, 'conflict', () => post(gh.ingest_url, body, githubHeaders('issues', body, gh.signing_secret!)));
    expect(r.json.error).toMatch(/already delivered/);
    await settle();
    expect(await rings()).toBe(ringsBefore);
    expect(bell.heard).toHaveLength(heardBefore);
  });

  it('a ping signed with another secret is refused 401 and stores nothing', async () => {
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, body, githubHeaders('ping', body, 'whsec_not-the-secret')));
    const unsigned = githubHeaders('ping', body, gh.signing_secret!);
    delete unsigned['x-hub-signature-256'];
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, body, unsigned));
  });

  it('a ping to a form-encoded hook is recorded the same way', async () => {
    const [before, ringsBefore, heardBefore] = [await counts(), await rings(), bell.heard.length];
    const form = formBody(JSON.stringify({ ...githubPing, hook_id: 512345679, hook: { ...githubPing.hook, id: 512345679, config: { ...githubPing.hook.config, content_type: 'form' } } }));
    const r = await post(gh.ingest_url, form, githubFormHeaders('ping', form, gh.signing_secret!));
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ event: 'ping', disposition: 'recorded', created: true, verified: true });
    await expectRecordedOnly(before, ringsBefore, heardBefore);
    expect(await eventRow(r.json.event_id)).toMatchObject({ event_type: 'ping', content_type: 'application/x-www-form-urlencoded', todos: 0 });
  });
});

describe('GitHub form-encoded deliveries (application/x-www-form-urlencoded)', () => {
  const json = JSON.stringify({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: 31, title: 'Form bodies: "quotes", + signs & ümlauts' } });
  const form = formBody(json);

  it('verified over the raw form body, then the payload field is the JSON: a todo, rung once', async () => {
    const before = await counts();
    const delivery = randomUUID();
    const r = await post(gh.ingest_url, form, githubFormHeaders('issues', form, gh.signing_secret!, delivery));
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ created: 1, queue: 'reviews', trust_mode: 'signed', verified: true });
    const t = await todo(r.json.id);
    expect(t).toMatchObject({ title: 'Issue #31 opened in octo/repo: Form bodies: "quotes", + signs & ümlauts', kind: 'issues', source: 'github', payload: JSON.parse(json) });
    const ev = await eventRow(t.event_id);
    expect(ev).toMatchObject({ external_id: delivery, content_type: 'application/x-www-form-urlencoded', verified: true, todos: 1 });
    expect(Buffer.from(ev.payload).toString()).toBe(form); // the raw bytes, exactly as received
    expect(await counts()).toEqual({ todos: before.todos + 1, events: before.events + 1 });
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the form delivery doorbell');
  });

  it('a form body signed over its JSON instead of the bytes sent is refused 401: GitHub signs the raw body', async () => {
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, form, { ...githubFormHeaders('issues', form, gh.signing_secret!), 'x-hub-signature-256': `sha256=${signSha256(gh.signing_secret!, json)}` }));
  });

  it('a correctly signed form with no payload field, two, or bad JSON in it: 400 naming payload, nothing stored', async () => {
    for (const bad of ['action=opened&number=31', `${form}&${form}`, formBody('{"action": "opened",'), formBody(''), json]) {
      const { r } = await refused(400, 'invalid_argument', () => post(gh.ingest_url, bad, githubFormHeaders('issues', bad, gh.signing_secret!)));
      expect(r.json.field, bad.slice(0, 40)).toBe('payload');
      expect(r.json.error).toMatch(/^payload: /);
    }
  });

  it('a form that fails its signature is 401 before its payload is looked at', async () => {
    await refused(401, 'unauthenticated', () => post(gh.ingest_url, 'no=payload', githubFormHeaders('issues', 'no=payload', 'whsec_wrong')));
  });
});

describe('Gitea', () => {
  it('a JSON delivery with every header Gitea sends verifies and makes a todo', async () => {
    const body = JSON.stringify({ ...giteaIssueOpened, number: 8, issue: { ...giteaIssueOpened.issue, number: 8 } });
    const r = await post(gt.ingest_url, body, giteaHeaders('issues', body, gt.signing_secret!));
    expect(r.status).toBe(202);
    expect(await todo(r.json.id)).toMatchObject({ source: 'gitea', queue: 'inbox', title: 'Issue #8 opened in team/app: Login page 500s on an empty password' });
    const ev = await eventRow((await todo(r.json.id)).event_id);
    for (const h of ['x-gitea-signature', 'x-gogs-signature', 'x-hub-signature', 'x-hub-signature-256']) expect(ev.headers[h]).toBe('«redacted»');
    // Rung once; waited for here, so the ring counts of the tests after are not raced by it.
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the gitea json doorbell');
  });

  it('a form delivery signed as Gitea signs it (over the JSON in payload) becomes a todo; the same JSON again is a replay', async () => {
    const json = JSON.stringify({ ...giteaIssueOpened, number: 9, issue: { ...giteaIssueOpened.issue, number: 9, title: 'Form + signs & "quotes"' } });
    const form = formBody(json);
    const before = await counts();
    const r = await post(gt.ingest_url, form, giteaHeaders('issues', json, gt.signing_secret!, randomUUID(), 'application/x-www-form-urlencoded'));
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ created: 1, queue: 'inbox', verified: true });
    const t = await todo(r.json.id);
    expect(t).toMatchObject({ title: 'Issue #9 opened in team/app: Form + signs & "quotes"', payload: JSON.parse(json) });
    expect(Buffer.from((await eventRow(t.event_id)).payload).toString()).toBe(form);
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the gitea form doorbell');
    // The signed bytes are the JSON: sent again unwrapped under a new delivery id, it is the same delivery.
    const again = await post(gt.ingest_url, json, giteaHeaders('issues', json, gt.signing_secret!));
    expect(again.json).toMatchObject({ created: 0, id: r.json.id });
    expect(await counts()).toEqual({ todos: before.todos + 1, events: before.events + 1 });
  });

  it('a form delivery signed over the raw form body verifies too', async () => {
    const json = JSON.stringify({ ...giteaIssueOpened, number: 10, issue: { ...giteaIssueOpened.issue, number: 10 } });
    const form = formBody(json);
    const r = await post(gt.ingest_url, form, giteaHeaders('issues', form, gt.signing_secret!, randomUUID(), 'application/x-www-form-urlencoded'));
    expect(r.status).toBe(202);
    expect((await todo(r.json.id)).payload).toEqual(JSON.parse(json));
    // Rung once; waited for here, so the ring counts of the tests after are not raced by it.
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the gitea raw-form doorbell');
  });

  it('a form delivery with the wrong secret is 401; signed but with no payload field or bad JSON, 400 naming payload', async () => {
    const json = JSON.stringify(giteaIssueOpened);
    await refused(401, 'unauthenticated', () => post(gt.ingest_url, formBody(json), giteaHeaders('issues', json, 'whsec_wrong', randomUUID(), 'application/x-www-form-urlencoded')));
    for (const bad of ['action=opened', formBody('{"number":')]) {
      const { r } = await refused(400, 'invalid_argument', () => post(gt.ingest_url, bad, giteaHeaders('issues', bad, gt.signing_secret!, randomUUID(), 'application/x-www-form-urlencoded')));
      expect(r.json.field).toBe('payload');
    }
    // Gitea's way, signed over the payload's JSON: the JSON is bad, so still 400 payload, not 401.
    const { r } = await refused(400, 'invalid_argument', () =>
      post(gt.ingest_url, formBody('{"number":'), giteaHeaders('issues', '{"number":', gt.signing_secret!, randomUUID(), 'application/x-www-form-urlencoded')),
    );
    expect(r.json).toMatchObject({ field: 'payload', error: 'payload: is not valid JSON' });
  });

  it('"Test Delivery" (a push of the all-zero fake commit) is answered 200 and recorded: no todo, no ring', async () => {
    const [before, ringsBefore, heardBefore] = [await counts(), await rings(), bell.heard.length];
    const body = JSON.stringify(giteaTestPush);
    const delivery = randomUUID();
    const r = await post(gt.ingest_url, body, giteaHeaders('push', body, gt.signing_secret!, delivery));
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ ok: true, event: 'push', disposition: 'recorded', reason: 'test_delivery', created: true, todos: [], verified: true });
    await expectRecordedOnly(before, ringsBefore, heardBefore);
    expect(await eventRow(r.json.event_id)).toMatchObject({ source: 'gitea', event_type: 'push', external_id: delivery, verified: true, todos: 0 });
  });

  it('a real push still makes a todo and rings', async () => {
    const body = JSON.stringify(giteaPush);
    const r = await post(gt.ingest_url, body, giteaHeaders('push', body, gt.signing_secret!));
    expect(r.status).toBe(202);
    expect(await todo(r.json.id)).toMatchObject({ kind: 'push', title: 'Push to main in team/app (1 commit)' });
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the gitea push doorbell');
  });
});

import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { githubHeaders, githubIssueOpened } from '../domain/ingest/fixtures.testkit.ts';
import { app, counts, createWebhook, db, github, type Minted, post, todo, useIngestSuite, vend, type Vended } from '../../test/support/ingest.ts';

// Signed webhook replay (issue 17 item 11): only the body is signed, so a captured body sent again
// under a new delivery id, or with its event header relabelled, is the same delivery.

useIngestSuite();

let forge: Vended;
let gh: Minted;
let other: Minted;
let gen: Minted;

beforeAll(async () => {
  forge = await vend();
  gh = await createWebhook(forge.slug, 'github', 'reviews');
  other = await createWebhook(forge.slug, 'github', 'reviews');
  gen = await createWebhook(forge.slug, 'generic', 'inbox');
});

const issue = (n: number) => ({ ...githubIssueOpened, issue: { ...githubIssueOpened.issue, number: n } });

describe('a signed body delivered again', () => {
  it('under a new delivery id, or relabelled as another event, answers as a duplicate of the first todo, even once that todo is done', async () => {
    const body = issue(501);
    const first = await github(gh, 'issues', body, gh.signing_secret!);
    expect(first.status).toBe(202);
    expect(first.json).toMatchObject({ created: 1, verified: true });
    const before = await counts();

    const replayed = await github(gh, 'issues', body, gh.signing_secret!, randomUUID());
    expect(replayed.status).toBe(202);
    expect(replayed.json).toMatchObject({ created: 0, id: first.json.id, todos: [{ id: first.json.id, created: false }], verified: true });
    const relabelled = await github(gh, 'push', body, gh.signing_secret!, randomUUID());
    expect(relabelled.json).toMatchObject({ created: 0, id: first.json.id });
    expect(await counts()).toEqual(before);

    // The delivery-id dedup matches only live todos; the body's hash holds whatever the state.
    await db.sql`update todos set state = 'done', completed_at = ${app.clock.now()}, updated_at = ${app.clock.now()} where id = ${first.json.id}`;
    const afterDone = await github(gh, 'issues', body, gh.signing_secret!, randomUUID());
    expect(afterDone.json).toMatchObject({ created: 0, id: first.json.id });
    expect((await todo(first.json.id)).state).toBe('done');
    expect(await counts()).toEqual(before);
  });

  it('refused because the todo it made is gone (409), it leaves the webhook as it was: a refusal stamps no last delivery', async () => {
    const body = issue(505);
    const first = await github(gh, 'issues', body, gh.signing_secret!);
    expect(first.status).toBe(202);
    await db.sql`delete from todos where id = ${first.json.id}`;
    app.clock.advance(5 * 60_000); // past the once-a-minute throttle of the stamp
    const [before] = await db.sql`select * from webhooks where id = ${gh.webhook_id}`;
    const replayed = await github(gh, 'issues', body, gh.signing_secret!, randomUUID());
    expect(replayed.status).toBe(409);
    expect(replayed.json).toMatchObject({ code: 'conflict' });
    expect((await db.sql`select * from webhooks where id = ${gh.webhook_id}`)[0]).toEqual(before);
  });

  it('ten concurrent replays under ten delivery ids make exactly one todo', async () => {
    const body = JSON.stringify(issue(502));
    const before = await counts();
    const all = await Promise.all(Array.from({ length: 10 }, () => post(gh.ingest_url, body, githubHeaders('issues', body, gh.signing_secret!, randomUUID()))));
    expect(all.map((r) => r.status)).toEqual(Array(10).fill(202));
    expect(all.filter((r) => r.json.created === 1)).toHaveLength(1);
    expect(new Set(all.map((r) => r.json.id)).size).toBe(1);
    expect(await counts()).toEqual({ todos: before.todos + 1, events: before.events + 1 });
  });

  it('is per webhook: the same body signed for another webhook is its own delivery', async () => {
    const body = issue(503);
    const a = await github(gh, 'issues', body, gh.signing_secret!);
    const b = await github(other, 'issues', body, other.signing_secret!);
    expect(a.json.created).toBe(1);
    expect(b.json.created).toBe(1);
    expect(b.json.id).not.toBe(a.json.id);
  });

  it('token-trust webhooks are unchanged: the same body under two delivery ids makes two todos', async () => {
    const body = JSON.stringify({ title: 'Nightly build failed', build: 777 });
    const a = await post(gen.ingest_url, body, { 'content-type': 'application/json', 'x-delivery-id': 'build-777-a' });
    const b = await post(gen.ingest_url, body, { 'content-type': 'application/json', 'x-delivery-id': 'build-777-b' });
    expect([a.json.created, b.json.created]).toEqual([1, 1]);
  });

  it('past the retention window (30 days by default) the same body is a new delivery', async () => {
    const body = issue(504);
    const first = await github(gh, 'issues', body, gh.signing_secret!);
    expect(first.json.created).toBe(1);
    app.clock.advance(29 * 24 * 3_600_000);
    expect((await github(gh, 'issues', body, gh.signing_secret!)).json).toMatchObject({ created: 0, id: first.json.id });
    app.clock.advance(2 * 24 * 3_600_000);
    const later = await github(gh, 'issues', body, gh.signing_secret!);
    expect(later.json.created).toBe(1);
    expect(later.json.id).not.toBe(first.json.id);
  });
});

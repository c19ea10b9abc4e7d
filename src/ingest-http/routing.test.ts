import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { githubIssueCommentCreated, githubPing, githubPullRequestOpened, githubPullRequestReviewRequested, githubPush } from '../domain/ingest/fixtures.testkit.ts';
import { api, app, counter, counts, createWebhook, db, github, type Minted, todo, useIngestSuite, vend, type Vended } from '../../test/support/ingest.ts';

// Routing rules end to end (issue 37): a rules write through /api/v1, then signed GitHub
// deliveries through the ingest route, and what each became (todos, events, traces, answers).

useIngestSuite();

const rulesPath = (e: Vended, w: Minted) => `/api/v1/endpoints/${e.slug}/webhooks/${w.webhook_id}/rules`;
const putRules = (e: Vended, w: Minted, body: unknown) => api('PUT', rulesPath(e, w), body);
const eventRow = async (id: string) => (await db.sql<{ disposition: string; routing: any }[]>`select disposition, routing from events where id = ${id}::bigint`)[0]!;
const todosOfEvent = async (id: string) =>
  db.sql<{ id: string; endpoint_id: string; queue: string; routing: any }[]>`select id, endpoint_id, queue, routing from todos where event_id = ${id}::bigint order by created_at`;

const reviewRequestedFor = (login: string, number = 42) => ({
  ...githubPullRequestReviewRequested,
  number,
  pull_request: { ...githubPullRequestReviewRequested.pull_request, number, requested_reviewers: [{ login, id: 7, type: 'User' }] },
  requested_reviewer: { login, id: 7, type: 'User' },
});
const checkRun = { action: 'completed', check_run: { id: 1, name: 'test (1)', pull_requests: [{ number: 42 }] }, repository: githubPullRequestOpened.repository, sender: { login: 'github-actions[bot]' } };

const presets = {
  rules: [
    { name: 'drop CI noise', when: 'event in ["check_run", "check_suite", "status", "workflow_job"]', action: { drop: true } },
    { name: 'reviews for the bot', when: 'event == "pull_request" && requested_reviewers.exists(r, r == params.bot)', action: { queue: 'reviews', once: true } },
  ],
  params: { bot: 'hubot' },
  default_action: { drop: true },
};

describe('writing rules: every problem names its field and changes nothing', () => {
  let e: Vended;
  let w: Minted;
  beforeAll(async () => {
    e = await vend(['reviews', 'inbox']);
    w = await createWebhook(e.slug, 'github', 'inbox');
    expect((await putRules(e, w, presets)).status).toBe(200);
  });

  it('refuses a bad expression, a queue out of scope, and a fan-out target that is not the owner\'s', async () => {
    const other = await vend(['inbox'], {}, api);
    const cases: [unknown, string, string?][] = [
      [{ rules: [presets.rules[0], { name: 'x', when: 'event ==', action: { drop: true } }] }, 'rules.1.when', 'invalid_expression'],
      [{ rules: [{ name: 'x', when: 'payload.body.matches("a+")', action: { drop: true } }] }, 'rules.0.when', 'invalid_expression'],
      [{ rules: [{ name: 'x', when: 'true', action: { queue: 'elsewhere' } }] }, 'rules.0.action.queue'],
      [{ rules: [{ name: 'x', when: 'true', action: { queue: 'inbox', endpoints: ['nobody-00000000'] } }] }, 'rules.0.action.endpoints.0'],
      [{ default_action: { queue: 'inbox', endpoints: [other.slug, 'nobody-00000000'] } }, 'default_action.endpoints.1'],
      [{ params: { blob: 'x'.repeat(17 * 1024) } }, 'params'],
    ];
    for (const [body, field, reason] of cases) {
      const r = await putRules(e, w, body);
      expect(r.status, field).toBe(400);
      expect(r.json).toMatchObject({ code: 'invalid_argument', field, ...(reason ? { reason } : {}) });
    }
    const now = await api('GET', rulesPath(e, w));
    expect(now.json).toMatchObject({ rules: presets.rules, params: presets.params, default_action: presets.default_action, target_queue: 'inbox' });
  });

  it('keeps params an update omits; null clears them', async () => {
    expect((await putRules(e, w, { rules: presets.rules })).json.params).toEqual({ bot: 'hubot' });
    expect((await putRules(e, w, { params: null })).json.params).toEqual({});
    expect((await putRules(e, w, { params: presets.params })).json.params).toEqual(presets.params);
  });

  it("answers 404 for another endpoint's webhook", async () => {
    const other = await vend();
    expect((await api('GET', `/api/v1/endpoints/${other.slug}/webhooks/${w.webhook_id}/rules`)).status).toBe(404);
  });
});

describe('deliveries through the rules', () => {
  let e: Vended;
  let w: Minted;
  beforeAll(async () => {
    e = await vend(['reviews', 'inbox']);
    w = await createWebhook(e.slug, 'github', 'inbox');
    expect((await putRules(e, w, presets)).status).toBe(200);
  });

  it('drops CI noise: an event with its trace, no todo, 202 dropped', async () => {
    const before = await counts();
    const r = await github(w, 'check_run', checkRun, w.signing_secret!);
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ todos: [], created: 0, dropped: true, routing: { stage: 'rule', rule_index: 0, rule_name: 'drop CI noise', action: 'drop' } });
    expect(await counts()).toEqual({ todos: before.todos, events: before.events + 1 });
    expect(await eventRow(r.json.event_id)).toEqual({ disposition: 'dropped', routing: r.json.routing });
    // The same signed body again is a replay: nothing new, and said so.
    const replay = await github(w, 'check_run', checkRun, w.signing_secret!);
    expect(replay.json).toMatchObject({ todos: [], created: 0, duplicate: true, event_id: r.json.event_id });
    expect(replay.json.dropped).toBeUndefined();
    expect(await counts()).toEqual({ todos: before.todos, events: before.events + 1 });
  });

  it('makes one todo for a review the bot was asked for, traced, and a repeat for the same pull request', async () => {
    const r = await github(w, 'pull_request', reviewRequestedFor('hubot'), w.signing_secret!);
    expect(r.status).toBe(202);
    const trace = { stage: 'rule', rule_index: 1, rule_name: 'reviews for the bot', action: 'queue', queue: 'reviews', once: true };
    expect(r.json).toMatchObject({ created: 1, queue: 'reviews', routing: trace });
    const t = await todo(r.json.id);
    expect(t).toMatchObject({ queue: 'reviews', kind: 'pull_request' });
    expect((await todosOfEvent(t.event_id))[0]!.routing).toEqual(trace);

    // Another delivery about the same pull request (a new delivery id and body): one live todo per subject.
    const again = await github(w, 'pull_request', { ...reviewRequestedFor('hubot'), action: 'synchronize' }, w.signing_secret!);
    expect(again.status).toBe(202);
    expect(again.json).toMatchObject({ created: 0, repeat: true, id: r.json.id });
    expect(await eventRow(again.json.event_id)).toMatchObject({ disposition: 'repeat' });
    // A different pull request is new work.
    const other = await github(w, 'pull_request', reviewRequestedFor('hubot', 43), w.signing_secret!);
    expect(other.json).toMatchObject({ created: 1 });
    expect(other.json.id).not.toBe(r.json.id);
  });

  it('falls to the default action (drop) for what no rule matched', async () => {
    const r = await github(w, 'pull_request', reviewRequestedFor('someone-else'), w.signing_secret!);
    expect(r.json).toMatchObject({ created: 0, dropped: true, routing: { stage: 'default', rule_index: null, action: 'drop' } });
  });

  it('faults closed: no todo, 503, the event recorded as faulted, counted; the retry after a fix is routed', async () => {
    const decisions = await counter('switchboard_routing_decisions_total', { action: 'fault' });
    const faults = await counter('switchboard_routing_faults_total', { cause: 'error' });
    expect((await putRules(e, w, { rules: [{ name: 'issue numbers', when: 'payload.issue.number > 1', action: { queue: 'inbox' } }] })).status).toBe(200);
    const before = await counts();
    const delivery = randomUUID();
    const r = await github(w, 'push', githubPush, w.signing_secret!, delivery);
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ code: 'unavailable', routing: { stage: 'rule', rule_index: 0, rule_name: 'issue numbers', action: 'fault', cause: 'error' } });
    expect(r.json.error).toContain('routing faulted at rule 0 (issue numbers)');
    expect(await counts()).toEqual({ todos: before.todos, events: before.events + 1 });
    expect(await eventRow(r.json.event_id)).toMatchObject({ disposition: 'faulted', routing: { cause: 'error' } });
    expect(await counter('switchboard_routing_decisions_total', { action: 'fault' })).toBe(decisions + 1);
    expect(await counter('switchboard_routing_faults_total', { cause: 'error' })).toBe(faults + 1);

    // The rule is fixed; GitHub's redelivery (same body, same id) is routed, not taken for a replay.
    expect((await putRules(e, w, { rules: [{ name: 'issue numbers', when: 'has(payload.issue) && payload.issue.number > 1', action: { queue: 'inbox' } }] })).status).toBe(200);
    const retry = await github(w, 'push', githubPush, w.signing_secret!, delivery);
    expect(retry.status).toBe(202);
    expect(retry.json).toMatchObject({ dropped: true, routing: { stage: 'default' } });
    await putRules(e, w, presets);
  });

  it('faults every delivery, counted as a fault decision, while a stored rule no longer compiles', async () => {
    const decisions = await counter('switchboard_routing_decisions_total', { action: 'fault' });
    // As a rule saved under an older check would be: written past the API, which would refuse it.
    await db.sql`update webhooks set routing_rules = ${db.sql.json([{ name: 'old', when: 'payload.body.matches("a+")', action: { drop: true } }] as never)}::jsonb where id = ${w.webhook_id}`;
    await app.services.webhooks.afterChange(w.webhook_id);
    const before = await counts();
    const r = await github(w, 'push', githubPush, w.signing_secret!);
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ code: 'unavailable', routing: { action: 'fault', cause: 'error', message: expect.stringContaining('regular expressions') } });
    expect(await counts()).toEqual({ todos: before.todos, events: before.events + 1 });
    expect(await counter('switchboard_routing_decisions_total', { action: 'fault' })).toBe(decisions + 1);
    expect((await putRules(e, w, presets)).status).toBe(200);
  });

  it('a write answers a dry run over the latest events: what each would become beside what it became', async () => {
    await github(w, 'issue_comment', githubIssueCommentCreated, w.signing_secret!);
    expect((await github(w, 'ping', githubPing, w.signing_secret!)).status).toBe(200);
    const rules = { rules: [{ name: 'comments', when: 'event == "issue_comment"', action: { queue: 'inbox' } }], default_action: null };
    const tested = await api('POST', `${rulesPath(e, w)}/test`, rules);
    expect(tested.status).toBe(200);
    const rows = tested.json.dry_run as { event: string; would: any; did: any }[];
    expect(rows.length).toBeGreaterThanOrEqual(5);
    const comment = rows.find((x) => x.event === 'issue_comment')!;
    expect(comment).toMatchObject({ would: { action: 'queue', queue: 'inbox', trace: { rule_name: 'comments' } }, did: { disposition: 'dropped', todos: [] } });
    expect(comment).toMatchObject({ routed: true });
    // A ping is recorded before routing: the rules never see it, and the dry run says so.
    expect(rows.find((x) => x.event === 'ping')).toMatchObject({ routed: false, did: { disposition: 'recorded' } });
    const check = rows.find((x) => x.event === 'check_run')!;
    expect(check).toMatchObject({ would: { action: 'queue', queue: 'inbox', trace: { stage: 'default' } }, did: { disposition: 'dropped' } });
    // A test saves nothing.
    expect((await api('GET', rulesPath(e, w))).json.rules).toEqual(presets.rules);
  });
});

describe('fan-out to other endpoints of the same human', () => {
  it('makes one todo per target in one transaction; a redelivery makes none; a target revoked since is skipped, said so', async () => {
    const owner = await vend(['inbox']);
    const reviewer = await vend(['reviews']);
    const fixer = await vend(['reviews', 'inbox']);
    const w = await createWebhook(owner.slug, 'github', 'inbox');
    const rules = { rules: [{ name: 'both', when: 'event == "pull_request"', action: { queue: 'reviews', endpoints: [reviewer.slug, fixer.id] } }] };
    const saved = await putRules(owner, w, rules);
    expect(saved.status).toBe(200);
    // Saved by slug, whichever way it was named.
    expect(saved.json.rules[0].action.endpoints).toEqual([reviewer.slug, fixer.slug]);

    const delivery = randomUUID();
    const r = await github(w, 'pull_request', githubPullRequestOpened, w.signing_secret!, delivery);
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ created: 2, routing: { action: 'fanout', endpoints: [reviewer.slug, fixer.slug] } });
    const made = await todosOfEvent(r.json.event_id);
    expect(made.map((t) => [t.endpoint_id, t.queue])).toEqual([
      [reviewer.id, 'reviews'],
      [fixer.id, 'reviews'],
    ]);
    expect(made.every((t) => t.routing.action === 'fanout')).toBe(true);
    expect(await eventRow(r.json.event_id)).toMatchObject({ disposition: 'routed' });

    const before = await counts();
    const again = await github(w, 'pull_request', githubPullRequestOpened, w.signing_secret!, delivery);
    expect(again.json).toMatchObject({ created: 0 });
    expect(await counts()).toEqual(before);

    expect((await api('POST', `/api/v1/endpoints/${fixer.slug}/revoke`)).status).toBe(200);
    const later = await github(w, 'pull_request', { ...githubPullRequestOpened, number: 77, pull_request: { ...githubPullRequestOpened.pull_request, number: 77 } }, w.signing_secret!);
    expect(later.json).toMatchObject({ created: 1, skipped: [{ endpoint: fixer.slug, reason: 'revoked' }] });
    // And a save now refuses it.
    const refused = await putRules(owner, w, rules);
    expect(refused.status).toBe(400);
    expect(refused.json.field).toBe('rules.0.action.endpoints.1');
  });
});

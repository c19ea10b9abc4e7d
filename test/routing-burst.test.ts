import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.ts';
import {
  githubHeaders,
  githubIssueCommentCreated,
  githubIssueOpened,
  githubPullRequestOpened,
  githubPullRequestReviewRequested,
  githubPush,
  githubRepository,
} from '../src/domain/ingest/fixtures.testkit.ts';
import type { ManualClock } from '../src/lib/clock.ts';
import { connectAgent, settle, until, type Agent } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp, vend, type Api, type TestDb, type Vended } from './support/fixtures.ts';

// Issue 37's acceptance: a pull request's burst of 30 GitHub deliveries, half to each of two
// instances on one database, through a webhook carrying the documented presets (docs/presets/*.json)
// combined into one rules write. One todo, one doorbell; every other delivery an event that says
// what became of it and which rule decided. Then each preset alone: it saves (200) and its dry run
// over every stored delivery faults on none and matches what the preset says it matches.

const BOT = 'hubot'; // the fixtures' requested reviewer and commenter
const KEY = randomBytes(32).toString('hex');

// ---------------------------------------------------------------------------------------------
// The presets, as documented

interface RulesWrite {
  rules: { name: string; when: string; action: Record<string, unknown> }[];
  params: Record<string, unknown>;
  default_action: Record<string, unknown> | null;
}
const preset = (name: string): RulesWrite => JSON.parse(readFileSync(new URL(`../docs/presets/${name}.json`, import.meta.url), 'utf8')) as RulesWrite;
const PRESETS = ['drop-ci-noise', 'review-requested', 'issues-labelled-or-assigned', 'mentions'] as const;
/** Each preset's params as this test's bot sets them (the files carry placeholders). */
const OUR_PARAMS = { bot: BOT, labels: ['agent'] };

/** docs/routing.md's way to combine presets: rules in order, params merged, everything else dropped. */
function combined(...names: string[]): RulesWrite {
  const parts = names.map(preset);
  return { rules: parts.flatMap((p) => p.rules), params: { ...Object.assign({}, ...parts.map((p) => p.params)), ...OUR_PARAMS }, default_action: { drop: true } };
}

// ---------------------------------------------------------------------------------------------
// GitHub's payloads for a pull request's life, from the fixtures' pieces and GitHub's documented shapes

const octocat = githubPullRequestOpened.sender;
const hubot = githubPullRequestReviewRequested.requested_reviewer;
const pr = githubPullRequestOpened.pull_request;
const actions = { id: 15368, slug: 'github-actions', name: 'GitHub Actions', owner: { login: 'github', id: 9919, type: 'Organization' } };
const actionsBot = { login: 'github-actions[bot]', id: 41898282, type: 'Bot', site_admin: false };
const prRef = {
  url: pr.url,
  id: pr.id,
  number: pr.number,
  head: { ref: pr.head.ref, sha: pr.head.sha, repo: { id: githubRepository.id, url: githubRepository.url, name: githubRepository.name } },
  base: { ref: pr.base.ref, sha: pr.base.sha, repo: { id: githubRepository.id, url: githubRepository.url, name: githubRepository.name } },
};
const withReviewer = { ...githubPullRequestReviewRequested.pull_request };

const synchronize = (i: number) => ({
  action: 'synchronize',
  number: pr.number,
  before: i === 0 ? pr.head.sha : `a${i}${pr.head.sha.slice(2)}`,
  after: `b${i}${pr.head.sha.slice(2)}`,
  pull_request: { ...withReviewer, commits: pr.commits + i + 1, head: { ...pr.head, sha: `b${i}${pr.head.sha.slice(2)}` } },
  repository: githubRepository,
  sender: octocat,
});

const checkRun = (i: number) => ({
  action: i % 2 === 0 ? 'created' : 'completed',
  check_run: {
    id: 4000000000 + i,
    name: `test (${i >> 1})`,
    node_id: `CR_kwDOABCD5c8AAAAB${i}`,
    head_sha: pr.head.sha,
    external_id: randomUUID(),
    url: `https://api.github.com/repos/octo/repo/check-runs/${4000000000 + i}`,
    html_url: `https://github.com/octo/repo/actions/runs/9876543210/job/${4000000000 + i}`,
    status: i % 2 === 0 ? 'in_progress' : 'completed',
    conclusion: i % 2 === 0 ? null : 'success',
    started_at: '2026-01-05T09:02:00Z',
    completed_at: i % 2 === 0 ? null : '2026-01-05T09:04:00Z',
    output: { title: null, summary: null, text: null, annotations_count: 0 },
    check_suite: { id: 5000000000, head_branch: pr.head.ref, head_sha: pr.head.sha, status: 'in_progress', conclusion: null },
    app: actions,
    pull_requests: [prRef],
  },
  repository: githubRepository,
  sender: actionsBot,
});

const checkSuite = (i: number) => ({
  action: i === 0 ? 'requested' : 'completed',
  check_suite: {
    id: 5000000000,
    node_id: 'CS_kwDOABCD5c8AAAABKrM3pg',
    head_branch: pr.head.ref,
    head_sha: pr.head.sha,
    status: i === 0 ? 'queued' : 'completed',
    conclusion: i === 0 ? null : 'success',
    url: 'https://api.github.com/repos/octo/repo/check-suites/5000000000',
    before: pr.base.sha,
    after: pr.head.sha,
    pull_requests: [prRef],
    app: actions,
    created_at: '2026-01-05T09:01:50Z',
    updated_at: '2026-01-05T09:05:00Z',
    latest_check_runs_count: 10,
    head_commit: { id: pr.head.sha, tree_id: 'f9d2a07e9488b91af2641b26b9407fe22a451433', message: 'Cap doorbell retries', timestamp: '2026-01-05T09:01:40Z' },
  },
  repository: githubRepository,
  sender: actionsBot,
});

const workflowJob = (i: number) => {
  const status = ['queued', 'in_progress', 'completed'][i % 3]!;
  return {
    action: status,
    workflow_job: {
      id: 30000000000 + i,
      run_id: 9876543210,
      workflow_name: 'CI',
      head_branch: pr.head.ref,
      run_url: 'https://api.github.com/repos/octo/repo/actions/runs/9876543210',
      run_attempt: 1,
      node_id: `CR_kwDOABCD5c8AAAAHJ${i}`,
      head_sha: pr.head.sha,
      html_url: `https://github.com/octo/repo/actions/runs/9876543210/job/${30000000000 + i}`,
      status,
      conclusion: status === 'completed' ? 'success' : null,
      created_at: '2026-01-05T09:01:55Z',
      started_at: '2026-01-05T09:02:00Z',
      completed_at: status === 'completed' ? '2026-01-05T09:04:00Z' : null,
      name: `test (${i})`,
      steps: status === 'queued' ? [] : [{ name: 'Set up job', status: 'completed', conclusion: 'success', number: 1 }],
      labels: ['ubuntu-latest'],
      runner_id: status === 'queued' ? null : 7,
      runner_name: status === 'queued' ? null : 'GitHub Actions 7',
    },
    repository: githubRepository,
    sender: octocat,
  };
};

// A commit status has no `action`, no pull request, and repeats the repository's name as `name`.
const commitStatus = (i: number) => ({
  id: 6000000000 + i,
  sha: pr.head.sha,
  name: githubRepository.full_name,
  target_url: 'https://ci.example.com/build/318',
  context: i === 0 ? 'ci/lint' : 'ci/build',
  description: 'The build succeeded',
  state: 'success',
  commit: { sha: pr.head.sha, node_id: 'C_kwDOABCD5c4AAA', html_url: `https://github.com/octo/repo/commit/${pr.head.sha}`, commit: { message: 'Cap doorbell retries' } },
  branches: [{ name: pr.head.ref, commit: { sha: pr.head.sha, url: `https://api.github.com/repos/octo/repo/commits/${pr.head.sha}` }, protected: false }],
  created_at: '2026-01-05T09:03:00Z',
  updated_at: '2026-01-05T09:03:00Z',
  repository: githubRepository,
  sender: octocat,
});

// The pull request is an issue too: a comment on it is an issue_comment whose issue has `pull_request`.
const prAsIssue = {
  ...githubIssueCommentCreated.issue,
  number: pr.number,
  title: pr.title,
  html_url: pr.html_url,
  labels: [],
  pull_request: { url: pr.url, html_url: pr.html_url },
};
const comment = (by: typeof octocat, body: string) => ({
  ...githubIssueCommentCreated,
  issue: prAsIssue,
  comment: { ...githubIssueCommentCreated.comment, id: 1234567891, user: by, body },
  sender: by,
});

const reviewComment = (by: typeof octocat, body: string) => ({
  action: 'created',
  comment: {
    url: 'https://api.github.com/repos/octo/repo/pulls/comments/2234567890',
    id: 2234567890,
    pull_request_review_id: 3234567890,
    diff_hunk: '@@ -10,6 +10,8 @@ export function ring()',
    path: 'src/doorbell/doorbell.ts',
    commit_id: pr.head.sha,
    original_commit_id: pr.head.sha,
    user: by,
    body,
    created_at: '2026-01-05T09:06:00Z',
    updated_at: '2026-01-05T09:06:00Z',
    html_url: `${pr.html_url}#discussion_r2234567890`,
    author_association: 'MEMBER',
    line: 12,
    side: 'RIGHT',
  },
  pull_request: pr,
  repository: githubRepository,
  sender: by,
});

const issueLabeled = {
  ...githubIssueOpened,
  action: 'labeled',
  issue: { ...githubIssueOpened.issue, number: 13, labels: [...githubIssueOpened.issue.labels, { id: 208045947, node_id: 'MDU6TGFiZWwyMDgwNDU5NDc=', name: 'agent', color: '0e8a16', default: false }] },
  label: { id: 208045947, node_id: 'MDU6TGFiZWwyMDgwNDU5NDc=', name: 'agent', color: '0e8a16', default: false },
};
const issueAssigned = {
  ...githubIssueOpened,
  action: 'assigned',
  issue: { ...githubIssueOpened.issue, number: 14, assignee: hubot, assignees: [hubot] },
  assignee: hubot,
};

interface Delivery {
  event: string;
  payload: unknown;
  /** What the combined rules should make of it: the deciding rule's name, or null for the default. */
  rule: string | null;
}

const CI = 'drop CI noise';
const REVIEW = 'review requested from the bot';

/** 30 deliveries, as GitHub sends them around one pull request. */
const BURST: Delivery[] = [
  { event: 'pull_request', payload: githubPullRequestOpened, rule: null },
  { event: 'check_suite', payload: checkSuite(0), rule: CI },
  ...Array.from({ length: 5 }, (_, i) => ({ event: 'workflow_job', payload: workflowJob(i), rule: CI })),
  ...Array.from({ length: 5 }, (_, i) => ({ event: 'check_run', payload: checkRun(i), rule: CI })),
  { event: 'pull_request', payload: githubPullRequestReviewRequested, rule: REVIEW },
  { event: 'status', payload: commitStatus(0), rule: CI },
  { event: 'push', payload: { ...githubPush, ref: `refs/heads/${pr.head.ref}` }, rule: null },
  { event: 'pull_request', payload: synchronize(0), rule: REVIEW },
  ...Array.from({ length: 5 }, (_, i) => ({ event: 'check_run', payload: checkRun(5 + i), rule: CI })),
  ...Array.from({ length: 5 }, (_, i) => ({ event: 'workflow_job', payload: workflowJob(5 + i), rule: CI })),
  { event: 'pull_request', payload: synchronize(1), rule: REVIEW },
  { event: 'check_suite', payload: checkSuite(1), rule: CI },
  { event: 'status', payload: commitStatus(1), rule: CI },
  { event: 'issue_comment', payload: comment(hubot, 'Reviewing now; @octocat, the retry cap looks right.'), rule: null },
];

/** After the burst: what the other presets are for, each dropped by the burst's rules. */
const OTHERS: Delivery[] = [
  { event: 'issues', payload: issueLabeled, rule: null },
  { event: 'issues', payload: issueAssigned, rule: null },
  { event: 'issue_comment', payload: comment(octocat, `@${BOT} could you take another look?`), rule: null },
  { event: 'pull_request_review_comment', payload: reviewComment(octocat, `Is this off by one, @${BOT}?`), rule: null },
];

// ---------------------------------------------------------------------------------------------

let db: TestDb;
let a: App & { clock: ManualClock };
let b: App & { clock: ManualClock };
let viaA: Api;
let viaB: Api;
let agent: Agent;
let e: Vended;
let webhookId = '';
let secret = '';
/** The webhook's ingest URL on each instance: the same path, each instance's own host and port. */
let ingestUrls: string[] = [];
const eventIds = new Map<Delivery, string>();

beforeAll(async () => {
  db = await migratedDatabase();
  const env = { SWITCHBOARD_SECRET_ENCRYPTION_KEY: KEY };
  [a, b] = await Promise.all([startTestApp(db.url, undefined, { env }), startTestApp(db.url, undefined, { env })]);
  const { token } = await humanWithToken(db.sql);
  viaA = apiCaller(a.url, token);
  viaB = apiCaller(b.url, token);
  e = await vend(viaA, { name: 'review-bot', queues: ['reviews', 'inbox'] });
  const created = await viaA('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'inbox' });
  expect(created.status).toBe(201);
  webhookId = created.json.webhook_id;
  secret = created.json.signing_secret;
  const path = new URL(created.json.ingest_url as string).pathname;
  ingestUrls = [`${a.url}${path}`, `${b.url}${path}`];
});
afterAll(async () => {
  await agent?.client.close().catch(() => {});
  await Promise.all([a?.stop(), b?.stop()]);
  await db?.drop();
});

const rulesPath = () => `/api/v1/endpoints/${e.slug}/webhooks/${webhookId}/rules`;

async function deliver(d: Delivery, i: number): Promise<{ status: number; json: any }> {
  const body = JSON.stringify(d.payload);
  const res = await fetch(ingestUrls[i % 2]!, { method: 'POST', headers: githubHeaders(d.event, body, secret), body });
  return { status: res.status, json: await res.json() };
}

describe('a pull request burst through the presets on two instances', () => {
  it('makes one todo and one doorbell; every other delivery is an event that says why', async () => {
    const write = combined('drop-ci-noise', 'review-requested');
    const saved = await viaB('PUT', rulesPath(), write);
    expect(saved.status, saved.text).toBe(200);
    expect(saved.json.rules.map((r: { name: string }) => r.name)).toEqual([CI, REVIEW]);
    expect(saved.json.dry_run).toEqual([]);

    agent = await connectAgent(a, e);
    expect(BURST).toHaveLength(30);
    const answers = await Promise.all(BURST.map((d, i) => deliver(d, i)));

    for (const [i, r] of answers.entries()) {
      const d = BURST[i]!;
      expect(r.status, `${i}: ${d.event} ${JSON.stringify(r.json)}`).toBe(202);
      expect(r.json.routing, `${i}: ${d.event}`).toMatchObject(d.rule === null ? { stage: 'default', rule_name: null, action: 'drop' } : { stage: 'rule', rule_name: d.rule });
      eventIds.set(d, r.json.event_id);
    }
    const made = answers.filter((r) => r.json.created === 1);
    expect(made).toHaveLength(1);
    const todoId = made[0]!.json.id as string;
    // The other two deliveries about the review (a review request and two pushes to the branch) are repeats of it.
    const reviews = answers.filter((_, i) => BURST[i]!.rule === REVIEW);
    expect(reviews.map((r) => r.json.id)).toEqual([todoId, todoId, todoId]);
    expect(reviews.filter((r) => r.json.repeat === true)).toHaveLength(2);

    // One todo in the database, traced with its rule.
    const todos = await db.sql<{ id: string; queue: string; kind: string; routing: any }[]>`select id, queue, kind, routing from todos where endpoint_id = ${e.id}`;
    expect(todos).toEqual([{ id: todoId, queue: 'reviews', kind: 'pull_request', routing: { stage: 'rule', rule_index: 1, rule_name: REVIEW, action: 'queue', queue: 'reviews', once: true } }]);

    // One doorbell, heard by the agent on A whichever instance made the todo, and one ring record.
    await until(() => agent.heard.some((n) => n.params.meta.todo_id === todoId), 'the doorbell');
    await settle(500);
    expect(agent.heard.map((n) => n.params.meta.todo_id ?? n.params.meta.kind)).toEqual([todoId]);
    const rings = await db.sql<{ todo_id: string; kind: string }[]>`select todo_id, kind from doorbell_rings where endpoint_id = ${e.id}`;
    expect(rings).toEqual([{ todo_id: todoId, kind: 'todo' }]);

    // Thirty events, as either instance lists them: one routed, two repeats, 27 dropped, each traced.
    const listed = await viaB('GET', `/api/v1/events?endpoint=${e.slug}&limit=100`);
    expect(listed.status).toBe(200);
    const events = listed.json.events as { id: string; event_type: string; disposition: string; routing: any; todo_id: string | null }[];
    expect(events).toHaveLength(30);
    const byId = new Map(events.map((ev) => [ev.id, ev]));
    const tally: Record<string, number> = {};
    for (const d of BURST) {
      const ev = byId.get(eventIds.get(d)!)!;
      tally[ev.disposition] = (tally[ev.disposition] ?? 0) + 1;
      expect(ev.event_type).toBe(d.event);
      if (d.rule === REVIEW) {
        expect(ev.disposition).toMatch(/^(routed|repeat)$/);
        expect(ev.routing).toMatchObject({ stage: 'rule', rule_index: 1, rule_name: REVIEW, action: 'queue' });
      } else {
        expect(ev.disposition, `${d.event}`).toBe('dropped');
        expect(ev.todo_id).toBeNull();
        expect(ev.routing).toEqual(d.rule === CI ? { stage: 'rule', rule_index: 0, rule_name: CI, action: 'drop' } : { stage: 'default', rule_index: null, rule_name: null, action: 'drop' });
      }
    }
    expect(tally).toEqual({ routed: 1, repeat: 2, dropped: 27 });

    // Counted on whichever instance took each delivery: 30 decisions, no fault.
    const decisions = async (app: App, action: string) => (await app.services.metrics.registry.getSingleMetric('switchboard_routing_decisions_total')!.get()).values.find((v) => v.labels.action === action)?.value ?? 0;
    expect((await decisions(a, 'drop')) + (await decisions(b, 'drop'))).toBe(27);
    expect((await decisions(a, 'queue')) + (await decisions(b, 'queue'))).toBe(3);
    expect((await decisions(a, 'fault')) + (await decisions(b, 'fault'))).toBe(0);
  });

  it('drops what the other presets are for under these rules', async () => {
    const answers = await Promise.all(OTHERS.map((d, i) => deliver(d, i)));
    for (const [i, r] of answers.entries()) {
      expect(r.status, OTHERS[i]!.event).toBe(202);
      eventIds.set(OTHERS[i]!, r.json.event_id);
      expect(r.json).toMatchObject({ created: 0, dropped: true, routing: { stage: 'default' } });
    }
  });

  it('each preset saves as written, and none faults on any stored delivery (its dry run)', async () => {
    for (const name of PRESETS) {
      const r = await viaA('PUT', rulesPath(), preset(name));
      expect(r.status, `${name}: ${r.text}`).toBe(200);
      expect(r.json.dry_run, name).toHaveLength(BURST.length + OTHERS.length);
      const faults = (r.json.dry_run as { event: string; would: { action: string; trace: unknown } }[]).filter((row) => row.would.action === 'fault');
      expect(faults, name).toEqual([]);
    }
  });

  it("each preset, with this bot's params, matches what it says and nothing else, faulting on none", async () => {
    const everything = [...BURST, ...OTHERS];
    const expected: Record<(typeof PRESETS)[number], (d: Delivery) => boolean> = {
      'drop-ci-noise': (d) => d.rule === CI,
      'review-requested': (d) => d.rule === REVIEW,
      'issues-labelled-or-assigned': (d) => d.payload === issueLabeled || d.payload === issueAssigned,
      // The two comments by someone else that mention the bot; never the bot's own comment.
      mentions: (d) => OTHERS.slice(2).includes(d),
    };
    for (const name of PRESETS) {
      const write = { ...preset(name), params: OUR_PARAMS };
      const tested = await viaB('POST', `${rulesPath()}/test`, write);
      expect(tested.status, `${name}: ${tested.text}`).toBe(200);
      const rows = new Map((tested.json.dry_run as { event_id: string; would: { action: string; trace: { stage: string; rule_name: string | null } } }[]).map((row) => [row.event_id, row.would]));
      expect(rows.size).toBe(everything.length);
      for (const d of everything) {
        const would = rows.get(eventIds.get(d) ?? '')!;
        expect(would, `${name}: ${d.event}`).toBeDefined();
        expect(would.action, `${name}: ${d.event}`).not.toBe('fault');
        expect(would.trace.stage === 'rule', `${name} on ${d.event} ${JSON.stringify((d.payload as { action?: string }).action ?? '')}`).toBe(expected[name](d));
      }
    }
  });
});

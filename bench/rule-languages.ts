/**
 * Issue 37 item 2: three expression languages for webhook routing rules, measured side by side in
 * one run: CEL (@marcbachmann/cel-js), JSONata (jsonata) and jq compiled to WebAssembly. The same
 * eight rules are written in each language and checked to agree on a set of deliveries before
 * anything is timed.
 *
 * jq is measured through jq-web. jq-wasm, the first choice, works but cannot take a large
 * delivery: its raw() feeds the input to jq's stdin one byte per callback and copies the rest of
 * the input for each byte (`stdinBuffer = stdinBuffer.slice(1)`), so time grows with the square of
 * the size (the jq_wasm_input_* probes: ~0.1 s at 20 KiB, about a second at 160 KiB, not done
 * after the deadline at 1 MiB). jq-web writes the input to an in-memory file and stays linear.
 *
 *   npx tsx bench/rule-languages.ts [--json] [--quick] [--deliveries 10000] [--probe-timeout 3000]
 *   npm run bench:rules-lang            (installs bench/package.json's packages first)
 *
 * Figures: compile time per rule; evaluation time per rule and for all eight per delivery on a
 * ~20 KB GitHub pull_request envelope (median, p99); the same on 1 MiB envelopes (a long pull
 * request body, a long comment, a push with thousands of commits); the heap the compiled rules of
 * 100 webhooks keep and the RSS growth over 10,000 deliveries (a child process each); and what
 * happens, for real, when an expression loops, recurses, scans quadratically or backtracks (a
 * child process each, killed after --probe-timeout ms, so this script never hangs).
 *
 * Every figure comes from one run on a shared 2-core machine: compare languages within a run,
 * not runs with each other. Results go to bench/results/rule-languages-<YYYY-MM-DD-HHMM>.json;
 * with --json the same object is the last line of stdout.
 *
 * The libraries live in bench/package.json (npm --prefix bench ci), not in the main install, so
 * they are loaded by name at run time and typed here by the little of them this script uses.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const THIS_FILE = fileURLToPath(import.meta.url);
const BENCH_DIR = path.dirname(THIS_FILE);

const { values: args } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    deliveries: { type: 'string', default: '10000' },
    'probe-timeout': { type: 'string', default: '3000' },
    child: { type: 'string' },
    lang: { type: 'string' },
    probe: { type: 'string' },
  },
});
const QUICK = args.quick;
const DELIVERIES = Number(args.deliveries) / (QUICK ? 10 : 1);
const PROBE_TIMEOUT_MS = Number(args['probe-timeout']);

// ---------------------------------------------------------------------------------------------
// The libraries, by the little of their API used here.

interface CelProgram {
  (context: Record<string, unknown>): unknown;
  check(): { valid: boolean; error?: Error };
}
interface CelEnvironment {
  registerVariable(name: string, type: string): CelEnvironment;
  parse(source: string): CelProgram;
  check(source: string): { valid: boolean; error?: Error };
}
interface CelModule {
  Environment: new (options?: Record<string, unknown>) => CelEnvironment;
}
interface JsonataOptions {
  timeout?: number;
  stack?: number;
  sequence?: number;
}
interface JsonataExpression {
  evaluate(input: unknown, bindings?: Record<string, unknown>): Promise<unknown>;
}
type Jsonata = (source: string, options?: JsonataOptions) => JsonataExpression;
/** jq-web: a promise of { raw }, whose raw() then runs synchronously. */
interface JqWeb {
  raw(input: string, filter: string, flags?: string[]): string;
}
/** jq-wasm: raw() is async and feeds the input to jq's stdin a byte at a time. */
interface JqWasm {
  raw(input: string, filter: string, flags?: string[]): Promise<string>;
}

/** Imported by a name held in a variable: resolved from bench/node_modules at run time only. */
const importByName = (name: string): Promise<Record<string, unknown>> => import(name) as Promise<Record<string, unknown>>;

async function loadCel(): Promise<CelModule> {
  return (await importByName('@marcbachmann/cel-js')) as unknown as CelModule;
}
async function loadJsonata(): Promise<Jsonata> {
  return (await importByName('jsonata')).default as Jsonata;
}
async function loadJq(): Promise<JqWeb> {
  return await ((await importByName('jq-web')).default as Promise<JqWeb>);
}
async function loadJqWasm(): Promise<JqWasm> {
  // CommonJS marked __esModule without a default: its functions are the namespace's own.
  const m = await importByName('jq-wasm');
  return (typeof m.raw === 'function' ? m : m.default) as JqWasm;
}

function packageVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(BENCH_DIR, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'missing';
  }
}

// ---------------------------------------------------------------------------------------------
// Deliveries: GitHub's documented payload shapes (values invented), and the envelope the server
// builds around a delivery.

const API = 'https://api.github.com';

function githubUser(login: string, id: number, type: 'User' | 'Organization' | 'Bot' = 'User') {
  const url = `${API}/users/${login}`;
  return {
    login,
    id,
    node_id: Buffer.from(`04:User${id}`).toString('base64'),
    avatar_url: `https://avatars.githubusercontent.com/u/${id}?v=4`,
    gravatar_id: '',
    url,
    html_url: `https://github.com/${login}`,
    followers_url: `${url}/followers`,
    following_url: `${url}/following{/other_user}`,
    gists_url: `${url}/gists{/gist_id}`,
    starred_url: `${url}/starred{/owner}{/repo}`,
    subscriptions_url: `${url}/subscriptions`,
    organizations_url: `${url}/orgs`,
    repos_url: `${url}/repos`,
    events_url: `${url}/events{/privacy}`,
    received_events_url: `${url}/received_events`,
    type,
    user_view_type: 'public',
    site_admin: false,
  };
}

function githubRepository(owner: ReturnType<typeof githubUser>, name: string, id: number) {
  const full = `${owner.login}/${name}`;
  const url = `${API}/repos/${full}`;
  return {
    id,
    node_id: Buffer.from(`010:Repository${id}`).toString('base64'),
    name,
    full_name: full,
    private: false,
    owner,
    html_url: `https://github.com/${full}`,
    description: 'A queue for robots',
    fork: false,
    url,
    forks_url: `${url}/forks`,
    keys_url: `${url}/keys{/key_id}`,
    collaborators_url: `${url}/collaborators{/collaborator}`,
    teams_url: `${url}/teams`,
    hooks_url: `${url}/hooks`,
    issue_events_url: `${url}/issues/events{/number}`,
    events_url: `${url}/events`,
    assignees_url: `${url}/assignees{/user}`,
    branches_url: `${url}/branches{/branch}`,
    tags_url: `${url}/tags`,
    blobs_url: `${url}/git/blobs{/sha}`,
    git_tags_url: `${url}/git/tags{/sha}`,
    git_refs_url: `${url}/git/refs{/sha}`,
    trees_url: `${url}/git/trees{/sha}`,
    statuses_url: `${url}/statuses/{sha}`,
    languages_url: `${url}/languages`,
    stargazers_url: `${url}/stargazers`,
    contributors_url: `${url}/contributors`,
    subscribers_url: `${url}/subscribers`,
    subscription_url: `${url}/subscription`,
    commits_url: `${url}/commits{/sha}`,
    git_commits_url: `${url}/git/commits{/sha}`,
    comments_url: `${url}/comments{/number}`,
    issue_comment_url: `${url}/issues/comments{/number}`,
    contents_url: `${url}/contents/{+path}`,
    compare_url: `${url}/compare/{base}...{head}`,
    merges_url: `${url}/merges`,
    archive_url: `${url}/{archive_format}{/ref}`,
    downloads_url: `${url}/downloads`,
    issues_url: `${url}/issues{/number}`,
    pulls_url: `${url}/pulls{/number}`,
    milestones_url: `${url}/milestones{/number}`,
    notifications_url: `${url}/notifications{?since,all,participating}`,
    labels_url: `${url}/labels{/name}`,
    releases_url: `${url}/releases{/id}`,
    deployments_url: `${url}/deployments`,
    created_at: '2024-03-01T10:00:00Z',
    updated_at: '2026-01-05T08:59:00Z',
    pushed_at: '2026-01-05T08:58:00Z',
    git_url: `git://github.com/${full}.git`,
    ssh_url: `git@github.com:${full}.git`,
    clone_url: `https://github.com/${full}.git`,
    svn_url: `https://github.com/${full}`,
    homepage: null,
    size: 4213,
    stargazers_count: 87,
    watchers_count: 87,
    language: 'TypeScript',
    has_issues: true,
    has_projects: true,
    has_downloads: true,
    has_wiki: false,
    has_pages: false,
    has_discussions: false,
    forks_count: 9,
    mirror_url: null,
    archived: false,
    disabled: false,
    open_issues_count: 23,
    license: { key: 'mit', name: 'MIT License', spdx_id: 'MIT', url: `${API}/licenses/mit`, node_id: 'MDc6TGljZW5zZTEz' },
    allow_forking: true,
    is_template: false,
    web_commit_signoff_required: false,
    topics: ['webhooks', 'agents', 'queue'],
    visibility: 'public',
    forks: 9,
    open_issues: 23,
    watchers: 87,
    default_branch: 'main',
    allow_squash_merge: true,
    allow_merge_commit: true,
    allow_rebase_merge: true,
    allow_auto_merge: false,
    delete_branch_on_merge: true,
    allow_update_branch: false,
    use_squash_pr_title_as_default: false,
    squash_merge_commit_message: 'COMMIT_MESSAGES',
    squash_merge_commit_title: 'COMMIT_OR_PR_TITLE',
    merge_commit_message: 'PR_TITLE',
    merge_commit_title: 'MERGE_MESSAGE',
  };
}

const octo = githubUser('octo', 9919, 'Organization');
const octocat = githubUser('octocat', 583231);
const hubot = githubUser('hubot', 1);
const monalisa = githubUser('monalisa', 2);
const bot = githubUser('switchboard-bot', 3, 'Bot');
const repo = githubRepository(octo, 'repo', 1296269);
const fork = githubRepository(octocat, 'repo', 1296270);

const label = (name: string, id: number) => ({
  id,
  node_id: Buffer.from(`05:Label${id}`).toString('base64'),
  url: `${repo.url}/labels/${name}`,
  name,
  color: 'd73a4a',
  default: false,
  description: `The ${name} label`,
});

interface PullRequestShape {
  action: string;
  reviewers?: ReturnType<typeof githubUser>[];
  labels?: string[];
  assignees?: ReturnType<typeof githubUser>[];
  additions?: number;
  deletions?: number;
  body?: string | null;
  repository?: ReturnType<typeof githubRepository>;
}

/** A pull_request delivery as GitHub documents it: three full repositories, users, links (~20 KB). */
function pullRequestPayload(s: PullRequestShape) {
  const r = s.repository ?? repo;
  const n = 42;
  const pr = `${r.url}/pulls/${n}`;
  const issue = `${r.url}/issues/${n}`;
  return {
    action: s.action,
    number: n,
    pull_request: {
      url: pr,
      id: 1934567890,
      node_id: 'PR_kwDOABCD5c5zT0aS',
      html_url: `${r.html_url}/pull/${n}`,
      diff_url: `${r.html_url}/pull/${n}.diff`,
      patch_url: `${r.html_url}/pull/${n}.patch`,
      issue_url: issue,
      number: n,
      state: 'open',
      locked: false,
      title: 'Add a retry budget to the doorbell',
      user: octocat,
      body: s.body === undefined ? 'Caps ring attempts per todo.\r\n\r\nCloses #12.\r\n\r\n- [x] tests\r\n- [x] docs' : s.body,
      created_at: '2026-01-05T08:59:40Z',
      updated_at: '2026-01-05T09:00:10Z',
      closed_at: null,
      merged_at: null,
      merge_commit_sha: null,
      assignee: s.assignees?.[0] ?? null,
      assignees: s.assignees ?? [],
      requested_reviewers: s.reviewers ?? [],
      requested_teams: [],
      labels: (s.labels ?? []).map((l, i) => label(l, 208045946 + i)),
      milestone: null,
      draft: false,
      commits_url: `${pr}/commits`,
      review_comments_url: `${pr}/comments`,
      review_comment_url: `${r.url}/pulls/comments{/number}`,
      comments_url: `${issue}/comments`,
      statuses_url: `${r.url}/statuses/6dcb09b5b57875f334f61aebed695e2e4193db5e`,
      head: { label: 'octocat:retry-budget', ref: 'retry-budget', sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e', user: octocat, repo: fork },
      base: { label: 'octo:main', ref: 'main', sha: '7638417db6d59f3c431d3e1f261cc637155684cd', user: octo, repo: r },
      _links: {
        self: { href: pr },
        html: { href: `${r.html_url}/pull/${n}` },
        issue: { href: issue },
        comments: { href: `${issue}/comments` },
        review_comments: { href: `${pr}/comments` },
        review_comment: { href: `${r.url}/pulls/comments{/number}` },
        commits: { href: `${pr}/commits` },
        statuses: { href: `${r.url}/statuses/6dcb09b5b57875f334f61aebed695e2e4193db5e` },
      },
      author_association: 'MEMBER',
      auto_merge: null,
      active_lock_reason: null,
      merged: false,
      mergeable: null,
      rebaseable: null,
      mergeable_state: 'unknown',
      merged_by: null,
      comments: 2,
      review_comments: 0,
      maintainer_can_modify: true,
      commits: 3,
      additions: s.additions ?? 120,
      deletions: s.deletions ?? 4,
      changed_files: 5,
    },
    ...(s.action === 'review_requested' && s.reviewers?.[0] ? { requested_reviewer: s.reviewers[0] } : {}),
    repository: r,
    organization: {
      login: 'octo',
      id: 9919,
      node_id: octo.node_id,
      url: `${API}/orgs/octo`,
      repos_url: `${API}/orgs/octo/repos`,
      events_url: `${API}/orgs/octo/events`,
      hooks_url: `${API}/orgs/octo/hooks`,
      issues_url: `${API}/orgs/octo/issues`,
      members_url: `${API}/orgs/octo/members{/member}`,
      public_members_url: `${API}/orgs/octo/public_members{/member}`,
      avatar_url: octo.avatar_url,
      description: 'Robots and their queues',
    },
    sender: octocat,
  };
}

function issuePayload(action: string, labels: string[], assignees: ReturnType<typeof githubUser>[], extra: Record<string, unknown> = {}) {
  const n = 12;
  const url = `${repo.url}/issues/${n}`;
  return {
    action,
    issue: {
      url,
      repository_url: repo.url,
      labels_url: `${url}/labels{/name}`,
      comments_url: `${url}/comments`,
      events_url: `${url}/events`,
      html_url: `${repo.html_url}/issues/${n}`,
      id: 2001234567,
      node_id: 'I_kwDOABCD5c53r9Xg',
      number: n,
      title: 'Doorbell rings twice after a redelivery',
      user: octocat,
      labels: labels.map((l, i) => label(l, 208045946 + i)),
      state: 'open',
      locked: false,
      assignee: assignees[0] ?? null,
      assignees,
      milestone: null,
      comments: 1,
      created_at: '2026-01-05T08:59:30Z',
      updated_at: '2026-01-05T09:01:00Z',
      closed_at: null,
      author_association: 'MEMBER',
      active_lock_reason: null,
      body: 'Steps to reproduce:\r\n1. Redeliver from the hook settings\r\n2. Watch the agent',
      reactions: { url: `${url}/reactions`, total_count: 0, '+1': 0, '-1': 0, laugh: 0, hooray: 0, confused: 0, heart: 0, rocket: 0, eyes: 0 },
      timeline_url: `${url}/timeline`,
      performed_via_github_app: null,
      state_reason: null,
    },
    ...extra,
    repository: repo,
    sender: octocat,
  };
}

const commentPayload = (body: string) =>
  issuePayload('created', ['bug'], [], {
    comment: {
      url: `${repo.url}/issues/comments/1234567890`,
      html_url: `${repo.html_url}/issues/12#issuecomment-1234567890`,
      issue_url: `${repo.url}/issues/12`,
      id: 1234567890,
      node_id: 'IC_kwDOABCD5c5JjBX2',
      user: hubot,
      created_at: '2026-01-05T09:01:00Z',
      updated_at: '2026-01-05T09:01:00Z',
      author_association: 'CONTRIBUTOR',
      body,
      reactions: { total_count: 0 },
      performed_via_github_app: null,
    },
  });

function pushPayload(commits: number, skipCiAt = -1, messageBytes = 60) {
  const filler = 'Tighten the retry budget and say why in the log line. '.repeat(Math.ceil(messageBytes / 55)).slice(0, messageBytes);
  return {
    ref: 'refs/heads/main',
    before: '7638417db6d59f3c431d3e1f261cc637155684cd',
    after: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
    repository: repo,
    pusher: { name: 'octocat', email: 'octocat@example.com' },
    sender: octocat,
    created: false,
    deleted: false,
    forced: false,
    base_ref: null,
    compare: `${repo.html_url}/compare/7638417db6d5...0d1a26e67d8f`,
    commits: Array.from({ length: commits }, (_, i) => ({
      id: i.toString(16).padStart(40, '0'),
      tree_id: (i + 1).toString(16).padStart(40, 'f'),
      distinct: true,
      message: `${i === skipCiAt ? '[skip ci] ' : ''}Commit ${i}: ${filler}`,
      timestamp: '2026-01-05T08:58:00Z',
      url: `${repo.html_url}/commit/${i.toString(16).padStart(40, '0')}`,
      author: { name: 'Octo Cat', email: 'octocat@example.com', username: 'octocat' },
      committer: { name: 'GitHub', email: 'noreply@github.com', username: 'web-flow' },
      added: [],
      removed: [],
      modified: ['src/doorbell.ts'],
    })),
  };
}

const workflowRunPayload = () => ({ action: 'completed', workflow_run: { id: 30433642, name: 'CI', status: 'completed', conclusion: 'failure', head_branch: 'main' }, repository: repo, sender: octocat });

/** What an operator sets on a webhook for its rules (≤16 KiB). */
interface Params {
  logins: string[];
  labels: string[];
  bot: string;
  repo: string;
  max_changes: number;
}
const PARAMS: Params = { logins: ['hubot', 'switchboard-bot'], labels: ['agent', 'needs-agent'], bot: 'switchboard-bot', repo: 'octo/repo', max_changes: 500 };

/** The envelope a rule sees: server-built fields beside the delivery's own JSON. */
interface Envelope {
  source: string;
  event: string;
  action: string | null;
  delivery_id: string;
  trust_mode: string;
  verified: boolean;
  headers: Record<string, string>;
  payload: Record<string, unknown>;
  repository: string | null;
  sender: string | null;
  number: number | null;
  labels: string[];
  assignees: string[];
  requested_reviewers: string[];
  subject: string | null;
  params: Params;
}

/** A delivery: its envelope, and its body as received (jq is handed text, not an object). */
interface Delivery {
  name: string;
  envelope: Envelope;
  raw: string;
}

let deliverySeq = 0;
function delivery(name: string, event: string, payload: Record<string, unknown>, params: Params = PARAMS, body?: string): Delivery {
  const p = payload as {
    action?: string;
    number?: number;
    repository?: { full_name: string };
    sender?: { login: string };
    issue?: { number: number; title: string; labels: { name: string }[]; assignees: { login: string }[] };
    pull_request?: { number: number; title: string; labels: { name: string }[]; assignees: { login: string }[]; requested_reviewers: { login: string }[] };
    comment?: unknown;
  };
  const subject = p.pull_request ?? p.issue;
  const raw = body ?? JSON.stringify(payload);
  const id = `8b1e2f30-${(deliverySeq++).toString(16).padStart(4, '0')}-11f0-9a9e-3c2f1c0e5d7a`;
  return {
    name,
    raw,
    envelope: {
      source: 'github',
      event,
      action: p.action ?? null,
      delivery_id: id,
      trust_mode: 'signed',
      verified: true,
      headers: {
        accept: '*/*',
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(raw)),
        'user-agent': 'GitHub-Hookshot/7a0f4e3',
        'x-github-delivery': id,
        'x-github-event': event,
        'x-github-hook-id': '459874633',
        'x-github-hook-installation-target-id': '1296269',
        'x-github-hook-installation-target-type': 'repository',
        'x-hub-signature': 'sha1=5d8b0fa0a4c6cbd4f3f7c0e1a3c5f3b3e9c1a2b4',
        'x-hub-signature-256': 'sha256=0c3b7d6c8b0e4a3d2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a',
      },
      payload,
      repository: p.repository?.full_name ?? null,
      sender: p.sender?.login ?? null,
      number: p.number ?? subject?.number ?? null,
      labels: subject?.labels.map((l) => l.name) ?? [],
      assignees: subject?.assignees.map((a) => a.login) ?? [],
      requested_reviewers: p.pull_request?.requested_reviewers.map((u) => u.login) ?? [],
      subject: subject?.title ?? null,
      params,
    },
  };
}

/** The envelope as JSON text for jq: the body as received is spliced in, not serialized again. */
function envelopeJson(d: Delivery): string {
  const { payload: _payload, ...rest } = d.envelope;
  return `${JSON.stringify(rest).slice(0, -1)},"payload":${d.raw}}`;
}

const MIB = 1024 * 1024;
/** Prose of about `bytes` bytes that never mentions the bot and never says [skip ci]. */
const prose = (bytes: number) => 'The doorbell rings once per todo; a redelivery must not ring it twice. '.repeat(Math.ceil(bytes / 71)).slice(0, bytes);

/** The ~20 KB pull_request deliveries the per-rule figures are measured on. */
function pullRequestDeliveries(): Delivery[] {
  return [
    delivery('pr review_requested hubot', 'pull_request', pullRequestPayload({ action: 'review_requested', reviewers: [hubot] })),
    delivery('pr review_requested monalisa', 'pull_request', pullRequestPayload({ action: 'review_requested', reviewers: [monalisa] })),
    delivery('pr opened, 2 reviewers, 3 labels', 'pull_request', pullRequestPayload({ action: 'opened', reviewers: [monalisa, bot], labels: ['bug', 'agent', 'infra'] })),
    delivery('pr synchronize, big change', 'pull_request', pullRequestPayload({ action: 'synchronize', reviewers: [hubot], additions: 900, deletions: 40 })),
    delivery('pr edited, long body', 'pull_request', pullRequestPayload({ action: 'edited', body: prose(6000), assignees: [octocat] })),
    delivery('pr closed, null body', 'pull_request', pullRequestPayload({ action: 'closed', body: null })),
    delivery('pr opened in a fork', 'pull_request', pullRequestPayload({ action: 'opened', repository: fork })),
    delivery('pr labeled', 'pull_request', pullRequestPayload({ action: 'labeled', labels: ['needs-agent'] })),
  ];
}

/** Deliveries of every kind the rules tell apart, for the agreement check. */
function mixedDeliveries(): Delivery[] {
  return [
    ...pullRequestDeliveries(),
    delivery('issues labeled agent', 'issues', issuePayload('labeled', ['bug', 'agent'], [])),
    delivery('issues labeled bug', 'issues', issuePayload('labeled', ['bug'], [])),
    delivery('issues assigned bot', 'issues', issuePayload('assigned', [], [bot, octocat, monalisa])),
    delivery('issues assigned octocat', 'issues', issuePayload('assigned', [], [octocat])),
    delivery('comment mentions bot', 'issue_comment', commentPayload('Could @switchboard-bot take this one?')),
    delivery('comment without mention', 'issue_comment', commentPayload('I can reproduce this on main.')),
    delivery('push', 'push', pushPayload(3)),
    delivery('push [skip ci]', 'push', pushPayload(3, 1)),
    delivery('workflow_run', 'workflow_run', workflowRunPayload()),
    delivery('check_suite', 'check_suite', { action: 'completed', check_suite: { id: 1 }, repository: fork, sender: hubot }),
  ];
}

/** The 1 MiB deliveries: a long string for contains/size, and a long array for exists. */
function bigDeliveries(): Delivery[] {
  const commitBytes = JSON.stringify(pushPayload(1).commits[0]).length;
  return [
    delivery('1 MiB pull_request body', 'pull_request', pullRequestPayload({ action: 'edited', body: prose(MIB), reviewers: [monalisa] })),
    delivery('1 MiB issue_comment body', 'issue_comment', commentPayload(prose(MIB))),
    delivery('1 MiB push, commits', 'push', pushPayload(Math.floor(MIB / commitBytes))),
  ];
}

// ---------------------------------------------------------------------------------------------
// The rules, in each language.

interface Rule {
  name: string;
  what: string;
  cel: string;
  jsonata: string;
  jq: string;
}

const CI_NOISE = '"check_run", "check_suite", "status", "workflow_run", "workflow_job", "deployment_status"';
const RULES: Rule[] = [
  {
    name: 'ci_noise',
    what: 'event in a list of CI-noise events',
    cel: `event in [${CI_NOISE}]`,
    jsonata: `event in [${CI_NOISE}]`,
    jq: `.event | IN(${CI_NOISE})`,
  },
  {
    name: 'review_requested',
    what: 'pull_request opened/synchronize/review_requested with a requested reviewer in params.logins',
    cel: 'event == "pull_request" && action in ["opened", "synchronize", "review_requested"] && requested_reviewers.exists(r, r in params.logins)',
    jsonata: 'event = "pull_request" and action in ["opened", "synchronize", "review_requested"] and $exists(requested_reviewers[$ in $$.params.logins])',
    jq: '.event == "pull_request" and (.action | IN("opened", "synchronize", "review_requested")) and (.params.logins as $l | any(.requested_reviewers[]; IN($l[])))',
  },
  {
    name: 'issue_triage',
    what: 'issues labeled with a label in params.labels, or assigned to params.bot',
    cel: 'event == "issues" && ((action == "labeled" && labels.exists(l, l in params.labels)) || (action == "assigned" && params.bot in assignees))',
    jsonata: 'event = "issues" and ((action = "labeled" and $exists(labels[$ in $$.params.labels])) or (action = "assigned" and params.bot in assignees))',
    jq: '.event == "issues" and ((.action == "labeled" and (.params.labels as $l | any(.labels[]; IN($l[])))) or (.action == "assigned" and (.params.bot as $b | any(.assignees[]; . == $b))))',
  },
  {
    name: 'mention',
    what: 'issue_comment whose body contains "@" + params.bot (scans the comment)',
    cel: 'event == "issue_comment" && payload.comment.body.contains("@" + params.bot)',
    jsonata: 'event = "issue_comment" and $contains(payload.comment.body, "@" & params.bot)',
    jq: '.event == "issue_comment" and (.params.bot as $b | .payload.comment.body | contains("@" + $b))',
  },
  {
    name: 'repository',
    what: 'repository == params.repo',
    cel: 'repository == params.repo',
    jsonata: 'repository = params.repo',
    jq: '.repository == .params.repo',
  },
  {
    name: 'big_change',
    what: 'number comparison: pull_request additions + deletions > params.max_changes',
    cel: 'event == "pull_request" && payload.pull_request.additions + payload.pull_request.deletions > params.max_changes',
    jsonata: 'event = "pull_request" and payload.pull_request.additions + payload.pull_request.deletions > params.max_changes',
    jq: '.event == "pull_request" and (.payload.pull_request.additions + .payload.pull_request.deletions > .params.max_changes)',
  },
  {
    name: 'long_body',
    what: 'size check: a pull_request body longer than 4,000 characters (counts the body)',
    cel: 'has(payload.pull_request) && type(payload.pull_request.body) == string && size(payload.pull_request.body) > 4000',
    jsonata: '$type(payload.pull_request.body) = "string" and $length(payload.pull_request.body) > 4000',
    jq: '(.payload.pull_request.body | type) == "string" and (.payload.pull_request.body | length) > 4000',
  },
  {
    name: 'push_not_skip_ci',
    what: 'negation: a push none of whose commits says [skip ci] (scans the commits)',
    cel: 'event == "push" && !payload.commits.exists(c, c.message.contains("[skip ci]"))',
    jsonata: 'event = "push" and $not($exists(payload.commits[$contains(message, "[skip ci]")]))',
    jq: '.event == "push" and (any(.payload.commits[]; .message | contains("[skip ci]")) | not)',
  },
];

/** All eight rules as one jq program (one jq start and one input parse per delivery). */
const JQ_ONE_PROGRAM = `[${RULES.map((r) => `(${r.jq})`).join(', ')}]`;

// ---------------------------------------------------------------------------------------------
// The languages behind one interface: compile once, run per delivery.

type LangId = 'cel' | 'jsonata' | 'jq';
const LANGS: LangId[] = ['cel', 'jsonata', 'jq'];

interface Lang {
  id: LangId;
  label: string;
  /** Whether run() answers synchronously (an async one costs at least a microtask hop per rule). */
  sync: boolean;
  compile(source: string): unknown;
  /** What a delivery becomes for this language, once per delivery before its rules run. */
  prepare(d: Delivery): unknown;
  run(compiled: unknown, input: unknown): boolean | Promise<boolean>;
}

/** Save-time structural limits for CEL (cel-js has no evaluation budget: these are all it offers). */
const CEL_LIMITS = { maxAstNodes: 500, maxDepth: 32, maxListElements: 64, maxMapEntries: 64, maxCallArguments: 8 };

function celEnvironment(cel: CelModule): CelEnvironment {
  // Fields that can be null are dyn; number too (cel-js wants a BigInt for int).
  return new cel.Environment({ limits: CEL_LIMITS })
    .registerVariable('source', 'string')
    .registerVariable('event', 'string')
    .registerVariable('action', 'dyn')
    .registerVariable('delivery_id', 'string')
    .registerVariable('trust_mode', 'string')
    .registerVariable('verified', 'bool')
    .registerVariable('headers', 'map<string, string>')
    .registerVariable('payload', 'dyn')
    .registerVariable('repository', 'dyn')
    .registerVariable('sender', 'dyn')
    .registerVariable('number', 'dyn')
    .registerVariable('labels', 'list<string>')
    .registerVariable('assignees', 'list<string>')
    .registerVariable('requested_reviewers', 'list<string>')
    .registerVariable('subject', 'dyn')
    .registerVariable('params', 'dyn');
}

async function loadLang(id: LangId): Promise<Lang> {
  switch (id) {
    case 'cel': {
      const env = celEnvironment(await loadCel());
      return {
        id,
        label: 'CEL',
        sync: true,
        compile(source) {
          const program = env.parse(source);
          const checked = program.check();
          if (!checked.valid) throw checked.error ?? new Error(`CEL check failed: ${source}`);
          return program;
        },
        prepare: (d) => d.envelope,
        run: (program, input) => (program as CelProgram)(input as Record<string, unknown>) === true,
      };
    }
    case 'jsonata': {
      const jsonata = await loadJsonata();
      return {
        id,
        label: 'JSONata',
        sync: false,
        compile: (source) => jsonata(source),
        prepare: (d) => d.envelope,
        run: async (expr, input) => (await (expr as JsonataExpression).evaluate(input)) === true,
      };
    }
    case 'jq': {
      const jq = await loadJq();
      return {
        id,
        label: 'jq (jq-web)',
        sync: true,
        compile(source) {
          // jq has no compile step apart from a run: compile the filter against no input.
          jq.raw('null', `empty | (${source})`, ['-n']);
          return source;
        },
        prepare: envelopeJson,
        run: (filter, input) => jq.raw(input as string, filter as string, ['-c']) === 'true',
      };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Timing.

const now = (): bigint => process.hrtime.bigint();
const micros = (a: bigint, b: bigint): number => Number(b - a) / 1000;

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * (s.length - 1)))]!;
}
const median = (xs: number[]) => quantile(xs, 0.5);
const round = (x: number, digits = 2): number | null => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

/** Times `n` runs of one compiled rule over prepared inputs, one sample per run (µs). */
async function timeRuns(lang: Lang, compiled: unknown, inputs: unknown[], n: number, sink: { trues: number }): Promise<number[]> {
  const out: number[] = new Array(n);
  if (lang.sync) {
    for (let i = 0; i < n; i++) {
      const input = inputs[i % inputs.length];
      const t = now();
      const r = lang.run(compiled, input) as boolean;
      out[i] = micros(t, now());
      if (r) sink.trues++;
    }
  } else {
    for (let i = 0; i < n; i++) {
      const input = inputs[i % inputs.length];
      const t = now();
      const r = await lang.run(compiled, input);
      out[i] = micros(t, now());
      if (r) sink.trues++;
    }
  }
  return out;
}

/** Times `n` deliveries through all eight rules: prepare once, then every rule (µs per delivery). */
async function timeDeliveries(lang: Lang, compiled: unknown[], deliveries: Delivery[], n: number, sink: { trues: number }): Promise<number[]> {
  const out: number[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const d = deliveries[i % deliveries.length]!;
    const t = now();
    const input = lang.prepare(d);
    if (lang.sync) {
      for (const c of compiled) if (lang.run(c, input) as boolean) sink.trues++;
    } else {
      for (const c of compiled) if (await lang.run(c, input)) sink.trues++;
    }
    out[i] = micros(t, now());
  }
  return out;
}

interface Spread {
  median_us: number | null;
  p99_us: number | null;
  samples: number;
}
const spread = (xs: number[]): Spread => ({ median_us: round(median(xs), 3), p99_us: round(quantile(xs, 0.99), 3), samples: xs.length });

// ---------------------------------------------------------------------------------------------
// Child: memory.

/** Heap kept by 8 rules x 100 webhooks compiled, and RSS growth over DELIVERIES deliveries. */
async function childMemory(id: LangId): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the memory child with --expose-gc');
  const settle = () => {
    gc();
    gc();
  };
  const rssAtStart = process.memoryUsage().rss;
  const lang = await loadLang(id);
  const jq = id === 'jq' ? await loadJq() : null;
  const webhooks = 100;
  const params = Array.from({ length: webhooks }, (_, i) => ({ ...PARAMS, logins: [...PARAMS.logins, `user-${i}`], max_changes: 400 + i }));
  const shapes = mixedDeliveries().filter((d) => d.envelope.event !== 'pull_request').concat(pullRequestDeliveries());
  // One warm-up compile and run so the library's own lazy set-up is not counted as the rules'.
  await lang.run(lang.compile(RULES[0]![id]), lang.prepare(shapes[0]!));
  settle();
  const before = process.memoryUsage();
  const compiled: unknown[][] = [];
  for (let w = 0; w < webhooks; w++) compiled.push(RULES.map((r) => lang.compile(r[id])));
  settle();
  const afterCompile = process.memoryUsage();

  // Deliveries: each one a fresh envelope (new id, its webhook's params) around a parsed body.
  const bodies = shapes.map((s) => ({ event: s.envelope.event, raw: s.raw }));
  let peakRss = afterCompile.rss;
  let halfway = NaN;
  let trues = 0;
  const t0 = now();
  for (let i = 0; i < DELIVERIES; i++) {
    const w = i % webhooks;
    const b = bodies[i % bodies.length]!;
    const d = delivery(`d${i}`, b.event, JSON.parse(b.raw) as Record<string, unknown>, params[w], b.raw);
    if (jq) {
      // jq: the eight rules as one program per delivery (eight calls each would take minutes here).
      const out = jq.raw(envelopeJson(d), JQ_ONE_PROGRAM, ['-c']);
      trues += (out.match(/true/g) ?? []).length;
    } else {
      const input = lang.prepare(d);
      for (const c of compiled[w]!) if (await lang.run(c, input)) trues++;
    }
    if (i % 250 === 0) peakRss = Math.max(peakRss, process.memoryUsage().rss);
    if (i === Math.floor(DELIVERIES / 2)) {
      // Half-way, after a collection: growth in the second half would be a leak, not a warm-up.
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      settle();
      halfway = process.memoryUsage().heapUsed;
    }
  }
  const seconds = Number(now() - t0) / 1e9;
  const endRss = process.memoryUsage().rss;
  peakRss = Math.max(peakRss, endRss);
  settle();
  const afterEval = process.memoryUsage();
  // Used after the last measurement so that the compiled forms are still alive at it.
  const forms = compiled.flat().length;
  const mib = (x: number) => round(x / MIB, 2);
  process.stdout.write(
    `${JSON.stringify({
      lang: id,
      compiled_forms: forms,
      rss_library_load_mib: mib(before.rss - rssAtStart),
      heap_before_compile_mib: mib(before.heapUsed),
      heap_retained_by_compiled_mib: mib(afterCompile.heapUsed - before.heapUsed),
      external_retained_by_compiled_mib: mib(afterCompile.external - before.external),
      deliveries: DELIVERIES,
      deliveries_per_second: round(DELIVERIES / seconds, 0),
      rss_before_deliveries_mib: mib(afterCompile.rss),
      rss_growth_peak_mib: mib(peakRss - afterCompile.rss),
      rss_growth_end_mib: mib(endRss - afterCompile.rss),
      heap_growth_after_gc_mib: mib(afterEval.heapUsed - afterCompile.heapUsed),
      heap_growth_after_gc_first_half_mib: mib(halfway - afterCompile.heapUsed),
      heap_growth_after_gc_second_half_mib: mib(afterEval.heapUsed - halfway),
      array_buffers_mib: mib(afterEval.arrayBuffers),
      trues,
      note: jq ? 'jq: the eight rules run as one jq program per delivery; its WebAssembly memory is in RSS, not the JS heap' : undefined,
    })}\n`,
  );
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// Child: probes. Each runs in a process of its own; the parent kills it PROBE_TIMEOUT_MS after
// the probe says it is ready (its library loaded, its input built), so the deadline and the
// times below are the evaluation's alone.

const adversarial = (n: number) => `${'a'.repeat(n)}!`;
const REDOS = '^(a+)+$';
const REDOS_LENGTHS = [20, 24, 30] as const;

interface Probe {
  id: string;
  lang: LangId | 'jq-wasm';
  what: string;
  /** Heap cap for the child (MiB): a probe that allocates without end crashes instead of swapping. */
  heapMiB?: number;
  /** Sets up, calls ready() just before the evaluation, and returns what the evaluation gave. */
  run(ready: () => void): Promise<unknown>;
}

const pushEnvelope = () => bigDeliveries()[2]!;
const nestedCel = (depth: number) => {
  const vars = ['a', 'b', 'c', 'd'].slice(0, depth);
  let inner = `${vars.map((v) => `${v}.id`).join(' + ')} == "x"`;
  for (const v of [...vars].reverse()) inner = `payload.commits.exists(${v}, ${inner})`;
  return inner;
};
const firstLine = (e: unknown) => String((e as Error)?.message ?? e).split('\n')[0];
/** jq-web's error text: the first line says the exit code, the second what jq said. */
const jqError = (e: unknown) => {
  const lines = String((e as Error)?.message ?? e).split('\n');
  return lines[1] ?? lines[0];
};

const PROBES: Probe[] = [
  // CEL
  {
    id: 'cel_structural_limits',
    lang: 'cel',
    what: 'expressions over the save-time limits (maxAstNodes 500, maxDepth 32) are refused at parse',
    async run(ready) {
      const env = celEnvironment(await loadCel());
      const wide = Array.from({ length: 300 }, (_, i) => `event == "e${i}"`).join(' || ');
      const deep = `${'('.repeat(40)}true${')'.repeat(40)}`;
      ready();
      const refuse = (src: string) => {
        try {
          env.parse(src);
          return 'accepted';
        } catch (e) {
          return `refused: ${firstLine(e)}`;
        }
      };
      return { '300 terms': refuse(wide), '40 parentheses deep': refuse(deep) };
    },
  },
  {
    id: 'cel_no_recursion_no_io',
    lang: 'cel',
    what: 'no user functions, no recursion, no loops; a function that is not registered does not type-check',
    async run(ready) {
      const env = celEnvironment(await loadCel());
      ready();
      const check = (src: string) => {
        try {
          const r = env.parse(src).check();
          return r.valid ? 'type-checks' : `refused: ${firstLine(r.error)}`;
        } catch (e) {
          return `refused: ${firstLine(e)}`;
        }
      };
      return { 'now()': check('now() > 0'), 'http.get(...)': check('http.get("http://x") == ""'), 'def f(x) = f(x)': check('def f(x) = f(x)') };
    },
  },
  ...[2, 3].map(
    (depth): Probe => ({
      id: `cel_nested_${depth}_on_1mib_push`,
      lang: 'cel',
      what: `${depth} nested exists over the 1 MiB push's commits (n^${depth}: bounded by the input, not by a cost limit)`,
      async run(ready) {
        const lang = await loadLang('cel');
        const input = lang.prepare(pushEnvelope());
        const program = lang.compile(nestedCel(depth));
        ready();
        return lang.run(program, input);
      },
    }),
  ),
  {
    id: 'cel_quadratic_list',
    lang: 'cel',
    what: "nested map building an n^2 list of strings from the 1 MiB push's commits (heap capped at 256 MiB)",
    heapMiB: 256,
    async run(ready) {
      const lang = await loadLang('cel');
      const input = lang.prepare(pushEnvelope());
      const program = lang.compile('size(payload.commits.map(a, payload.commits.map(b, a.message + b.message))) > 0');
      ready();
      const result = lang.run(program, input);
      return { result, heap_used_mib: round(process.memoryUsage().heapUsed / MIB, 0) };
    },
  },
  {
    id: 'cel_bind_doubling',
    lang: 'cel',
    what: "cel.bind nested as deep as maxDepth allows, each doubling the 1 MiB push's commits (x + x): 2^k x n elements (heap capped at 512 MiB)",
    heapMiB: 512,
    async run(ready) {
      const lang = await loadLang('cel');
      const input = lang.prepare(pushEnvelope());
      const doubling = (k: number) => {
        let src = `size(x${k}) > 0`;
        for (let i = k; i >= 1; i--) src = `cel.bind(x${i}, x${i - 1} + x${i - 1}, ${src})`;
        return `cel.bind(x0, payload.commits, ${src})`;
      };
      // The deepest nesting the save-time limits accept.
      let k = 30;
      let program: unknown;
      for (; k > 0; k--) {
        try {
          program = lang.compile(doubling(k));
          break;
        } catch {
          // over maxDepth: one fewer
        }
      }
      process.stdout.write(`note: k = ${k} doublings in ${doubling(k).length} characters\n`);
      ready();
      return { k, chars: doubling(k).length, result: lang.run(program, input), heap_used_mib: round(process.memoryUsage().heapUsed / MIB, 0) };
    },
  },
  // JSONata
  {
    id: 'jsonata_tail_recursion',
    lang: 'jsonata',
    what: '($f := function($x){ $f($x + 1) }; $f(0)), no options',
    async run(ready) {
      const expr = (await loadJsonata())('($f := function($x){ $f($x + 1) }; $f(0))');
      ready();
      return expr.evaluate({});
    },
  },
  {
    id: 'jsonata_tail_recursion_timeout',
    lang: 'jsonata',
    what: 'the same with { timeout: 1000, stack: 200 }, a 10 ms timer counting meanwhile',
    async run(ready) {
      const expr = (await loadJsonata())('($f := function($x){ $f($x + 1) }; $f(0))', { timeout: 1000, stack: 200 });
      let ticks = 0;
      const timer = setInterval(() => ticks++, 10);
      ready();
      try {
        await expr.evaluate({});
        return { returned: true, timer_ticks_during: ticks };
      } catch (e) {
        const err = e as { code?: string; message?: string };
        return { error: `${err.code}: ${err.message}`, timer_ticks_during: ticks };
      } finally {
        clearInterval(timer);
      }
    },
  },
  {
    id: 'jsonata_recursion',
    lang: 'jsonata',
    what: '($f := function($x){ 1 + $f($x + 1) }; $f(0)), not tail-recursive, no options (heap capped at 256 MiB)',
    heapMiB: 256,
    async run(ready) {
      const expr = (await loadJsonata())('($f := function($x){ 1 + $f($x + 1) }; $f(0))');
      ready();
      return expr.evaluate({});
    },
  },
  {
    id: 'jsonata_recursion_stack',
    lang: 'jsonata',
    what: 'the same with { stack: 500 }',
    async run(ready) {
      const expr = (await loadJsonata())('($f := function($x){ 1 + $f($x + 1) }; $f(0))', { stack: 500 });
      ready();
      return expr.evaluate({});
    },
  },
  ...[undefined, 1000].map(
    (timeout): Probe => ({
      id: `jsonata_nested_2_on_1mib_push${timeout ? '_timeout' : ''}`,
      lang: 'jsonata',
      what: `two nested scans of the 1 MiB push's commits (n^2)${timeout ? `, with { timeout: ${timeout} }` : ', no options'}`,
      async run(ready) {
        const d = pushEnvelope();
        const expr = (await loadJsonata())('$exists(payload.commits[($a := $; $exists($$.payload.commits[$a.id & id = "x"]))])', timeout ? { timeout } : undefined);
        ready();
        return expr.evaluate(d.envelope);
      },
    }),
  ),
  {
    id: 'jsonata_io',
    lang: 'jsonata',
    what: 'no I/O functions; $eval runs a string as JSONata; $now/$millis/$random read the clock and RNG',
    async run(ready) {
      const jsonata = await loadJsonata();
      ready();
      const tryIt = async (src: string) => {
        try {
          return JSON.stringify(await jsonata(src).evaluate({ s: '1 + 1' }));
        } catch (e) {
          const err = e as { code?: string; message?: string };
          return `error ${err.code}: ${err.message}`;
        }
      };
      return { '$eval(s)': await tryIt('$eval(s)'), '$now()': await tryIt('$now()'), '$readFile(...)': await tryIt('$readFile("/etc/passwd")') };
    },
  },
  // jq (jq-web)
  ...(
    [
      ['jq_def_f_f', 'def f: f; f'],
      ['jq_last_repeat', 'last(repeat(1))'],
      ['jq_until', '0 | until(false; . + 1)'],
      ['jq_collect_repeat', '[repeat(1)] | length'],
    ] as const
  ).map(
    ([id, filter]): Probe => ({
      id,
      lang: 'jq',
      what: filter,
      async run(ready) {
        const jq = await loadJq();
        ready();
        return jq.raw('null', filter);
      },
    }),
  ),
  {
    id: 'jq_recursion',
    lang: 'jq',
    what: 'def f: 1 + f; f (not tail-recursive), then another call in the same process',
    async run(ready) {
      const jq = await loadJq();
      ready();
      const t = now();
      let first: string;
      try {
        first = `returned ${jq.raw('null', 'def f: 1 + f; f')}`;
      } catch (e) {
        first = `error after ${round(micros(t, now()) / 1000, 0)} ms: ${firstLine(e)}`;
      }
      let next: string;
      try {
        next = `returned ${jq.raw('{"a":1}', '.a')}`;
      } catch (e) {
        next = `error: ${firstLine(e)}`;
      }
      return { first, next_call: next, rss_mib: round(process.memoryUsage().rss / MIB, 0), process_exit_code_left: process.exitCode ?? null };
    },
  },
  {
    id: 'jq_nested_2_on_1mib_push',
    lang: 'jq',
    what: "two nested scans of the 1 MiB push's commits (n^2)",
    async run(ready) {
      const jq = await loadJq();
      const json = envelopeJson(pushEnvelope());
      ready();
      return jq.raw(json, 'any(.payload.commits[] as $a | .payload.commits[] | ($a.id + .id == "x"); .)');
    },
  },
  {
    id: 'jq_io',
    lang: 'jq',
    what: 'environment, files and modules inside the WebAssembly sandbox',
    async run(ready) {
      const jq = await loadJq();
      ready();
      const exitCode = process.exitCode;
      const tryIt = (filter: string): string => {
        try {
          return jq.raw('null', filter, ['-c']);
        } catch (e) {
          return `error: ${jqError(e)}`;
        }
      };
      const out = {
        '$ENV | keys': tryIt('$ENV | keys'),
        '$ENV.HOME': tryIt('$ENV.HOME'),
        input_filename: tryIt('input_filename'),
        'import "x" as x': tryIt('import "x" as x; .'),
        'now | type': tryIt('now | type'),
      };
      process.exitCode = exitCode;
      return out;
    },
  },
  // jq-wasm's input path.
  ...[20 * 1024, 80 * 1024, 160 * 1024, MIB].map(
    (bytes): Probe => ({
      id: `jq_wasm_input_${bytes >= MIB ? '1mib' : `${bytes / 1024}kib`}`,
      lang: 'jq-wasm',
      what: `jq-wasm: ${RULES[4]!.jq} on a ${bytes >= MIB ? '1 MiB' : `${bytes / 1024} KiB`} issue_comment envelope`,
      async run(ready) {
        const jq = await loadJqWasm();
        const json = envelopeJson(delivery('jq-wasm', 'issue_comment', commentPayload(prose(bytes))));
        await jq.raw('null', '.');
        ready();
        return jq.raw(json, RULES[4]!.jq);
      },
    }),
  ),
  // Regular expressions: catastrophic backtracking on an attacker-controlled string.
  ...REDOS_LENGTHS.flatMap((n): Probe[] => [
    {
      id: `cel_matches_redos_${n}`,
      lang: 'cel',
      what: `subject.matches("${REDOS}") on ${n} a's and a "!"`,
      async run(ready) {
        const lang = await loadLang('cel');
        const program = lang.compile(`subject.matches("${REDOS}")`);
        ready();
        return lang.run(program, { subject: adversarial(n) });
      },
    },
    {
      id: `jsonata_regex_redos_${n}`,
      lang: 'jsonata',
      what: `$contains(subject, /${REDOS}/) on ${n} a's and a "!", with { timeout: 1000 }`,
      async run(ready) {
        const expr = (await loadJsonata())(`$contains(subject, /${REDOS}/)`, { timeout: 1000 });
        ready();
        return expr.evaluate({ subject: adversarial(n) });
      },
    },
    {
      id: `jq_test_redos_${n}`,
      lang: 'jq',
      what: `.subject | test("${REDOS}") on ${n} a's and a "!"`,
      async run(ready) {
        const jq = await loadJq();
        const json = JSON.stringify({ subject: adversarial(n) });
        ready();
        try {
          return jq.raw(json, `.subject | test("${REDOS}")`);
        } catch (e) {
          throw new Error(jqError(e));
        }
      },
    },
  ]),
];

const READY = 'ready';

async function childProbe(id: string): Promise<void> {
  const probe = PROBES.find((p) => p.id === id);
  if (!probe) throw new Error(`no probe ${id}`);
  let t = now();
  const ready = () => {
    process.stdout.write(`${READY}\n`);
    t = now();
  };
  let line: Record<string, unknown>;
  try {
    const value = await probe.run(ready);
    line = { ok: true, value, ms: micros(t, now()) / 1000 };
  } catch (e) {
    const err = e as { code?: string; message?: string };
    line = { ok: false, error: `${err.code ? `${err.code}: ` : ''}${String(err.message ?? e).split('\n').slice(0, 2).join(' ')}`, ms: micros(t, now()) / 1000 };
  }
  process.stdout.write(`${JSON.stringify(line)}\n`);
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// The parent: spawns children with a deadline.

interface ChildOutcome {
  outcome: 'returned' | 'error' | 'timed out' | 'crashed';
  detail: string;
  /** From the child's ready line (or its start) to its answer, its crash or its kill. */
  ms: number;
  value?: unknown;
}

/**
 * Runs this script as a child and waits for its last stdout line (JSON). A child that prints
 * `ready` is killed `timeoutMs` after that line; one that never does, `timeoutMs` after its start
 * plus a start-up allowance.
 */
function runChild(childArgs: string[], timeoutMs: number, nodeFlags: string[] = []): Promise<ChildOutcome> {
  return new Promise((resolve) => {
    let started = Date.now();
    const child = spawn(process.execPath, [...process.execArgv, ...nodeFlags, THIS_FILE, ...childArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let killed = false;
    const kill = () => {
      killed = true;
      child.kill('SIGKILL');
    };
    let timer = setTimeout(kill, timeoutMs + 30_000);
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      if (!out.includes(`${READY}\n`) && (out + c).includes(`${READY}\n`)) {
        started = Date.now();
        clearTimeout(timer);
        timer = setTimeout(kill, timeoutMs);
      }
      out += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err = (err + c).slice(-4000)));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const ms = Date.now() - started;
      const last = out.trim().split('\n').pop() ?? '';
      // What the child said of itself before it answered (`note: ...` lines), kept for a crash or a kill.
      const notes = out
        .split('\n')
        .filter((l) => l.startsWith('note: '))
        .map((l) => `${l.slice(6)}; `)
        .join('');
      if (killed) return resolve({ outcome: 'timed out', detail: `${notes}still running after ${ms} ms: killed`, ms });
      try {
        const parsed = JSON.parse(last) as { ok?: boolean; value?: unknown; error?: string; ms?: number };
        if (parsed.ok === undefined) return resolve({ outcome: 'returned', detail: last, ms, value: parsed });
        return resolve(
          parsed.ok
            ? { outcome: 'returned', detail: JSON.stringify(parsed.value), ms: Math.round(parsed.ms ?? ms), value: parsed.value }
            : { outcome: 'error', detail: parsed.error ?? '', ms: Math.round(parsed.ms ?? ms) },
        );
      } catch {
        const why = err
          .split('\n')
          .map((l) => l.trim())
          .filter((l) => /heap out of memory|Aborted|RangeError|Maximum call stack|FATAL|Error/.test(l))
          .slice(0, 2)
          .join(' | ');
        return resolve({ outcome: 'crashed', detail: `${notes}exit ${code ?? signal}: ${why || err.trim().split('\n').pop() || 'no output'}`, ms });
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The run.

async function agreementCheck(langs: Record<LangId, Lang>, compiled: Record<LangId, unknown[]>): Promise<Record<string, Record<string, boolean>>> {
  const table: Record<string, Record<string, boolean>> = {};
  const problems: string[] = [];
  for (const d of mixedDeliveries()) {
    table[d.name] = {};
    for (const [ri, rule] of RULES.entries()) {
      const answers: Partial<Record<LangId, boolean>> = {};
      for (const id of LANGS) answers[id] = await langs[id].run(compiled[id][ri], langs[id].prepare(d));
      if (answers.cel !== answers.jsonata || answers.cel !== answers.jq) problems.push(`${rule.name} on "${d.name}": ${JSON.stringify(answers)}`);
      table[d.name]![rule.name] = answers.cel!;
    }
  }
  for (const rule of RULES) {
    const seen = new Set(Object.values(table).map((row) => row[rule.name]));
    if (seen.size < 2) problems.push(`${rule.name} is ${[...seen][0]} on every delivery: the check does not tell it apart`);
  }
  if (problems.length) throw new Error(`the languages disagree:\n  ${problems.join('\n  ')}`);
  return table;
}

const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const lpad = (s: string, n: number) => (s.length >= n ? s : ' '.repeat(n - s.length) + s);
const fmtUs = (x: number | null) => (x === null ? '-' : x >= 10000 ? `${(x / 1000).toFixed(0)} ms` : x >= 1000 ? `${(x / 1000).toFixed(1)} ms` : x >= 100 ? `${x.toFixed(0)} µs` : `${x.toFixed(x >= 10 ? 1 : 2)} µs`);
const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? null : round(a / b, 1));
const signed = (x: number | null) => (x === null ? '-' : `${x >= 0 ? '+' : ''}${x}`);
const fmtRatio = (x: number | null) => (x === null ? '-' : `${x >= 100 ? x.toFixed(0) : x.toFixed(1)}x`);

async function main(): Promise<void> {
  const startedAt = new Date();
  const loadBefore = os.loadavg().map((x) => round(x, 2));
  const versions = {
    '@marcbachmann/cel-js': packageVersion('@marcbachmann/cel-js'),
    jsonata: packageVersion('jsonata'),
    'jq-web': packageVersion('jq-web'),
    'jq-wasm': packageVersion('jq-wasm'),
  };
  if (Object.values(versions).includes('missing')) throw new Error('bench packages missing: run npm --prefix bench ci');
  console.log(
    `rule languages: ${os.availableParallelism()} cores, Node ${process.version}, load ${loadBefore.join(' ')}; ` +
      `cel-js ${versions['@marcbachmann/cel-js']}, jsonata ${versions.jsonata}, jq-web ${versions['jq-web']} (jq-wasm ${versions['jq-wasm']} for its input path only). ` +
      'A shared machine: compare the languages within this run only.',
  );

  const langs = { cel: await loadLang('cel'), jsonata: await loadLang('jsonata'), jq: await loadLang('jq') } as Record<LangId, Lang>;
  const compiled = Object.fromEntries(LANGS.map((id) => [id, RULES.map((r) => langs[id].compile(r[id]))])) as Record<LangId, unknown[]>;
  const truth = await agreementCheck(langs, compiled);
  console.log(`the eight rules agree in all three languages on ${Object.keys(truth).length} deliveries (each rule true on some, false on others)`);

  const prs = pullRequestDeliveries();
  const big = bigDeliveries();
  const prBytes = prs.map((d) => envelopeJson(d).length);
  console.log(
    `pull_request envelopes: ${prs.length}, ${Math.round(median(prBytes) / 1024)} KiB each (median, as JSON); 1 MiB envelopes: ${big.map((d) => `${d.name} (${(envelopeJson(d).length / MIB).toFixed(2)} MiB)`).join(', ')}`,
  );

  // Compile time per rule.
  const compileN = { cel: QUICK ? 200 : 2000, jsonata: QUICK ? 200 : 2000, jq: QUICK ? 20 : 200 };
  const compileUs: Record<LangId, number[]> = { cel: [], jsonata: [], jq: [] };
  const ROUNDS = 4;
  const compileSamples: Record<LangId, number[][]> = { cel: RULES.map(() => []), jsonata: RULES.map(() => []), jq: RULES.map(() => []) };
  for (let r = 0; r < ROUNDS; r++) {
    for (const id of LANGS) {
      for (const [ri, rule] of RULES.entries()) {
        for (let i = 0; i < compileN[id] / ROUNDS; i++) {
          const t = now();
          langs[id].compile(rule[id]);
          compileSamples[id][ri]!.push(micros(t, now()));
        }
      }
    }
  }
  for (const id of LANGS) compileUs[id] = compileSamples[id].map(median);

  // Evaluation on the ~20 KB pull_request envelopes: per rule, then all eight per delivery.
  const evalN = { cel: QUICK ? 400 : 4000, jsonata: QUICK ? 400 : 4000, jq: QUICK ? 24 : 200 };
  const sink = { trues: 0 };
  const prepared = Object.fromEntries(LANGS.map((id) => [id, prs.map((d) => langs[id].prepare(d))])) as Record<LangId, unknown[]>;
  for (const id of LANGS) for (const c of compiled[id]) await timeRuns(langs[id], c, prepared[id], Math.min(200, evalN[id]), sink); // warm-up
  const evalSamples: Record<LangId, number[][]> = { cel: RULES.map(() => []), jsonata: RULES.map(() => []), jq: RULES.map(() => []) };
  const totalSamples: Record<LangId, number[]> = { cel: [], jsonata: [], jq: [] };
  const jqOneProgram: number[] = [];
  const jq = await loadJq();
  for (let r = 0; r < ROUNDS; r++) {
    for (const id of LANGS) {
      for (const [ri, c] of compiled[id].entries()) evalSamples[id][ri]!.push(...(await timeRuns(langs[id], c, prepared[id], evalN[id] / ROUNDS, sink)));
      totalSamples[id].push(...(await timeDeliveries(langs[id], compiled[id], prs, evalN[id] / ROUNDS, sink)));
    }
    for (let i = 0; i < evalN.jq / ROUNDS; i++) {
      const d = prs[i % prs.length]!;
      const t = now();
      jq.raw(envelopeJson(d), JQ_ONE_PROGRAM, ['-c']);
      jqOneProgram.push(micros(t, now()));
    }
  }

  // The floor: the expression `true`, the cost of a call that reads nothing.
  const floor = {} as Record<LangId, Spread>;
  for (const id of LANGS) {
    const c = langs[id].compile('true');
    await timeRuns(langs[id], c, prepared[id], Math.min(200, evalN[id]), sink);
    floor[id] = spread(await timeRuns(langs[id], c, prepared[id], evalN[id], sink));
  }

  // The 1 MiB envelopes: every rule on each, the worst of the three per rule.
  const bigN = { cel: QUICK ? 10 : 60, jsonata: QUICK ? 10 : 60, jq: QUICK ? 3 : 8 };
  const bigMedians: Record<LangId, number[][]> = { cel: [], jsonata: [], jq: [] }; // [rule][delivery]
  const bigTotals: Record<LangId, number[]> = { cel: [], jsonata: [], jq: [] }; // [delivery]
  for (const id of LANGS) {
    const inputs = big.map((d) => langs[id].prepare(d));
    bigMedians[id] = RULES.map(() => []);
    for (const [ri, c] of compiled[id].entries()) {
      for (const [di, input] of inputs.entries()) {
        await timeRuns(langs[id], c, [input], 2, sink);
        bigMedians[id][ri]![di] = median(await timeRuns(langs[id], c, [input], bigN[id], sink));
      }
    }
    for (const d of big) bigTotals[id].push(median(await timeDeliveries(langs[id], compiled[id], [d], Math.max(3, Math.round(bigN[id] / 4)), sink)));
  }
  const jqOneProgramBig = big.map((d) => {
    const xs: number[] = [];
    for (let i = 0; i < bigN.jq; i++) {
      const t = now();
      jq.raw(envelopeJson(d), JQ_ONE_PROGRAM, ['-c']);
      xs.push(micros(t, now()));
    }
    return median(xs);
  });

  // Memory, a child per language.
  const memory: Record<string, unknown> = {};
  for (const id of LANGS) {
    const r = await runChild(['--child', 'memory', '--lang', id, '--deliveries', String(DELIVERIES)], 600_000, ['--expose-gc']);
    memory[id] = r.value ?? { failed: `${r.outcome}: ${r.detail}` };
  }

  // Boundedness probes, a child each, killed at the deadline.
  const probes: { id: string; lang: string; what: string; outcome: string; detail: string; ms: number }[] = [];
  for (const p of PROBES) {
    const r = await runChild(['--child', 'probe', '--probe', p.id], PROBE_TIMEOUT_MS, p.heapMiB ? [`--max-old-space-size=${p.heapMiB}`] : []);
    probes.push({ id: p.id, lang: p.lang, what: p.what, outcome: r.outcome, detail: r.detail, ms: r.ms });
  }

  // ------------------------------------------------------------------------------------------
  // Print.
  const L = (id: LangId) => langs[id].label;
  const evalSpread = Object.fromEntries(LANGS.map((id) => [id, evalSamples[id].map(spread)])) as Record<LangId, Spread[]>;
  const totalSpread = Object.fromEntries(LANGS.map((id) => [id, spread(totalSamples[id])])) as Record<LangId, Spread>;
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

  console.log(`\ncompile per rule, µs (median of ${compileN.cel}/${compileN.jsonata}/${compileN.jq}; CEL = parse + type check; jq = a run of the filter on no input, since jq compiles on every call)`);
  console.log(`${pad('rule', 18)}${LANGS.map((id) => lpad(L(id), 14)).join('')}`);
  for (const [ri, rule] of RULES.entries()) console.log(`${pad(rule.name, 18)}${LANGS.map((id) => lpad(fmtUs(compileUs[id][ri]!), 14)).join('')}`);
  console.log(`${pad('all eight', 18)}${LANGS.map((id) => lpad(fmtUs(sum(compileUs[id])), 14)).join('')}`);

  console.log(`\nevaluation per rule on the ~${Math.round(median(prBytes) / 1024)} KiB pull_request envelopes: median / p99 (${evalN.cel}/${evalN.jsonata}/${evalN.jq} runs per rule, in ${ROUNDS} rounds taking turns)`);
  console.log(`${pad('rule', 18)}${LANGS.map((id) => lpad(L(id), 22)).join('')}`);
  for (const [ri, rule] of RULES.entries()) console.log(`${pad(rule.name, 18)}${LANGS.map((id) => lpad(`${fmtUs(evalSpread[id][ri]!.median_us)} / ${fmtUs(evalSpread[id][ri]!.p99_us)}`, 22)).join('')}`);
  console.log(`${pad('all eight', 18)}${LANGS.map((id) => lpad(`${fmtUs(totalSpread[id].median_us)} / ${fmtUs(totalSpread[id].p99_us)}`, 22)).join('')}`);
  console.log(`${pad('floor: true', 18)}${LANGS.map((id) => lpad(`${fmtUs(floor[id].median_us)} / ${fmtUs(floor[id].p99_us)}`, 22)).join('')}`);
  const jq1 = spread(jqOneProgram);
  console.log(`${pad('', 18)}jq with the eight rules as one program: ${fmtUs(jq1.median_us)} / ${fmtUs(jq1.p99_us)} per delivery`);

  console.log(`\nthe 1 MiB envelopes: median per rule on the worst of the three (${bigN.cel}/${bigN.jsonata}/${bigN.jq} runs each)`);
  console.log(`${pad('rule', 18)}${LANGS.map((id) => lpad(L(id), 14)).join('')}   worst for CEL / JSONata / jq`);
  const worst = (id: LangId, ri: number) => {
    const xs = bigMedians[id][ri]!;
    const i = xs.indexOf(Math.max(...xs));
    return { us: xs[i]!, on: big[i]!.name };
  };
  for (const [ri, rule] of RULES.entries()) {
    console.log(`${pad(rule.name, 18)}${LANGS.map((id) => lpad(fmtUs(worst(id, ri).us), 14)).join('')}   ${LANGS.map((id) => worst(id, ri).on.replace('1 MiB ', '')).join(' / ')}`);
  }
  console.log(`${pad('all eight', 18)}${LANGS.map((id) => lpad(fmtUs(Math.max(...bigTotals[id])), 14)).join('')}   (the worst delivery's median)`);
  console.log(`${pad('', 18)}jq with the eight rules as one program: ${fmtUs(Math.max(...jqOneProgramBig))}`);

  console.log(`\nmemory (a child process per language, --expose-gc): 8 rules x 100 webhooks compiled, then ${DELIVERIES} deliveries (a fresh envelope around a parsed ~20 KB body each)`);
  for (const id of LANGS) {
    const m = memory[id] as Record<string, number | string | null>;
    if ('failed' in m) console.log(`${pad(L(id), 14)}failed: ${m.failed}`);
    else
      console.log(
        `${pad(L(id), 14)}library load ${m.rss_library_load_mib} MiB RSS; ${m.compiled_forms} compiled forms keep ${m.heap_retained_by_compiled_mib} MiB of heap; ` +
          `RSS grows ${m.rss_growth_peak_mib} MiB at peak (${m.rss_growth_end_mib} at the end) over ${m.deliveries} deliveries at ${m.deliveries_per_second}/s; ` +
          `heap after GC ${signed(m.heap_growth_after_gc_first_half_mib as number)} MiB in the first half, ${signed(m.heap_growth_after_gc_second_half_mib as number)} in the second${m.note ? `\n${pad('', 14)}(${m.note})` : ''}`,
      );
  }

  console.log(`\nboundedness, for real (a child process each, killed ${PROBE_TIMEOUT_MS} ms after its input is ready; ms = the evaluation's own time)`);
  for (const p of probes) console.log(`${pad(p.id, 40)}${pad(p.outcome, 10)} ${lpad(`${p.ms} ms`, 9)}  ${p.detail.slice(0, 220)}`);

  // Catastrophic backtracking doubles per character: what the shortest string measured says of 30.
  const redos = Object.fromEntries(
    (['cel_matches', 'jsonata_regex', 'jq_test'] as const).map((k) => {
      const at = (n: number) => probes.find((p) => p.id === `${k}_redos_${n}`)!;
      const a = at(REDOS_LENGTHS[0]);
      const b = at(REDOS_LENGTHS[1]);
      const growth = a.outcome === 'returned' && b.outcome === 'returned' ? b.ms / Math.max(1, a.ms) : null;
      const last = at(REDOS_LENGTHS[2]);
      return [
        k,
        {
          by_length: Object.fromEntries(REDOS_LENGTHS.map((n) => [n, `${at(n).outcome} in ${at(n).ms} ms`])) as Record<number, string>,
          growth_per_4_chars: growth === null ? null : round(growth, 1),
          extrapolated_30_chars_ms: growth === null || last.outcome === 'returned' ? null : Math.round((b.ms * 2 ** (REDOS_LENGTHS[2] - REDOS_LENGTHS[1])) / 100) * 100,
        },
      ];
    }),
  );
  console.log(`\nregular expressions, ${REDOS} on n a's and a "!": ${Object.entries(redos)
    .map(([k, v]) => `${k} ${REDOS_LENGTHS.map((n) => `${n}: ${v.by_length[n]}`).join(', ')}${v.extrapolated_30_chars_ms ? ` (doubling per character: about ${Math.round(v.extrapolated_30_chars_ms / 1000)} s at 30)` : ''}`)
    .join('; ')}`);

  const ratios = {
    compile_all_eight: { jsonata_to_cel: ratio(sum(compileUs.jsonata), sum(compileUs.cel)), jq_to_cel: ratio(sum(compileUs.jq), sum(compileUs.cel)) },
    eval_all_eight_median: { jsonata_to_cel: ratio(totalSpread.jsonata.median_us, totalSpread.cel.median_us), jq_to_cel: ratio(totalSpread.jq.median_us, totalSpread.cel.median_us) },
    eval_all_eight_p99: { jsonata_to_cel: ratio(totalSpread.jsonata.p99_us, totalSpread.cel.p99_us), jq_to_cel: ratio(totalSpread.jq.p99_us, totalSpread.cel.p99_us) },
    eval_all_eight_1mib_worst: {
      jsonata_to_cel: ratio(Math.max(...bigTotals.jsonata), Math.max(...bigTotals.cel)),
      jq_to_cel: ratio(Math.max(...bigTotals.jq), Math.max(...bigTotals.cel)),
    },
  };
  console.log(
    `\nratios to CEL (same run): compile ${fmtRatio(ratios.compile_all_eight.jsonata_to_cel)} JSONata, ${fmtRatio(ratios.compile_all_eight.jq_to_cel)} jq; ` +
      `eight rules per delivery (median) ${fmtRatio(ratios.eval_all_eight_median.jsonata_to_cel)} JSONata, ${fmtRatio(ratios.eval_all_eight_median.jq_to_cel)} jq; ` +
      `p99 ${fmtRatio(ratios.eval_all_eight_p99.jsonata_to_cel)}, ${fmtRatio(ratios.eval_all_eight_p99.jq_to_cel)}; ` +
      `1 MiB worst ${fmtRatio(ratios.eval_all_eight_1mib_worst.jsonata_to_cel)}, ${fmtRatio(ratios.eval_all_eight_1mib_worst.jq_to_cel)}`,
  );

  const result = {
    bench: 'rule-languages',
    at: startedAt.toISOString(),
    machine: { cores: os.availableParallelism(), memory_gib: round(os.totalmem() / 1024 ** 3, 0), node: process.version, shared: true, load_before: loadBefore, load_after: os.loadavg().map((x) => round(x, 2)) },
    versions,
    quick: QUICK,
    rules: RULES,
    jq_one_program: JQ_ONE_PROGRAM,
    cel_limits: CEL_LIMITS,
    agreement: truth,
    envelopes: { pull_request_kib_median: round(median(prBytes) / 1024, 1), big: big.map((d) => ({ name: d.name, mib: round(envelopeJson(d).length / MIB, 2) })) },
    compile_us_median: Object.fromEntries(LANGS.map((id) => [id, Object.fromEntries(RULES.map((r, ri) => [r.name, round(compileUs[id][ri]!, 2)]))])),
    compile_runs: compileN,
    eval_20kib: Object.fromEntries(
      LANGS.map((id) => [id, { per_rule: Object.fromEntries(RULES.map((r, ri) => [r.name, evalSpread[id][ri]])), all_eight_per_delivery: totalSpread[id], sync: langs[id].sync }]),
    ),
    eval_20kib_jq_one_program: jq1,
    eval_20kib_floor_true: floor,
    eval_1mib_median_us: Object.fromEntries(
      LANGS.map((id) => [
        id,
        {
          per_rule: Object.fromEntries(RULES.map((r, ri) => [r.name, Object.fromEntries(big.map((d, di) => [d.name, round(bigMedians[id][ri]![di]!, 1)]))])),
          all_eight_per_delivery: Object.fromEntries(big.map((d, di) => [d.name, round(bigTotals[id][di]!, 1)])),
        },
      ]),
    ),
    eval_1mib_jq_one_program_us: Object.fromEntries(big.map((d, di) => [d.name, round(jqOneProgramBig[di]!, 1)])),
    ratios_to_cel: ratios,
    memory,
    probe_timeout_ms: PROBE_TIMEOUT_MS,
    probes,
    redos,
    checksum_trues: sink.trues,
  };
  const stamp = startedAt.toISOString().slice(0, 16).replace('T', '-').replace(':', '');
  mkdirSync(path.join(BENCH_DIR, 'results'), { recursive: true });
  const file = path.join(BENCH_DIR, 'results', `rule-languages-${stamp}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`\nwritten ${path.relative(process.cwd(), file)}`);
  process.exitCode = 0;
  if (args.json) process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (args.child === 'memory') await childMemory(args.lang as LangId);
else if (args.child === 'probe') await childProbe(args.probe!);
else await main();

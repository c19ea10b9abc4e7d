import { createHmac, randomUUID } from 'node:crypto';

/**
 * Webhook deliveries shaped like the ones GitHub and Gitea send (written from their public payload
 * documentation, trimmed to the fields a reader needs), and signing exactly as GitHub documents it:
 * `X-Hub-Signature-256: sha256=` + the hex HMAC-SHA256 of the raw body with the webhook secret.
 * Shared by the ingest tests and bench/ingest.ts.
 */

const octocat = { login: 'octocat', id: 583231, node_id: 'MDQ6VXNlcjU4MzIzMQ==', type: 'User', site_admin: false };
const hubot = { login: 'hubot', id: 1, node_id: 'MDQ6VXNlcjE=', type: 'User', site_admin: false };

export const githubRepository = {
  id: 1296269,
  node_id: 'MDEwOlJlcG9zaXRvcnkxMjk2MjY5',
  name: 'repo',
  full_name: 'octo/repo',
  private: false,
  owner: { login: 'octo', id: 9919, node_id: 'MDEyOk9yZ2FuaXphdGlvbjk5MTk=', type: 'Organization', site_admin: false },
  html_url: 'https://github.com/octo/repo',
  description: 'A queue for robots',
  fork: false,
  url: 'https://api.github.com/repos/octo/repo',
  created_at: '2024-03-01T10:00:00Z',
  updated_at: '2026-01-05T08:59:00Z',
  pushed_at: '2026-01-05T08:58:00Z',
  default_branch: 'main',
  visibility: 'public',
};

const issue = {
  url: 'https://api.github.com/repos/octo/repo/issues/12',
  html_url: 'https://github.com/octo/repo/issues/12',
  id: 2001234567,
  node_id: 'I_kwDOABCD5c53r9Xg',
  number: 12,
  title: 'Doorbell rings twice after a redelivery',
  user: octocat,
  labels: [{ id: 208045946, node_id: 'MDU6TGFiZWwyMDgwNDU5NDY=', name: 'bug', color: 'd73a4a', default: true }],
  state: 'open',
  locked: false,
  assignee: null,
  assignees: [],
  milestone: null,
  comments: 0,
  created_at: '2026-01-05T08:59:30Z',
  updated_at: '2026-01-05T08:59:30Z',
  closed_at: null,
  author_association: 'MEMBER',
  body: 'Steps to reproduce:\r\n1. Redeliver from the hook settings\r\n2. Watch the agent',
  reactions: { total_count: 0 },
  state_reason: null,
};

const pullRequest = {
  url: 'https://api.github.com/repos/octo/repo/pulls/42',
  id: 1934567890,
  node_id: 'PR_kwDOABCD5c5zT0aS',
  html_url: 'https://github.com/octo/repo/pull/42',
  number: 42,
  state: 'open',
  locked: false,
  title: 'Add a retry budget to the doorbell',
  user: octocat,
  body: 'Caps ring attempts per todo.',
  created_at: '2026-01-05T08:59:40Z',
  updated_at: '2026-01-05T08:59:40Z',
  closed_at: null,
  merged_at: null,
  merge_commit_sha: null,
  assignee: null,
  assignees: [],
  requested_reviewers: [] as (typeof hubot)[],
  draft: false,
  head: { label: 'octocat:retry-budget', ref: 'retry-budget', sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e', user: octocat },
  base: { label: 'octo:main', ref: 'main', sha: '7638417db6d59f3c431d3e1f261cc637155684cd', user: githubRepository.owner },
  author_association: 'MEMBER',
  merged: false,
  commits: 3,
  additions: 120,
  deletions: 4,
  changed_files: 5,
};

export const githubIssueOpened = {
  action: 'opened',
  issue,
  repository: githubRepository,
  sender: octocat,
};

export const githubPullRequestOpened = {
  action: 'opened',
  number: 42,
  pull_request: pullRequest,
  repository: githubRepository,
  sender: octocat,
};

export const githubPullRequestReviewRequested = {
  action: 'review_requested',
  number: 42,
  pull_request: { ...pullRequest, requested_reviewers: [hubot], updated_at: '2026-01-05T09:00:10Z' },
  requested_reviewer: hubot,
  repository: githubRepository,
  sender: octocat,
};

export const githubIssueCommentCreated = {
  action: 'created',
  issue: { ...issue, comments: 1 },
  comment: {
    url: 'https://api.github.com/repos/octo/repo/issues/comments/1234567890',
    html_url: 'https://github.com/octo/repo/issues/12#issuecomment-1234567890',
    id: 1234567890,
    node_id: 'IC_kwDOABCD5c5JjBX2',
    user: hubot,
    created_at: '2026-01-05T09:01:00Z',
    updated_at: '2026-01-05T09:01:00Z',
    author_association: 'CONTRIBUTOR',
    body: 'I can reproduce this on main.',
  },
  repository: githubRepository,
  sender: hubot,
};

export const githubPush = {
  ref: 'refs/heads/main',
  before: '7638417db6d59f3c431d3e1f261cc637155684cd',
  after: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
  created: false,
  deleted: false,
  forced: false,
  base_ref: null,
  compare: 'https://github.com/octo/repo/compare/7638417db6d5...0d1a26e67d8f',
  commits: [
    {
      id: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
      tree_id: 'f9d2a07e9488b91af2641b26b9407fe22a451433',
      distinct: true,
      message: 'Cap doorbell retries',
      timestamp: '2026-01-05T10:02:00+01:00',
      url: 'https://github.com/octo/repo/commit/0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
      author: { name: 'Mona Octocat', email: 'mona@example.com', username: 'octocat' },
      committer: { name: 'GitHub', email: 'noreply@github.com', username: 'web-flow' },
      added: [],
      removed: [],
      modified: ['src/doorbell/doorbell.ts'],
    },
    {
      id: '1e2b37f78e9f6fbf2f7cb6d68fd4d8e02bd1ae2d',
      tree_id: 'a8e3b18f9599ca1bf3752c37c2508ff33b562544',
      distinct: true,
      message: 'Test the cap',
      timestamp: '2026-01-05T10:03:00+01:00',
      url: 'https://github.com/octo/repo/commit/1e2b37f78e9f6fbf2f7cb6d68fd4d8e02bd1ae2d',
      author: { name: 'Mona Octocat', email: 'mona@example.com', username: 'octocat' },
      committer: { name: 'GitHub', email: 'noreply@github.com', username: 'web-flow' },
      added: ['src/doorbell/doorbell.test.ts'],
      removed: [],
      modified: [],
    },
  ],
  head_commit: null,
  repository: githubRepository,
  pusher: { name: 'octocat', email: 'mona@example.com' },
  sender: octocat,
};

export const githubReleasePublished = {
  action: 'published',
  release: {
    url: 'https://api.github.com/repos/octo/repo/releases/180000000',
    html_url: 'https://github.com/octo/repo/releases/tag/v1.4.0',
    id: 180000000,
    node_id: 'RE_kwDOABCD5c4KuN9A',
    tag_name: 'v1.4.0',
    target_commitish: 'main',
    name: 'Switchboard 1.4',
    draft: false,
    prerelease: false,
    created_at: '2026-01-05T09:10:00Z',
    published_at: '2026-01-05T09:12:00Z',
    author: octocat,
    assets: [],
    body: 'Webhook ingestion.',
  },
  repository: githubRepository,
  sender: octocat,
};

export const githubWorkflowRunFailed = {
  action: 'completed',
  workflow_run: {
    id: 9876543210,
    name: 'CI',
    node_id: 'WFR_kwLOABCD5c8AAAACTKxq6g',
    head_branch: 'retry-budget',
    head_sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e',
    path: '.github/workflows/ci.yml',
    display_title: 'Add a retry budget to the doorbell',
    run_number: 318,
    event: 'pull_request',
    status: 'completed',
    conclusion: 'failure',
    workflow_id: 4567890,
    html_url: 'https://github.com/octo/repo/actions/runs/9876543210',
    created_at: '2026-01-05T09:05:00Z',
    updated_at: '2026-01-05T09:09:00Z',
    run_attempt: 1,
    actor: octocat,
    triggering_actor: octocat,
  },
  workflow: { id: 4567890, node_id: 'W_kwDOABCD5c4ARaxS', name: 'CI', path: '.github/workflows/ci.yml', state: 'active' },
  repository: githubRepository,
  sender: octocat,
};

/** Gitea's `issues` event (opened): the same shape, Gitea's own field set. */
export const giteaIssueOpened = {
  action: 'opened',
  number: 7,
  issue: {
    id: 311,
    url: 'https://gitea.example.com/api/v1/repos/team/app/issues/7',
    html_url: 'https://gitea.example.com/team/app/issues/7',
    number: 7,
    user: { id: 3, login: 'alice', full_name: 'Alice', email: 'alice@example.com', username: 'alice' },
    title: 'Login page 500s on an empty password',
    body: 'Submitting the form with no password crashes.',
    labels: [],
    milestone: null,
    assignees: null,
    state: 'open',
    is_locked: false,
    comments: 0,
    created_at: '2026-01-05T09:00:00Z',
    updated_at: '2026-01-05T09:00:00Z',
    closed_at: null,
  },
  repository: {
    id: 41,
    owner: { id: 2, login: 'team', username: 'team' },
    name: 'app',
    full_name: 'team/app',
    private: true,
    html_url: 'https://gitea.example.com/team/app',
    default_branch: 'main',
  },
  sender: { id: 3, login: 'alice', username: 'alice' },
};

/**
 * GitHub's `ping`, sent when a hook is created (and by "Redeliver" on that delivery): the hook's own
 * settings and a line of zen. The secret in `config` is masked by GitHub itself.
 */
export const githubPing = {
  zen: 'Design for failure.',
  hook_id: 512345678,
  hook: {
    type: 'Repository',
    id: 512345678,
    name: 'web',
    active: true,
    events: ['issues', 'pull_request'],
    config: { content_type: 'json', insecure_ssl: '0', secret: '********', url: 'https://switchboard.example.com/webhooks/w/…' },
    updated_at: '2026-01-05T08:59:00Z',
    created_at: '2026-01-05T08:59:00Z',
    url: 'https://api.github.com/repos/octo/repo/hooks/512345678',
    test_url: 'https://api.github.com/repos/octo/repo/hooks/512345678/test',
    ping_url: 'https://api.github.com/repos/octo/repo/hooks/512345678/pings',
    deliveries_url: 'https://api.github.com/repos/octo/repo/hooks/512345678/deliveries',
    last_response: { code: null, status: 'unused', message: null },
  },
  repository: githubRepository,
  sender: octocat,
};

const giteaZeroSha = '0000000000000000000000000000000000000000';
const giteaGhost = { name: 'Ghost', email: 'ghost@gitea.example.com', username: '' };

/**
 * What Gitea's "Test Delivery" button sends (Gitea has no ping): a `push` of a fake commit whose
 * `before`, `after` and id are all the zero object id, pushed by the user who pressed the button.
 */
export const giteaTestPush = {
  ref: 'refs/heads/main',
  before: giteaZeroSha,
  after: giteaZeroSha,
  compare_url: `https://gitea.example.com/team/app/compare/${giteaZeroSha}...${giteaZeroSha}`,
  commits: [
    {
      id: giteaZeroSha,
      message: 'This is a fake commit for webhook push test',
      url: `https://gitea.example.com/team/app/commit/${giteaZeroSha}`,
      author: giteaGhost,
      committer: giteaGhost,
      verification: null,
      timestamp: '0001-01-01T00:00:00Z',
      added: null,
      removed: null,
      modified: null,
    },
  ],
  total_commits: 1,
  head_commit: {
    id: giteaZeroSha,
    message: 'This is a fake commit for webhook push test',
    url: `https://gitea.example.com/team/app/commit/${giteaZeroSha}`,
    author: giteaGhost,
    committer: giteaGhost,
    verification: null,
    timestamp: '0001-01-01T00:00:00Z',
    added: null,
    removed: null,
    modified: null,
  },
  repository: giteaIssueOpened.repository,
  pusher: { id: 3, login: 'alice', username: 'alice' },
  sender: { id: 3, login: 'alice', username: 'alice' },
};

/** A real push to Gitea: the same shape with real ids, which must still make a todo. */
export const giteaPush = {
  ...giteaTestPush,
  before: '7638417db6d59f3c431d3e1f261cc637155684cd',
  after: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
  compare_url: 'https://gitea.example.com/team/app/compare/7638417db6d5...0d1a26e67d8f',
  commits: [{ ...giteaTestPush.commits[0]!, id: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c', message: 'Handle an empty password\n', author: { name: 'Alice', email: 'alice@example.com', username: 'alice' } }],
  head_commit: null,
};

/** A form-encoded body as GitHub and Gitea send it: `payload=` and the JSON, URL-encoded (`+` for spaces). */
export const formBody = (json: string): string => new URLSearchParams({ payload: json }).toString();

export const signSha256 = (secret: string, body: string | Buffer): string => createHmac('sha256', secret).update(body).digest('hex');
const signSha1 = (secret: string, body: string | Buffer): string => createHmac('sha1', secret).update(body).digest('hex');

/** The headers GitHub sends with a delivery to a hook that has a secret (both signature headers). */
export function githubHeaders(event: string, body: string | Buffer, secret: string, delivery: string = randomUUID()): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'GitHub-Hookshot/8e5a9c1',
    'x-github-event': event,
    'x-github-delivery': delivery,
    'x-github-hook-id': '512345678',
    'x-github-hook-installation-target-type': 'repository',
    'x-github-hook-installation-target-id': String(githubRepository.id),
    'x-hub-signature': `sha1=${signSha1(secret, body)}`,
    'x-hub-signature-256': `sha256=${signSha256(secret, body)}`,
  };
}

/**
 * The headers GitHub sends for a hook whose content type is `application/x-www-form-urlencoded`
 * (its default): the signatures are over the form body exactly as sent.
 */
export function githubFormHeaders(event: string, form: string, secret: string, delivery: string = randomUUID()): Record<string, string> {
  return { ...githubHeaders(event, form, secret, delivery), 'content-type': 'application/x-www-form-urlencoded' };
}

/**
 * The headers Gitea sends (services/webhook/deliver.go): its own, Gogs' and GitHub's names for the
 * delivery, the event and the signature. Every signature is over `signed`: the JSON body, and for
 * a form delivery still the JSON (the `payload` field's value), not the form body around it.
 */
export function giteaHeaders(
  event: string,
  signed: string | Buffer,
  secret: string,
  delivery: string = randomUUID(),
  contentType: 'application/json' | 'application/x-www-form-urlencoded' = 'application/json',
): Record<string, string> {
  const hex = signSha256(secret, signed);
  return {
    'content-type': contentType,
    'user-agent': 'Go-http-client/1.1',
    'x-gitea-delivery': delivery,
    'x-gitea-event': event,
    'x-gitea-event-type': event,
    'x-gitea-signature': hex,
    'x-gogs-delivery': delivery,
    'x-gogs-event': event,
    'x-gogs-event-type': event,
    'x-gogs-signature': hex,
    'x-hub-signature': `sha1=${signSha1(secret, signed)}`,
    'x-hub-signature-256': `sha256=${hex}`,
    'x-github-delivery': delivery,
    'x-github-event': event,
    'x-github-event-type': event,
  };
}

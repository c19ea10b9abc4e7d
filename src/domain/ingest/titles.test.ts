import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  giteaIssueOpened,
  githubHeaders,
  githubIssueCommentCreated,
  githubIssueOpened,
  githubPullRequestOpened,
  githubPullRequestReviewRequested,
  githubPush,
  githubReleasePublished,
  githubWorkflowRunFailed,
  signSha256,
} from './fixtures.testkit.ts';
import { oneLine, titleFor } from './titles.ts';
import { MAX_JSON_DEPTH, deliveryId, eventType, jsonDepthExceeds, sanitizeHeaders, verifySignature } from './verify.ts';

/** Titles and the pure parts of verification, on payloads shaped like GitHub's and Gitea's. */

const bytes = (s: string) => Buffer.byteLength(s);
/** True when the string has no lone surrogate (it survives a UTF-8 round trip unchanged). */
const wellFormed = (s: string) => Buffer.from(s, 'utf8').toString('utf8') === s;

describe('titleFor: GitHub events', () => {
  it('issues opened', () => {
    expect(titleFor('github', 'issues', githubIssueOpened)).toBe('Issue #12 opened in octo/repo: Doorbell rings twice after a redelivery');
    expect(titleFor('github', 'issues', { ...githubIssueOpened, action: 'reopened' })).toBe(
      'Issue #12 reopened in octo/repo: Doorbell rings twice after a redelivery',
    );
  });

  it('issue_comment created names the commenter', () => {
    expect(titleFor('github', 'issue_comment', githubIssueCommentCreated)).toBe(
      'Comment on #12 in octo/repo by hubot: Doorbell rings twice after a redelivery',
    );
  });

  it('pull_request opened and review_requested', () => {
    expect(titleFor('github', 'pull_request', githubPullRequestOpened)).toBe('PR #42 opened in octo/repo: Add a retry budget to the doorbell');
    expect(titleFor('github', 'pull_request', githubPullRequestReviewRequested)).toBe(
      'Review requested from hubot on PR #42 in octo/repo: Add a retry budget to the doorbell',
    );
    // A team review request carries requested_team instead of requested_reviewer.
    const { requested_reviewer: _r, ...teamRequest } = githubPullRequestReviewRequested;
    expect(titleFor('github', 'pull_request', { ...teamRequest, requested_team: { name: 'core', slug: 'core' } })).toBe(
      'Review requested from core on PR #42 in octo/repo: Add a retry budget to the doorbell',
    );
  });

  it('push counts commits and names the branch', () => {
    expect(titleFor('github', 'push', githubPush)).toBe('Push to main in octo/repo (2 commits)');
    expect(titleFor('github', 'push', { ...githubPush, commits: githubPush.commits.slice(0, 1) })).toBe('Push to main in octo/repo (1 commit)');
    expect(titleFor('github', 'push', { ...githubPush, ref: 'refs/tags/v1.4.0', commits: [] })).toBe(
      'Push to refs/tags/v1.4.0 in octo/repo (0 commits)',
    );
  });

  it('release published', () => {
    expect(titleFor('github', 'release', githubReleasePublished)).toBe('Release v1.4.0 published in octo/repo');
  });

  it('workflow_run completed with conclusion failure reads "failed"', () => {
    expect(titleFor('github', 'workflow_run', githubWorkflowRunFailed)).toBe('Workflow CI failed in octo/repo on retry-budget');
    const success = { ...githubWorkflowRunFailed, workflow_run: { ...githubWorkflowRunFailed.workflow_run, conclusion: 'success' } };
    expect(titleFor('github', 'workflow_run', success)).toBe('Workflow CI success in octo/repo on retry-budget');
  });

  it('Gitea issues use the same shape', () => {
    expect(titleFor('gitea', 'issues', giteaIssueOpened)).toBe('Issue #7 opened in team/app: Login page 500s on an empty password');
  });
});

describe('titleFor: fallbacks', () => {
  it('is "<event> on <repo>" for other events, and for a known event missing its object', () => {
    expect(titleFor('github', 'star', { action: 'created', repository: { full_name: 'octo/repo' } })).toBe('star on octo/repo');
    expect(titleFor('github', 'issues', { action: 'opened', repository: { full_name: 'octo/repo' } })).toBe('issues on octo/repo');
    expect(titleFor('github', 'pull_request', { repository: { full_name: 'octo/repo' } })).toBe('pull_request on octo/repo');
    expect(titleFor('gitea', 'create', { ref: 'v2', repository: { full_name: 'team/app' } })).toBe('create on team/app');
  });

  it('names the source when there is no repository, and "event" when there is no event header', () => {
    expect(titleFor('github', 'ping', { zen: 'Design for failure.', hook_id: 1 })).toBe('ping on github');
    expect(titleFor('gitea', null, {})).toBe('event on gitea');
    for (const payload of [null, 'text', 42, [1, 2]]) expect(titleFor('github', 'issues', payload)).toBe('issues on github');
  });

  it('generic: the body\'s title when it is a non-empty string, else "<event> delivery"', () => {
    expect(titleFor('generic', 'build.failed', { title: 'Nightly build failed' })).toBe('Nightly build failed');
    expect(titleFor('generic', 'build.failed', { title: '' })).toBe('build.failed delivery');
    expect(titleFor('generic', null, { title: 12 })).toBe('webhook delivery');
    expect(titleFor('generic', null, { body: 'plain text' })).toBe('webhook delivery');
  });
});

describe('oneLine and the 200-byte cap', () => {
  it('folds newlines, tabs and control characters into single spaces and trims', () => {
    expect(oneLine('  Fix\r\nthe\tthing\u0000now\u007f ')).toBe('Fix the thing now');
    const title = titleFor('github', 'issues', { ...githubIssueOpened, issue: { ...githubIssueOpened.issue, title: 'Line one\nLine two\r\n' } });
    expect(title).toBe('Issue #12 opened in octo/repo: Line one Line two');
  });

  it('keeps 200 bytes as they are and cuts 201 to 197 + "…"', () => {
    expect(oneLine('x'.repeat(200))).toBe('x'.repeat(200));
    expect(oneLine('x'.repeat(201))).toBe(`${'x'.repeat(197)}…`);
    expect(bytes(oneLine('x'.repeat(201)))).toBe(200);
  });

  it('cuts multibyte text on a character boundary, never past 200 bytes', () => {
    for (const text of ['é'.repeat(150), '日本語のタイトル'.repeat(20), '😀'.repeat(80), `a${'😀'.repeat(80)}`, `${'x'.repeat(198)}😀tail`]) {
      const t = oneLine(text);
      expect(bytes(t)).toBeLessThanOrEqual(200);
      expect(bytes(t)).toBeGreaterThan(190);
      expect(t.endsWith('…')).toBe(true);
      expect(wellFormed(t)).toBe(true);
      expect(text.startsWith(t.slice(0, -1))).toBe(true);
    }
    expect(oneLine(`${'x'.repeat(198)}😀tail`)).toBe(`${'x'.repeat(197)}…`);
    expect(oneLine('é'.repeat(150))).toBe(`${'é'.repeat(98)}…`);
  });

  it('caps a real title built from a long issue title', () => {
    const long = { ...githubIssueOpened, issue: { ...githubIssueOpened.issue, title: 'Ünïcödé '.repeat(60) } };
    const t = titleFor('github', 'issues', long);
    expect(t.startsWith('Issue #12 opened in octo/repo: Ünïcödé')).toBe(true);
    expect(bytes(t)).toBeLessThanOrEqual(200);
    expect(wellFormed(t)).toBe(true);
  });

  it('cuts a megabyte title in linear time (a generic producer controls the title)', () => {
    const started = performance.now();
    const t = titleFor('generic', null, { title: 'ä'.repeat(2_000_000) });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(t).toBe(`${'ä'.repeat(98)}…`);
  });
});

describe('verifySignature', () => {
  const secret = 'whsec_test-secret';
  const body = Buffer.from(JSON.stringify(githubIssueOpened));

  it("accepts GitHub's X-Hub-Signature-256 and refuses everything else with the reason", () => {
    const h = githubHeaders('issues', body, secret);
    expect(verifySignature('github', h, body, secret)).toEqual({ ok: true, signed: body });
    expect(verifySignature('github', { ...h, 'x-hub-signature-256': h['x-hub-signature-256']!.toUpperCase().replace('SHA256=', 'sha256=') }, body, secret)).toEqual({
      ok: true,
      signed: body,
    });
    expect(verifySignature('github', h, body, 'whsec_other')).toEqual({ ok: false, reason: 'bad_signature' });
    expect(verifySignature('github', h, Buffer.concat([body, Buffer.from(' ')]), secret)).toEqual({ ok: false, reason: 'bad_signature' });
    const { 'x-hub-signature-256': _sig, ...sha1Only } = h;
    expect(verifySignature('github', sha1Only, body, secret)).toEqual({ ok: false, reason: 'missing_signature' });
    expect(verifySignature('github', { ...h, 'x-hub-signature-256': signSha256(secret, body) }, body, secret)).toEqual({
      ok: false,
      reason: 'malformed_signature',
    });
    for (const bad of ['sha256=', 'sha256=zz', `sha256=${'a'.repeat(63)}`, `sha256=${'a'.repeat(66)}`, `sha1=${'a'.repeat(64)}`]) {
      expect(verifySignature('github', { ...h, 'x-hub-signature-256': bad }, body, secret)).toEqual({ ok: false, reason: 'malformed_signature' });
    }
    // GitHub's bare-hex Gitea header means nothing to a github webhook.
    expect(verifySignature('github', { 'x-gitea-signature': signSha256(secret, body) }, body, secret)).toEqual({ ok: false, reason: 'missing_signature' });
  });

  it('Gitea: the bare X-Gitea-Signature, or the GitHub-style header', () => {
    const hex = signSha256(secret, body);
    expect(verifySignature('gitea', { 'x-gitea-signature': hex }, body, secret)).toEqual({ ok: true, signed: body });
    expect(verifySignature('gitea', { 'x-hub-signature-256': `sha256=${hex}` }, body, secret)).toEqual({ ok: true, signed: body });
    expect(verifySignature('gitea', { 'x-gitea-signature': `sha256=${hex}` }, body, secret)).toEqual({ ok: false, reason: 'malformed_signature' });
    expect(verifySignature('gitea', { 'x-gitea-signature': signSha256('other', body) }, body, secret)).toEqual({ ok: false, reason: 'bad_signature' });
    expect(verifySignature('gitea', {}, body, secret)).toEqual({ ok: false, reason: 'missing_signature' });
  });

  it('names the bytes it verified: the raw body first, else an alternative the signature covers', () => {
    const json = Buffer.from('{"a":1}');
    const form = Buffer.from(new URLSearchParams({ payload: json.toString() }).toString());
    expect(verifySignature('gitea', { 'x-gitea-signature': signSha256(secret, json) }, form, secret, [json])).toEqual({ ok: true, signed: json });
    expect(verifySignature('gitea', { 'x-gitea-signature': signSha256(secret, form) }, form, secret, [json])).toEqual({ ok: true, signed: form });
    expect(verifySignature('gitea', { 'x-gitea-signature': signSha256(secret, json) }, form, secret)).toEqual({ ok: false, reason: 'bad_signature' });
    expect(verifySignature('gitea', { 'x-gitea-signature': signSha256('other', json) }, form, secret, [json])).toEqual({ ok: false, reason: 'bad_signature' });
  });
});

describe('deliveryId', () => {
  const body = Buffer.from('{"a":1}');
  const bodyHash = `sha256:${createHash('sha256').update(body).digest('hex')}`;

  it("takes each provider's own header, in precedence order", () => {
    expect(deliveryId('github', { 'x-github-delivery': 'gh-1', 'x-delivery-id': 'x' }, body)).toBe('gh-1');
    expect(deliveryId('gitea', { 'x-gitea-delivery': 'gt-1', 'x-github-delivery': 'gh-1' }, body)).toBe('gt-1');
    expect(deliveryId('gitea', { 'x-github-delivery': 'gh-1' }, body)).toBe('gh-1');
    expect(deliveryId('generic', { 'x-delivery-id': 'd-1', 'webhook-id': 'msg_1' }, body)).toBe('d-1');
    expect(deliveryId('generic', { 'webhook-id': 'msg_1' }, body)).toBe('msg_1');
    expect(deliveryId('generic', { 'x-github-delivery': 'gh-1' }, body)).toBe(bodyHash);
    expect(deliveryId('github', { 'x-github-delivery': ['first', 'second'] }, body)).toBe('first');
    expect(deliveryId('github', { 'x-github-delivery': '  padded  ' }, body)).toBe('padded');
  });

  it('falls back to the SHA-256 of the body when the id is absent, blank or over 256 bytes', () => {
    expect(deliveryId('github', {}, body)).toBe(bodyHash);
    expect(deliveryId('github', { 'x-github-delivery': '   ' }, body)).toBe(bodyHash);
    expect(deliveryId('github', { 'x-github-delivery': 'a'.repeat(256) }, body)).toBe('a'.repeat(256));
    expect(deliveryId('github', { 'x-github-delivery': 'a'.repeat(257) }, body)).toBe(bodyHash);
    // Bytes, not characters: 128 × "é" is 256 bytes, 129 is 258.
    expect(deliveryId('generic', { 'x-delivery-id': 'é'.repeat(128) }, body)).toBe('é'.repeat(128));
    expect(deliveryId('generic', { 'x-delivery-id': 'é'.repeat(129) }, body)).toBe(bodyHash);
    // A too-long first choice does not hide a usable second one.
    expect(deliveryId('generic', { 'x-delivery-id': 'a'.repeat(300), 'webhook-id': 'msg_2' }, body)).toBe('msg_2');
  });
});

describe('eventType', () => {
  it('reads the provider header', () => {
    expect(eventType('github', { 'x-github-event': 'issues' })).toBe('issues');
    expect(eventType('gitea', { 'x-gitea-event': 'push', 'x-github-event': 'x' })).toBe('push');
    expect(eventType('gitea', { 'x-github-event': 'push' })).toBe('push');
    expect(eventType('generic', { 'x-event-type': 'build.failed' })).toBe('build.failed');
    expect(eventType('github', {})).toBeNull();
  });
});

describe('sanitizeHeaders', () => {
  it('redacts signatures, credentials and cookies, lower-cases names and drops hop-by-hop noise', () => {
    const body = '{"a":1}';
    const out = sanitizeHeaders({
      ...githubHeaders('issues', body, 'whsec_s', 'd-1'),
      'X-Gitea-Signature': 'abc',
      'x-gogs-signature': 'abc',
      Authorization: 'Bearer sbp_secret',
      'proxy-authorization': 'Basic Zm9vOmJhcg==',
      cookie: 'session=1',
      'x-api-key': 'k',
      connection: 'keep-alive',
      'content-length': '7',
      'transfer-encoding': 'chunked',
      'x-forwarded-for': ['10.0.0.1', '10.0.0.2'],
      'x-long': 'y'.repeat(5000),
      'x-missing': undefined,
    });
    for (const k of ['x-hub-signature', 'x-hub-signature-256', 'x-gitea-signature', 'x-gogs-signature', 'authorization', 'proxy-authorization', 'cookie', 'x-api-key']) {
      expect(out[k]).toBe('«redacted»');
    }
    expect(out).toMatchObject({ 'x-github-event': 'issues', 'x-github-delivery': 'd-1', 'content-type': 'application/json', 'x-forwarded-for': '10.0.0.1, 10.0.0.2' });
    expect(out['x-long']).toHaveLength(1024);
    for (const k of ['connection', 'content-length', 'transfer-encoding', 'x-missing', 'X-Gitea-Signature', 'Authorization']) expect(out).not.toHaveProperty(k);
    expect(JSON.stringify(out)).not.toMatch(/sha(1|256)=|sbp_secret|session=1/);
  });
});

describe('jsonDepthExceeds', () => {
  const nested = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

  it(`allows ${MAX_JSON_DEPTH} levels and refuses ${MAX_JSON_DEPTH + 1}`, () => {
    expect(jsonDepthExceeds(nested(MAX_JSON_DEPTH))).toBe(false);
    expect(jsonDepthExceeds(nested(MAX_JSON_DEPTH + 1))).toBe(true);
    expect(jsonDepthExceeds(`${'{"a":'.repeat(MAX_JSON_DEPTH + 1)}1${'}'.repeat(MAX_JSON_DEPTH + 1)}`)).toBe(true);
    expect(jsonDepthExceeds(nested(12_000))).toBe(true);
    expect(jsonDepthExceeds(nested(3), 2)).toBe(true);
  });

  it('counts depth, not brackets: siblings and brackets inside strings do not add up', () => {
    expect(jsonDepthExceeds(JSON.stringify(Array.from({ length: 500 }, () => [[{ a: [1] }]])))).toBe(false);
    expect(jsonDepthExceeds(JSON.stringify({ text: '['.repeat(1000) }))).toBe(false);
    expect(jsonDepthExceeds(JSON.stringify({ text: `\\"${'{'.repeat(1000)}` }))).toBe(false);
    expect(jsonDepthExceeds(JSON.stringify(githubPullRequestReviewRequested))).toBe(false);
  });
});

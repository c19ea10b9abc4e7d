import { describe, expect, it } from 'vitest';
import { SwitchboardError } from '../errors.ts';
import { githubIssueCommentCreated, githubPullRequestReviewRequested, githubPush } from '../ingest/fixtures.testkit.ts';
import { buildEnvelope, type DeliveryFacts } from './envelope.ts';
import { compileWhen } from './expression.ts';
import { compileRouting, DELIVERY_BUDGET_MS, RULE_BUDGET_MS } from './route.ts';
import { applyRoutingUpdate, EMPTY_ROUTING, MAX_EXPRESSION_BYTES, MAX_RULES, parseRoutingUpdate, type RoutingConfig } from './rules.ts';

const refusal = (f: () => unknown): SwitchboardError => {
  try {
    f();
  } catch (err) {
    if (err instanceof SwitchboardError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
};

const facts = (event: string, payload: unknown): DeliveryFacts => ({
  source: 'github',
  event,
  deliveryId: 'd-1',
  trustMode: 'signed',
  verified: true,
  headers: { 'x-github-event': event },
  payload,
});

const rule = (name: string, when: string, action: RoutingConfig['rules'][number]['action']) => ({ name, when, action });

describe('parseRoutingUpdate: the shape of a rules write, each problem naming its field', () => {
  it('names the rule index and field', () => {
    expect(refusal(() => parseRoutingUpdate({ rules: [rule('a', 'true', { queue: 'x' }), { name: 'b', action: { drop: true } }] })).details.field).toBe('rules.1.when');
    expect(refusal(() => parseRoutingUpdate({ rules: [rule('a', 'true', { queue: 'Bad Queue' })] })).details.field).toBe('rules.0.action.queue');
    expect(refusal(() => parseRoutingUpdate({ rules: [rule('a', 'true', { queue: 'x', endpoints: [] })] })).details.field).toBe('rules.0.action.endpoints');
    expect(refusal(() => parseRoutingUpdate({ rules: [rule('a', 'true', { drop: false } as never)] })).details.field).toBe('rules.0.action');
    expect(refusal(() => parseRoutingUpdate({ rules: [rule('a', 'true', { drop: true }), rule('a', 'false', { drop: true })] })).message).toBe(
      'rules.1.name: "a" names another rule too; names must be unique',
    );
    expect(refusal(() => parseRoutingUpdate({ rulez: [] })).details.field).toBe('rulez');
  });

  it('holds the limits: 32 rules, 4 KiB per expression, 16 KiB of params', () => {
    const many = Array.from({ length: MAX_RULES + 1 }, (_, i) => rule(`r${i}`, 'true', { drop: true }));
    expect(refusal(() => parseRoutingUpdate({ rules: many })).details.field).toBe('rules');
    expect(parseRoutingUpdate({ rules: many.slice(0, MAX_RULES) }).rules).toHaveLength(MAX_RULES);
    const long = `event == "${'x'.repeat(MAX_EXPRESSION_BYTES)}"`;
    expect(refusal(() => parseRoutingUpdate({ rules: [rule('a', long, { drop: true })] })).details.field).toBe('rules.0.when');
    expect(refusal(() => parseRoutingUpdate({ params: { blob: 'x'.repeat(16 * 1024) } })).details.field).toBe('params');
  });

  it('keeps what an update omits; only null clears (params above all)', () => {
    const stored: RoutingConfig = { rules: [rule('a', 'true', { drop: true })], params: { bot: 'hubot' }, defaultAction: { drop: true } };
    expect(applyRoutingUpdate(stored, parseRoutingUpdate({ rules: [] }))).toEqual({ ...stored, rules: [] });
    expect(applyRoutingUpdate(stored, parseRoutingUpdate({}))).toEqual(stored);
    expect(applyRoutingUpdate(stored, parseRoutingUpdate({ params: null }))).toEqual({ ...stored, params: {} });
    expect(applyRoutingUpdate(stored, parseRoutingUpdate({ default_action: null, rules: null }))).toEqual({ ...stored, rules: [], defaultAction: null });
  });
});

describe('compileWhen: CEL, bounded at save', () => {
  const refused = (when: string) => refusal(() => compileWhen('rules.2.when', when));

  it('refuses what does not parse, type-check or answer a bool, naming the field with reason invalid_expression', () => {
    for (const bad of ['event ==', 'nobody == 1', '1 + 1']) {
      const e = refused(bad);
      expect(e.code).toBe('invalid_argument');
      expect(e.details).toEqual({ field: 'rules.2.when', reason: 'invalid_expression' });
    }
    expect(refused('1 + 1').message).toBe('rules.2.when: must be true or false, but is a int');
    expect(refused('nobody == 1').message).toContain('Unknown variable: nobody');
  });

  it('refuses regular expressions, list-building macros, nested comprehensions and outside reads inside one', () => {
    expect(refused('payload.body.matches("(a+)+$")').message).toContain('regular expressions are not allowed');
    expect(refused('labels.map(l, l).size() > 0').message).toContain('map() builds lists');
    expect(refused('labels.exists(l, assignees.exists(a, a == l))').message).toContain('a comprehension inside another');
    expect(refused('labels.exists(l, l == payload.body)').message).toContain('only its variable (l), params and literals');
    // Nothing can build a value bigger than the rule and its params (a doubling bind, a payload joined to itself).
    expect(refused('cel.bind(x, payload.commits + payload.commits, size(x) > 1)').message).toContain('cel.bind() is not allowed');
    expect(refused('size(payload.body + payload.body) > 1').message).toContain('+ may join only literals and params');
    expect(refused('size(labels + assignees) > 1').message).toContain('+ may join only literals and params');
    expect(refused('size([payload.body.lowerAscii(), payload.body.upperAscii()]) > 1').message).toContain('a list literal may hold only literals and params');
    expect(refused('size(payload.body.split("")) > 1').message).toContain('split() builds a list');
    expect(refused('size(bytes(payload.body).json()) > 1').message).toContain('json() parses a copy');
    // What routing needs compiles.
    for (const ok of ['labels.exists(l, l in params.labels)', 'has(payload.issue) && payload.issue.number > 10', 'event in ["check_run", "status"]', 'payload.comment.body.contains("@" + params.bot)']) {
      expect(() => compileWhen('when', ok)).not.toThrow();
    }
  });
});

describe('buildEnvelope: the forge fields every rule can count on', () => {
  it('reads a review request', () => {
    const e = buildEnvelope(facts('pull_request', githubPullRequestReviewRequested), { bot: 'hubot' });
    expect(e).toMatchObject({ event: 'pull_request', action: 'review_requested', repository: 'octo/repo', number: 42, subject: 'octo/repo#42' });
    expect(e.requested_reviewers).toContain(githubPullRequestReviewRequested.requested_reviewer.login);
    expect(e.params).toEqual({ bot: 'hubot' });
  });

  it('does not count a reviewer whose request was removed', () => {
    const removed = { ...githubPullRequestReviewRequested, action: 'review_request_removed', requested_reviewer: { login: 'hubot' } };
    expect(buildEnvelope(facts('pull_request', removed), {}).requested_reviewers).not.toContain('hubot');
  });

  it('gives a push empty fields, not missing ones', () => {
    const e = buildEnvelope(facts('push', githubPush), {});
    expect(e).toMatchObject({ number: null, subject: null, labels: [], assignees: [], requested_reviewers: [], action: null, repository: 'octo/repo' });
  });

  it("reads a comment's issue", () => {
    const e = buildEnvelope(facts('issue_comment', githubIssueCommentCreated), {});
    expect(e).toMatchObject({ number: 12, subject: 'octo/repo#12', labels: ['bug'] });
  });
});

describe('compileRouting: first match wins, else the default; faults fail closed', () => {
  const config: RoutingConfig = {
    rules: [
      rule('ci noise', 'event in ["check_run", "check_suite", "status", "workflow_job"]', { drop: true }),
      rule('review', 'event == "pull_request" && requested_reviewers.exists(r, r == params.bot)', { queue: 'reviews', once: true }),
      rule('review again', 'event == "pull_request"', { queue: 'other' }),
    ],
    params: { bot: 'hubot' },
    defaultAction: { drop: true },
  };
  const router = compileRouting(config);
  const decide = (event: string, payload: unknown) => router.decide(buildEnvelope(facts(event, payload), config.params));

  it('takes the first rule that matches and traces it', () => {
    const d = decide('pull_request', { ...githubPullRequestReviewRequested, requested_reviewer: { login: 'hubot' } });
    expect(d).toEqual({ fault: false, action: { queue: 'reviews', once: true }, trace: { stage: 'rule', rule_index: 1, rule_name: 'review', action: 'queue', queue: 'reviews', once: true } });
    expect(decide('check_run', {})).toMatchObject({ fault: false, action: { drop: true }, trace: { stage: 'rule', rule_index: 0, action: 'drop' } });
  });

  it('falls to the default action, and without rules to the target queue', () => {
    expect(decide('push', githubPush)).toEqual({ fault: false, action: { drop: true }, trace: { stage: 'default', rule_index: null, rule_name: null, action: 'drop' } });
    const plain = compileRouting(EMPTY_ROUTING);
    expect(plain.routes).toBe(false);
    expect(plain.decide(buildEnvelope(facts('push', githubPush), {}))).toMatchObject({ fault: false, action: null, trace: { stage: 'default', action: 'queue' } });
  });

  it('faults, and stops, on an error, a non-bool answer, or a budget exceeded', () => {
    const erring = compileRouting({ ...EMPTY_ROUTING, rules: [rule('deep', 'payload.issue.number > 1', { drop: true }), rule('never', 'true', { drop: true })] });
    expect(erring.decide(buildEnvelope(facts('push', githubPush), {}))).toMatchObject({
      fault: true,
      trace: { stage: 'rule', rule_index: 0, rule_name: 'deep', action: 'fault', cause: 'error', message: expect.stringContaining('issue') },
    });
    const stringly = compileRouting({ ...EMPTY_ROUTING, rules: [rule('event', 'event', { drop: true })] });
    expect(stringly.decide(buildEnvelope(facts('push', githubPush), {}))).toMatchObject({ fault: true, trace: { cause: 'not_bool', message: 'answered "push", not true or false' } });

    // A stopwatch that moves as the test says: each reading advances it.
    const slow = (step: number) => {
      let t = 0;
      return () => (t += step);
    };
    const two = { ...EMPTY_ROUTING, rules: [rule('a', 'false', { drop: true }), rule('b', 'false', { drop: true })] };
    expect(compileRouting(two, slow(RULE_BUDGET_MS + 1)).decide(buildEnvelope(facts('push', {}), {}))).toMatchObject({ fault: true, trace: { rule_index: 0, cause: 'rule_budget' } });
    // Each rule within its budget, the delivery over its own.
    const many = { ...EMPTY_ROUTING, rules: Array.from({ length: 8 }, (_, i) => rule(`r${i}`, 'false', { drop: true })) };
    const d = compileRouting(many, slow(DELIVERY_BUDGET_MS / 10)).decide(buildEnvelope(facts('push', {}), {}));
    expect(d).toMatchObject({ fault: true, trace: { cause: 'delivery_budget' } });
  });
});

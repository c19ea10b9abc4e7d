import { beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_VERBS } from '../domain/scope.ts';
import { vend as vendVia, withApp, type Api, type TestApp, type Vended } from '../../test/support/fixtures.ts';

// The webhook rules verbs end to end (issue 37): the MCP SDK's own Client against the real server,
// bounded as the API bounds an agent (its own webhooks, its own queues, no fan-out).

const fixture = withApp({ refillMs: 60_000 });
let app: TestApp;
let api: Api;
beforeAll(() => void ({ app, api } = fixture));

const RULES_VERBS = ['get_webhook_rules', 'set_webhook_rules', 'test_webhook_rules'];
const vend = (body: Record<string, unknown> = {}): Promise<Vended> => vendVia(api, { name: 'rules-agent', queues: ['reviews', 'inbox'], ...body });

/** A generic webhook on `e`, made by its human through the API. */
async function webhookOf(e: Vended): Promise<{ webhook_id: string; ingest_url: string }> {
  const r = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
  expect(r.status, r.text).toBe(201);
  return r.json;
}

async function deliver(w: { ingest_url: string }, event: string, payload: unknown): Promise<any> {
  app.clock.advance(1000);
  const res = await fetch(w.ingest_url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-event-type': event }, body: JSON.stringify(payload) });
  expect(res.status).toBeLessThan(300);
  return res.json();
}

const comments = { name: 'comments', when: 'event == "issue_comment"', action: { queue: 'reviews', once: true } };

describe('webhook rules verbs', () => {
  let e: Vended;
  let w: { webhook_id: string; ingest_url: string };
  let agent: Awaited<ReturnType<typeof fixture.agent>>;
  const saved = async () => (await api('GET', `/api/v1/endpoints/${e.slug}/webhooks/${w.webhook_id}/rules`)).json;

  beforeAll(async () => {
    e = await vend({ verbs: ['list_todos', 'get_todo', ...WEBHOOK_VERBS] });
    w = await webhookOf(e);
    await deliver(w, 'push', { ref: 'refs/heads/main' });
    await deliver(w, 'issue_comment', { issue: { number: 1 }, comment: { body: 'hi' } });
    agent = await fixture.agent(e);
  });

  it('are their own grants: listed only when vended with them, refused otherwise', async () => {
    const plain = await fixture.agent(await vend({ verbs: ['create_webhook', 'list_webhooks', 'rotate_webhook', 'delete_webhook'] }));
    const names = (await plain.client.listTools()).tools.map((t) => t.name);
    for (const verb of RULES_VERBS) expect(names).not.toContain(verb);
    expect((await plain.call('get_webhook_rules', { webhook_id: w.webhook_id })).error).toMatch(/^forbidden: verb "get_webhook_rules" is not granted/);
    expect((await agent.client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(RULES_VERBS));
  });

  it('get_webhook_rules reads the rules of its own webhook', async () => {
    expect(await agent.call('get_webhook_rules', { webhook_id: w.webhook_id })).toEqual({ webhook_id: w.webhook_id, rules: [], params: {}, default_action: null, target_queue: 'inbox' });
  });

  it('set_webhook_rules saves and answers the dry run; the next delivery is routed by it, and get_todo says so', async () => {
    const r = await agent.call('set_webhook_rules', { webhook_id: w.webhook_id, rules: [comments], params: { bot: 'hubot' }, default_action: { drop: true } });
    expect(r).toMatchObject({ webhook_id: w.webhook_id, rules: [comments], params: { bot: 'hubot' }, default_action: { drop: true } });
    expect(r.dry_run).toHaveLength(2);
    expect(r.dry_run.map((x: any) => [x.event, x.would.action, x.did.disposition])).toEqual([
      ['issue_comment', 'queue', 'routed'],
      ['push', 'drop', 'routed'],
    ]);
    expect(await saved()).toMatchObject({ rules: [comments], params: { bot: 'hubot' }, default_action: { drop: true } });
    // Omitted fields are kept.
    expect(await agent.call('set_webhook_rules', { webhook_id: w.webhook_id, params: { bot: 'octo' } })).toMatchObject({ rules: [comments], params: { bot: 'octo' } });

    const made = await deliver(w, 'issue_comment', { issue: { number: 2 }, comment: { body: 'again' } });
    expect(made).toMatchObject({ created: 1, queue: 'reviews' });
    expect(await agent.call('get_todo', { id: made.id })).toMatchObject({
      id: made.id,
      queue: 'reviews',
      routing: { stage: 'rule', rule_index: 0, rule_name: 'comments', action: 'queue', queue: 'reviews', once: true },
    });
  });

  it('a bad expression is invalid_argument naming its field; nothing is saved', async () => {
    const before = await saved();
    const r = await agent.call('set_webhook_rules', { webhook_id: w.webhook_id, rules: [comments, { name: 'broken', when: 'event ==', action: { drop: true } }] });
    expect(r.error).toMatch(/^invalid_argument: rules\.1\.when: /);
    expect(r.details).toMatchObject({ code: 'invalid_argument', field: 'rules.1.when', reason: 'invalid_expression' });
    const shape = await agent.call('set_webhook_rules', { webhook_id: w.webhook_id, rules: [{ ...comments, priority: 1 }] });
    expect(shape.error).toMatch(/^invalid_argument: rules\.0\.priority: unknown argument/);
    const action = await agent.call('set_webhook_rules', { webhook_id: w.webhook_id, default_action: { queue: 'inbox', drop: true } });
    expect(action.error).toMatch(/^invalid_argument: default_action/);
    expect(await saved()).toEqual(before);
  });

  it('fans out to no endpoint, not even its own, and routes to no queue outside its scope: forbidden, nothing saved', async () => {
    const before = await saved();
    const fanout = await agent.call('set_webhook_rules', { webhook_id: w.webhook_id, rules: [{ name: 'both', when: 'true', action: { queue: 'reviews', endpoints: [e.slug] } }] });
    expect(fanout.error).toMatch(/^forbidden: rules\.0\.action\.endpoints: only the endpoint's human may fan deliveries out/);
    expect(fanout.details).toMatchObject({ field: 'rules.0.action.endpoints' });
    const testFanout = await agent.call('test_webhook_rules', { webhook_id: w.webhook_id, default_action: { queue: 'inbox', endpoints: [e.slug] } });
    expect(testFanout.error).toMatch(/^forbidden: default_action\.endpoints: /);
    const outside = await agent.call('set_webhook_rules', { webhook_id: w.webhook_id, default_action: { queue: 'payments' } });
    expect(outside.error).toMatch(/^forbidden: default_action\.queue: "payments" is not one of endpoint/);
    expect(await saved()).toEqual(before);
  });

  it('test_webhook_rules checks and replays, saving nothing', async () => {
    const before = await saved();
    const r = await agent.call('test_webhook_rules', { webhook_id: w.webhook_id, rules: null, default_action: null });
    expect(r).toMatchObject({ webhook_id: w.webhook_id, rules: [], default_action: null });
    expect(r.dry_run).toHaveLength(3);
    expect(r.dry_run.every((x: any) => x.would.action === 'queue' && x.would.queue === 'inbox')).toBe(true);
    expect((await agent.call('test_webhook_rules', { webhook_id: w.webhook_id, rules: [{ name: 'x', when: '1 +', action: { drop: true } }] })).details).toMatchObject({
      field: 'rules.0.when',
    });
    expect(await saved()).toEqual(before);
  });

  it("answers another endpoint's webhook exactly like a missing one", async () => {
    const other = await vend();
    const theirs = await webhookOf(other);
    const missing = '00000000-0000-4000-8000-000000000000';
    for (const verb of RULES_VERBS) {
      const write = verb === 'get_webhook_rules' ? {} : { rules: [comments] };
      const foreign = await agent.call(verb, { webhook_id: theirs.webhook_id, ...write });
      const absent = await agent.call(verb, { webhook_id: missing, ...write });
      expect(foreign.error, verb).toMatch(/^not_found: /);
      expect(foreign.error.replace(theirs.webhook_id, missing)).toBe(absent.error);
    }
    // Not changed by the refused write.
    expect((await api('GET', `/api/v1/endpoints/${other.slug}/webhooks/${theirs.webhook_id}/rules`)).json.rules).toEqual([]);
  });
});

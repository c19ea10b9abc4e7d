import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { vend, withApp, type Api, type TestApp, type Vended } from '../../test/support/fixtures.ts';
import { main } from './main.ts';

// `switchboard webhook rules get|set|test`, run in-process against a real server (the style of
// cli.test.ts), over deliveries made through the webhook's real ingest URL.

const fixture = withApp({ refillMs: 60_000 });
let app: TestApp;
let api: Api;
let home: string;
let env: Record<string, string>;
let ep: Vended;
let webhookId: string;
let ingestUrl: string;

async function run(args: string[], stdin = ''): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(['node', 'switchboard', ...args], {
    io: { out: (t) => void (out += t), err: (t) => void (err += t) },
    env: { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), ...env },
    readStdin: async () => stdin,
    stdinIsTty: false,
  });
  return { code, out, err };
}

/** A file holding `content` (JSON of it unless a string). */
async function file(name: string, content: unknown): Promise<string> {
  const path = join(home, name);
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

/** A generic delivery of `event` to the webhook; answers the ingest's JSON. */
async function deliver(event: string, payload: unknown): Promise<any> {
  app.clock.advance(1000);
  const res = await fetch(ingestUrl, { method: 'POST', headers: { 'content-type': 'application/json', 'x-event-type': event }, body: JSON.stringify(payload) });
  expect(res.status).toBeLessThan(300);
  return res.json();
}

const rules = {
  rules: [
    { name: 'drop CI noise', when: 'event in ["check_run", "status"]', action: { drop: true } },
    { name: 'comments', when: 'event == "issue_comment"', action: { queue: 'reviews', once: true } },
  ],
  params: { bot: 'hubot' },
  default_action: { drop: true },
};

beforeAll(async () => {
  ({ app, api } = fixture);
  home = await mkdtemp(join(tmpdir(), 'sbcli-rules-'));
  env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: fixture.human.token };
  ep = await vend(api, { name: 'rules-bot', queues: ['reviews', 'inbox'] });
  const w = await api('POST', `/api/v1/endpoints/${ep.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
  expect(w.status).toBe(201);
  ({ webhook_id: webhookId, ingest_url: ingestUrl } = w.json);
  // Three deliveries before any rule: each a todo in the target queue.
  await deliver('push', { ref: 'refs/heads/main' });
  await deliver('issue_comment', { issue: { number: 7 }, comment: { body: 'please look' } });
  await deliver('check_run', { check_run: { name: 'ci' } });
});

describe('switchboard webhook rules', () => {
  it('get: no rules yet, the default is the target queue; --json is the API answer', async () => {
    const r = await run(['webhook', 'rules', 'get', ep.slug, webhookId]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toBe(
      `Webhook ${webhookId}, target queue inbox\nRules:   none (every delivery goes to the default action)\nParams:  none\nDefault: queue inbox (the webhook's target queue)\n`,
    );
    const json = await run(['webhook', 'rules', 'get', ep.slug, webhookId, '--json']);
    expect(JSON.parse(json.out)).toEqual({ webhook_id: webhookId, rules: [], params: {}, default_action: null, target_queue: 'inbox' });
  });

  it('set FILE saves, prints the rules in order and the dry run, one row per event and a summary', async () => {
    const r = await run(['webhook', 'rules', 'set', ep.slug, webhookId, await file('rules.json', rules)]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`Saved the routing rules of webhook ${webhookId}.\n`);
    expect(r.out).toMatch(/^#\s+NAME\s+ACTION\s+WHEN$/m);
    expect(r.out).toMatch(/^0\s+drop CI noise\s+drop\s+event in \["check_run", "status"\]$/m);
    expect(r.out).toMatch(/^1\s+comments\s+queue reviews, once\s+event == "issue_comment"$/m);
    expect(r.out).toContain('Params:  {"bot":"hubot"}\nDefault: drop\n');
    expect(r.out).toMatch(/^EVENT ID\s+EVENT\s+WOULD\s+QUEUE\/ENDPOINTS\s+DID$/m);
    expect(r.out).toMatch(new RegExp(`^\\d+\\s+check_run\\s+drop \\(rule 0\\)\\s+-\\s+routed → ${ep.slug}/inbox$`, 'm'));
    expect(r.out).toMatch(new RegExp(`^\\d+\\s+issue_comment\\s+queue \\(rule 1\\)\\s+reviews\\s+routed → ${ep.slug}/inbox$`, 'm'));
    expect(r.out).toMatch(/^\d+\s+push\s+drop \(default\)\s+-\s+routed/m);
    expect(r.out).toMatch(/\n3 events: 1 would make a todo, 2 dropped, 0 faulted; 3 differ from what happened\n$/);
    const saved = JSON.parse((await run(['webhook', 'rules', 'get', ep.slug, webhookId, '--json'])).out);
    expect(saved).toMatchObject({ rules: rules.rules, params: rules.params, default_action: rules.default_action });
  });

  it('set - reads stdin; --json answers the rules and dry_run; omitted fields are kept', async () => {
    const r = await run(['webhook', 'rules', 'set', ep.slug, webhookId, '-', '--json'], JSON.stringify({ params: { bot: 'octo' } }));
    expect(r.code, r.err).toBe(0);
    const json = JSON.parse(r.out);
    expect(json).toMatchObject({ webhook_id: webhookId, rules: rules.rules, params: { bot: 'octo' }, default_action: { drop: true } });
    expect(json.dry_run).toHaveLength(3);
    expect(json.dry_run[0]).toMatchObject({ event: 'check_run', would: { action: 'drop' }, did: { disposition: 'routed' } });
  });

  it('a bad expression names its field, exits 2 and saves nothing', async () => {
    const bad = { rules: [rules.rules[0], { name: 'broken', when: 'event ==', action: { drop: true } }] };
    const r = await run(['webhook', 'rules', 'set', ep.slug, webhookId, await file('bad.json', bad)]);
    expect(r).toMatchObject({ code: 2, out: '' });
    expect(r.err).toMatch(/^switchboard: rules\.1\.when: .*\(invalid_argument\)\n$/);
    const after = JSON.parse((await run(['webhook', 'rules', 'get', ep.slug, webhookId, '--json'])).out);
    expect(after.rules).toEqual(rules.rules);
  });

  it('a FILE that is not JSON, or not there, is a usage mistake (2) naming FILE; the server is not asked', async () => {
    const notJson = await file('notes.txt', 'rules: drop everything');
    const r = await run(['webhook', 'rules', 'set', ep.slug, webhookId, notJson]);
    expect(r).toMatchObject({ code: 2, out: '' });
    expect(r.err).toMatch(new RegExp(`^switchboard: FILE ${notJson}: is not valid JSON \\(.*\\) \\(invalid_argument\\)\\n$`));
    const stdin = await run(['webhook', 'rules', 'test', ep.slug, webhookId, '-'], '{"rules": [');
    expect(stdin.code).toBe(2);
    expect(stdin.err).toMatch(/^switchboard: FILE stdin: is not valid JSON/);
    const missing = await run(['webhook', 'rules', 'set', ep.slug, webhookId, join(home, 'nope.json')]);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/^switchboard: FILE .*nope\.json: cannot be read \(ENOENT\) \(invalid_argument\)\n$/);
  });

  it('test replays without saving, and counts faults', async () => {
    const trial = { rules: [{ name: 'issue numbers', when: 'payload.issue.number > 1', action: { queue: 'inbox' } }], default_action: null };
    const r = await run(['webhook', 'rules', 'test', ep.slug, webhookId, await file('trial.json', trial)]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`Tested the rules for webhook ${webhookId} (nothing saved).\n`);
    expect(r.out).toContain("Default: queue inbox (the webhook's target queue)\n");
    expect(r.out).toMatch(/^\d+\s+push\s+fault \(rule 0\)\s+-\s+routed/m);
    expect(r.out).toMatch(/^\d+\s+issue_comment\s+queue \(rule 0\)\s+inbox\s+routed/m);
    // The comment would go where it went: it does not differ.
    expect(r.out).toMatch(/\n3 events: 1 would make a todo, 0 dropped, 2 faulted; 2 differ from what happened\n$/);
    const still = JSON.parse((await run(['webhook', 'rules', 'get', ep.slug, webhookId, '--json'])).out);
    expect(still).toMatchObject({ rules: rules.rules, default_action: { drop: true } });
  });

  it('another endpoint\'s webhook is not found (1); each command has help naming FILE', async () => {
    const other = await vend(api, { name: 'other-bot', queues: ['inbox'] });
    const r = await run(['webhook', 'rules', 'get', other.slug, webhookId]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/\(not_found\)\n$/);
    const help = await run(['webhook', 'rules', 'set', '--help']);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/Usage: switchboard webhook rules set \[options\] <endpoint> <webhook_id> <file>/);
    expect(help.out).toContain('FILE is JSON (- reads stdin)');
    expect((await run(['webhook', 'rules', '--help'])).out).toMatch(/get[\s\S]*set[\s\S]*test/);
  });
});

describe('switchboard events list: what each delivery became, and why', () => {
  it('has a BECAME column with the disposition and the rule (or the default)', async () => {
    await run(['webhook', 'rules', 'set', ep.slug, webhookId, await file('events-rules.json', rules)]);
    await deliver('status', { state: 'success' });
    const r = await run(['events', 'list', ep.slug]);
    expect(r.code, r.err).toBe(0);
    expect(r.out.split('\n')[0]).toMatch(/\bBECAME$/);
    expect(r.out).toContain('dropped: routed by rule 0 (drop CI noise): drop');
    // Deliveries before any rule: routed by the default, the target queue.
    expect(r.out).toContain('routed: default: queue inbox');
    const json = JSON.parse((await run(['events', 'list', ep.slug, '--json'])).out) as { events: { event_type: string; disposition: string; routing: unknown }[] };
    expect(json.events.find((e) => e.event_type === 'status')).toMatchObject({ disposition: 'dropped', routing: { stage: 'rule', rule_name: 'drop CI noise' } });
  });
});

describe('switchboard todo show: why a todo exists', () => {
  const shown = async (id: string) => {
    const r = await run(['todo', 'show', ep.slug, id]);
    expect(r.code, r.err).toBe(0);
    return r.out;
  };
  const detail = async (id: string) => (await api('GET', `/api/v1/endpoints/${ep.slug}/todos/${id}`)).json;

  it('names the rule that routed it, in the text and as `routing` in the API and --json', async () => {
    const made = await deliver('issue_comment', { issue: { number: 9 }, comment: { body: 'again' } });
    const trace = { stage: 'rule', rule_index: 1, rule_name: 'comments', action: 'queue', queue: 'reviews', once: true };
    expect((await detail(made.id)).routing).toEqual(trace);
    expect(JSON.parse((await run(['todo', 'show', ep.slug, made.id, '--json'])).out).routing).toEqual(trace);
    expect(await shown(made.id)).toContain('\nrouting:       routed by rule 1 (comments): queue reviews, once\n');
  });

  it('says the default when no rule matched: the default action, or the target queue', async () => {
    const before = (await api('GET', `/api/v1/events?endpoint=${ep.slug}&limit=200`)).json.events as { event_type: string; todo_id: string }[];
    // The push delivered before any rule: the webhook's target queue, traced as the default.
    const first = before.find((e) => e.event_type === 'push')!;
    expect((await detail(first.todo_id)).routing).toEqual({ stage: 'default', rule_index: null, rule_name: null, action: 'queue', queue: 'inbox' });
    expect(await shown(first.todo_id)).toContain('\nrouting:       default: queue inbox\n');
    // Rules with no default action: what no rule matched goes to the target queue.
    expect((await api('PUT', `/api/v1/endpoints/${ep.slug}/webhooks/${webhookId}/rules`, { default_action: null })).status).toBe(200);
    const made = await deliver('push', { ref: 'refs/heads/later' });
    expect((await detail(made.id)).routing).toEqual({ stage: 'default', rule_index: null, rule_name: null, action: 'queue' });
    expect(await shown(made.id)).toContain('\nrouting:       default: target queue\n');
  });

  it("says nothing for an operator's push (routing null)", async () => {
    const pushed = await run(['todo', 'push', ep.slug, 'By hand', '--queue', 'inbox', '--json']);
    const id = JSON.parse(pushed.out).id as string;
    expect((await detail(id)).routing).toBeNull();
    expect(await shown(id)).not.toContain('routing:');
  });
});

import { describe, expect, it } from 'vitest';
import { apiCaller } from '../../test/support/app.ts';
import { alice, app, bob, db, push, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';
import { githubHeaders, githubPullRequestOpened, githubPullRequestReviewRequested } from '../domain/ingest/fixtures.testkit.ts';
import { escapeHtml } from './html.ts';

// Webhook routing rules on the board (issue 37): the rules page of a webhook (Save and Try, the
// API's errors under the field, naming the rule; the dry run as a table), CSRF, another human's
// webhook answering 404, a revoked endpoint read-only; and the trace shown on the deliveries
// list and on the todo page.

useBoardSuite();

const api = () => apiCaller(app.url, alice.token);

interface Minted {
  webhook_id: string;
  ingest_url: string;
  signing_secret: string;
}

async function githubWebhook(slug: string, queue = 'inbox'): Promise<Minted> {
  const r = await api()('POST', `/api/v1/endpoints/${slug}/webhooks`, { source_type: 'github', target_queue: queue });
  expect(r.status).toBe(201);
  return r.json as Minted;
}

/** A signed GitHub delivery; its JSON answer (event_id, id of the todo, routing...). */
async function deliver(w: Minted, event: string, payload: unknown): Promise<{ status: number; json: any }> {
  const body = JSON.stringify(payload);
  const res = await fetch(w.ingest_url, { method: 'POST', headers: githubHeaders(event, body, w.signing_secret), body });
  return { status: res.status, json: await res.json() };
}

const checkRun = { action: 'completed', check_run: { id: 1, name: 'test (1)', pull_requests: [{ number: 42 }] }, repository: githubPullRequestOpened.repository, sender: { login: 'github-actions[bot]' } };
const reviewFor = (login: string, number = 42) => ({
  ...githubPullRequestReviewRequested,
  number,
  pull_request: { ...githubPullRequestReviewRequested.pull_request, number, requested_reviewers: [{ login, id: 7, type: 'User' }] },
  requested_reviewer: { login, id: 7, type: 'User' },
});

const rules = {
  rules: [
    { name: 'drop CI noise', when: 'event in ["check_run", "check_suite", "status"]', action: { drop: true } },
    { name: 'reviews for the bot', when: 'event == "pull_request" && requested_reviewers.exists(r, r == params.bot)', action: { queue: 'reviews', once: true } },
  ],
  params: { bot: 'hubot' },
  default_action: null,
};
const text = (v: unknown) => JSON.stringify(v, null, 2);
const stored = async (id: string) => (await db.sql`select routing_rules, routing_params, routing_default from webhooks where id = ${id}`)[0]!;
const textareaOf = (page: string) => /<textarea id="rules-text"[^>]*>([\s\S]*?)<\/textarea>/.exec(page)?.[1];
const rulesUrl = (endpointId: string, w: Minted) => `/endpoints/${endpointId}/webhooks/${w.webhook_id}/rules`;

describe('the rules page of a webhook', () => {
  it('is linked from the webhook row and shows the stored rules as formatted JSON, with Save and Try', async () => {
    const e = await vend(alice, 'rules-page', ['reviews', 'inbox']);
    const w = await githubWebhook(e.slug);
    const b = await signedIn(alice);
    expect((await b.get(`/endpoints/${e.id}`)).text).toContain(`href="${rulesUrl(e.id, w)}"`);
    const page = await b.get(rulesUrl(e.id, w));
    expect(page.status).toBe(200);
    expect(textareaOf(page.text)).toBe(escapeHtml(text({ rules: [], params: {}, default_action: null })));
    expect(page.text).toContain(`<form class="rules-form" method="post" action="${rulesUrl(e.id, w)}">`);
    expect(page.text).toContain(`name="csrf_token" value="${b.csrfToken}"`);
    expect(page.text).toContain(`formaction="${rulesUrl(e.id, w)}/test"`);
    // No inline script or style on the page (the board's CSP allows neither).
    expect(page.text).not.toMatch(/<script(?![^>]*\ssrc=)|\sstyle=|<style/);
  });

  it('refuses a bad expression with the API’s error under the field, naming the rule, the text kept and nothing saved', async () => {
    const e = await vend(alice, 'rules-bad', ['reviews', 'inbox']);
    const w = await githubWebhook(e.slug);
    const b = await signedIn(alice);
    const bad = { ...rules, rules: [rules.rules[0], { ...rules.rules[1], when: 'event ==' }] };
    const viaApi = await api()('PUT', `/api/v1/endpoints/${e.slug}/webhooks/${w.webhook_id}/rules`, bad);
    expect(viaApi.json).toMatchObject({ field: 'rules.1.when', reason: 'invalid_expression' });
    for (const how of ['', '/test']) {
      const refused = await b.post(`${rulesUrl(e.id, w)}${how}`, { rules: text(bad), csrf_token: b.csrfToken });
      expect(refused.status).toBe(400);
      expect(refused.text).toContain(`<p class="error" id="rules-error" role="alert">${escapeHtml(viaApi.json.error)}</p>`);
      expect(viaApi.json.error).toMatch(/^rules\.1\.when: does not parse: /);
      expect(refused.text).toContain('<p class="hint" id="rules-error-rule">In rule 1 (reviews for the bot).</p>');
      expect(refused.text).toMatch(/<textarea id="rules-text"[^>]* aria-invalid="true"/);
      expect(textareaOf(refused.text)).toBe(escapeHtml(text(bad)));
      expect(refused.text).not.toContain('id="dry-run"');
    }
    // A queue out of the endpoint's scope names its field too.
    const outOfScope = { rules: [{ name: 'elsewhere', when: 'true', action: { queue: 'elsewhere' } }] };
    const scope = await b.post(rulesUrl(e.id, w), { rules: text(outOfScope), csrf_token: b.csrfToken });
    expect(scope.status).toBe(400);
    expect(scope.text).toMatch(/id="rules-error" role="alert">rules\.0\.action\.queue: &quot;elsewhere&quot; is not one of endpoint/);
    expect(scope.text).toContain('In rule 0 (elsewhere).');
    expect(await stored(w.webhook_id)).toEqual({ routing_rules: [], routing_params: {}, routing_default: null });
  });

  it('refuses text that is not JSON under the field, keeping it', async () => {
    const e = await vend(alice, 'rules-json', ['inbox']);
    const w = await githubWebhook(e.slug);
    const b = await signedIn(alice);
    const typed = '{"rules": [\n  {"name": "x", "when": "true", "action": {"drop": true}}\n'; // no closing brackets
    const refused = await b.post(rulesUrl(e.id, w), { rules: typed, csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/<p class="error" id="rules-error" role="alert">not JSON: [^<]+\(line \d+, column \d+\)<\/p>/);
    expect(textareaOf(refused.text)).toBe(escapeHtml(typed));
    const notObject = await b.post(rulesUrl(e.id, w), { rules: '[1, 2]', csrf_token: b.csrfToken });
    expect(notObject.status).toBe(400);
    expect(notObject.text).toMatch(/id="rules-error" role="alert">body: /);
    expect(await stored(w.webhook_id)).toEqual({ routing_rules: [], routing_params: {}, routing_default: null });
  });

  it('Try replays the rules over the stored deliveries and saves nothing; Save stores them, and the page shows what is stored', async () => {
    const e = await vend(alice, 'rules-save', ['reviews', 'inbox']);
    const w = await githubWebhook(e.slug);
    // Before any rule: a check run becomes a todo in the webhook's target queue.
    const before = await deliver(w, 'check_run', checkRun);
    expect(before.status).toBe(202);
    const b = await signedIn(alice);

    const tried = await b.post(`${rulesUrl(e.id, w)}/test`, { rules: text(rules), csrf_token: b.csrfToken });
    expect(tried.status).toBe(200);
    expect(await stored(w.webhook_id)).toEqual({ routing_rules: [], routing_params: {}, routing_default: null });
    expect(tried.text).toMatch(/id="dry-run-summary" role="status">Nothing saved\. The latest delivery replayed: 0 would make todos, 1 would be dropped, 0 would fault; 1 differs from what it became\./);
    const row = new RegExp(`<tr class="dry-run-row differs" id="dry-run-${before.json.event_id}">(.*?)</tr>`).exec(tried.text)?.[1];
    expect(row).toBeDefined();
    expect(row).toContain('<td>check_run</td>');
    expect(row).toContain('<span class="would-action">drop</span> <span class="muted">by</span> <span class="rule-name">rule 0 (drop CI noise)</span>');
    expect(row).toContain('<span class="badge disposition disposition-routed">routed</span> <span class="did-todos">a todo in inbox of');
    // Try keeps the text as typed.
    expect(textareaOf(tried.text)).toBe(escapeHtml(text(rules)));

    const saved = await b.post(rulesUrl(e.id, w), { rules: text(rules), csrf_token: b.csrfToken });
    expect(saved.status).toBe(200);
    expect(saved.text).toMatch(/id="dry-run-summary" role="status">Saved\. The latest delivery replayed/);
    expect(saved.text).toContain(`id="dry-run-${before.json.event_id}"`);
    expect(await stored(w.webhook_id)).toEqual({ routing_rules: rules.rules, routing_params: rules.params, routing_default: null });
    expect(textareaOf((await b.get(rulesUrl(e.id, w))).text)).toBe(escapeHtml(text(rules)));
    // The same rules as the API reads them.
    expect((await api()('GET', `/api/v1/endpoints/${e.slug}/webhooks/${w.webhook_id}/rules`)).json).toMatchObject(rules);
  });

  it('refuses a form without the CSRF token (403), another human’s webhook (404), and a revoked endpoint’s save (409, read-only page)', async () => {
    const e = await vend(alice, 'rules-guard', ['reviews', 'inbox']);
    const w = await githubWebhook(e.slug);
    const b = await signedIn(alice);
    const form = { rules: text(rules) };
    expect((await b.post(rulesUrl(e.id, w), form)).status).toBe(403);
    expect((await b.post(`${rulesUrl(e.id, w)}/test`, { ...form, csrf_token: 'f'.repeat(64) })).status).toBe(403);

    const mallory = await signedIn(bob);
    const own = await vend(bob, 'bobs-rules', ['reviews', 'inbox']);
    for (const via of [e.id, own.id]) {
      expect((await mallory.get(rulesUrl(via, w))).status).toBe(404);
      expect((await mallory.post(rulesUrl(via, w), { ...form, csrf_token: mallory.csrfToken })).status).toBe(404);
      expect((await mallory.post(`${rulesUrl(via, w)}/test`, { ...form, csrf_token: mallory.csrfToken })).status).toBe(404);
    }
    expect((await mallory.get(`/endpoints/${own.id}/webhooks/not-a-uuid/rules`)).status).toBe(404);
    expect(await stored(w.webhook_id)).toEqual({ routing_rules: [], routing_params: {}, routing_default: null });

    expect((await b.post(`/endpoints/${e.id}/revoke`, { csrf_token: b.csrfToken })).status).toBe(303);
    const readOnly = await b.get(rulesUrl(e.id, w));
    expect(readOnly.status).toBe(200);
    expect(readOnly.text).toContain('its rules are read-only');
    expect(readOnly.text).not.toContain('class="rules-form"');
    expect(readOnly.text).toContain('<pre class="json" id="rules-text">');
    expect((await b.post(rulesUrl(e.id, w), { ...form, csrf_token: b.csrfToken })).status).toBe(409);
    expect((await b.post(`${rulesUrl(e.id, w)}/test`, { ...form, csrf_token: b.csrfToken })).status).toBe(409);
    expect(await stored(w.webhook_id)).toEqual({ routing_rules: [], routing_params: {}, routing_default: null });
  });
});

describe('the routing trace on the board', () => {
  it('the deliveries list shows what each delivery became and the rule; the todo page says why the todo exists', async () => {
    const e = await vend(alice, 'traced', ['reviews', 'inbox']);
    const w = await githubWebhook(e.slug);
    const plain = await deliver(w, 'pull_request', reviewFor('someone'));
    expect(plain.status).toBe(202);
    const b = await signedIn(alice);
    // Without rules: the webhook's target queue, traced as the default.
    expect((await b.get(`/todos/${plain.json.id}`)).text).toContain('<dt>Why</dt><dd><span id="todo-why">default: queue inbox</span></dd>');

    expect((await b.post(rulesUrl(e.id, w), { rules: text({ ...rules, default_action: { drop: true } }), csrf_token: b.csrfToken })).status).toBe(200);
    const dropped = await deliver(w, 'check_run', checkRun);
    expect(dropped.json).toMatchObject({ dropped: true });
    const review = await deliver(w, 'pull_request', reviewFor('hubot', 43));
    expect(review.json).toMatchObject({ created: 1, queue: 'reviews' });
    const repeat = await deliver(w, 'pull_request', { ...reviewFor('hubot', 43), action: 'synchronize' });
    expect(repeat.json).toMatchObject({ repeat: true });
    const byDefault = await deliver(w, 'pull_request', reviewFor('someone-else', 44));
    expect(byDefault.json).toMatchObject({ dropped: true });
    // A rule that errors on this payload: the delivery faults (503), recorded with its cause and message.
    expect((await api()('PUT', `/api/v1/endpoints/${e.slug}/webhooks/${w.webhook_id}/rules`, { rules: [{ name: 'issue numbers', when: 'payload.issue.number > 1', action: { queue: 'inbox' } }] })).status).toBe(200);
    const faulted = await deliver(w, 'check_run', checkRun);
    expect(faulted.status).toBe(503);

    const card = (await b.get(`/endpoints/${e.id}`)).text;
    const cell = (eventId: string) => new RegExp(`<tr class="delivery-row" id="event-${eventId}">.*?<td class="became">(.*?)</td>`).exec(card)?.[1];
    expect(cell(dropped.json.event_id)).toBe('<span class="badge disposition disposition-dropped">dropped</span> <span class="muted">by</span> <span class="rule-name">rule 0 (drop CI noise)</span>');
    expect(cell(review.json.event_id)).toBe('<span class="badge disposition disposition-routed">routed</span> <span class="muted">by</span> <span class="rule-name">rule 1 (reviews for the bot)</span>');
    expect(cell(repeat.json.event_id)).toBe('<span class="badge disposition disposition-repeat">repeat</span> <span class="muted">by</span> <span class="rule-name">rule 1 (reviews for the bot)</span>');
    expect(cell(byDefault.json.event_id)).toBe('<span class="badge disposition disposition-dropped">dropped</span> <span class="muted">by</span> <span class="rule-name">default</span>');
    const [faultRow] = await db.sql`select id::text as id from events where endpoint_id = ${e.id} and disposition = 'faulted'`;
    expect(cell(faultRow!.id)).toMatch(/^<span class="badge disposition disposition-faulted">faulted<\/span> <span class="muted">by<\/span> <span class="rule-name">rule 0 \(issue numbers\)<\/span> <span class="fault-detail">error: .+<\/span>$/);

    const todo = (await b.get(`/todos/${review.json.id}`)).text;
    expect(todo).toContain('<dt>Why</dt><dd><span id="todo-why">rule 1 (reviews for the bot): queue reviews, once</span></dd>');
    // An operator's push has no trace: no "Why".
    const pushed = await push(alice, e.slug, 'By hand', { queue: 'inbox' });
    expect((await b.get(`/todos/${pushed}`)).text).not.toContain('<dt>Why</dt>');
  });
});

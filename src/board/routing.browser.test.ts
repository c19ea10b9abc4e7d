import type { Page } from 'playwright-core';
import { launchBoardBrowser, type BoardBrowser } from '../../test/support/chromium.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { vend } from '../../test/support/fixtures.ts';
import type { App } from '../app.ts';
import { githubHeaders, githubPullRequestOpened, githubPullRequestReviewRequested } from '../domain/ingest/fixtures.testkit.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLoginLink } from '../store/web-sessions.ts';

/**
 * Webhook routing rules as a person edits them, in Debian's Chromium (issue 37): open a webhook's
 * rules page from the endpoint, type a rule with an error and see it under the field, fix it, Try
 * it against a stored delivery (the dry-run table), Save, and see the next delivery dropped by
 * that rule in the deliveries list and a routed todo say why it exists. Screenshots go to
 * test-results/board/routing-*.png.
 */


let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: App & { clock: ManualClock };
let browser: BoardBrowser;
let page: Page;
let human: { id: string; handle: string; token: string };

const shot = (name: string) => browser.shot(`routing-${name}`);

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock(new Date()));
  human = await humanWithToken(db.sql);
  browser = await launchBoardBrowser();
  page = browser.page;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.stop();
  await db?.drop();
});

interface Minted {
  webhook_id: string;
  ingest_url: string;
  signing_secret: string;
}

/** A signed GitHub delivery, as GitHub sends it; its JSON answer. */
async function deliver(w: Minted, event: string, payload: unknown): Promise<{ status: number; json: any }> {
  const body = JSON.stringify(payload);
  const res = await fetch(w.ingest_url, { method: 'POST', headers: githubHeaders(event, body, w.signing_secret), body });
  return { status: res.status, json: await res.json() };
}

const checkRun = { action: 'completed', check_run: { id: 1, name: 'test (1)', pull_requests: [{ number: 42 }] }, repository: githubPullRequestOpened.repository, sender: { login: 'github-actions[bot]' } };
const reviewForHubot = {
  ...githubPullRequestReviewRequested,
  pull_request: { ...githubPullRequestReviewRequested.pull_request, requested_reviewers: [{ login: 'hubot', id: 7, type: 'User' }] },
  requested_reviewer: { login: 'hubot', id: 7, type: 'User' },
};

const rulesWith = (secondWhen: string) =>
  JSON.stringify(
    {
      rules: [
        { name: 'drop CI noise', when: 'event in ["check_run", "check_suite", "status"]', action: { drop: true } },
        { name: 'reviews for the bot', when: secondWhen, action: { queue: 'reviews', once: true } },
      ],
      params: { bot: 'hubot' },
      default_action: null,
    },
    null,
    2,
  );
const GOOD_WHEN = 'event == "pull_request" && requested_reviewers.exists(r, r == params.bot)';

describe('routing rules in Chromium', { timeout: 60_000 }, () => {
  let endpointId = '';
  let w: Minted;
  let storedEventId = '';

  it('signs in, and a signed delivery is stored before any rule (a todo in the target queue)', async () => {
    const api = apiCaller(app.url, human.token);
    const e = await vend(api, { name: 'forge-bot', queues: ['reviews', 'inbox'] });
    endpointId = e.id;
    const created = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'inbox' });
    expect(created.status).toBe(201);
    w = created.json as Minted;
    const stored = await deliver(w, 'check_run', checkRun);
    expect(stored.status).toBe(202);
    expect(stored.json).toMatchObject({ created: 1, queue: 'inbox' });
    storedEventId = stored.json.event_id as string;

    const { token } = await createLoginLink(db.sql, human.handle, app.clock.now());
    await page.goto(`${app.url}/login/${token}`);
    await page.click('#confirm-login');
    await page.waitForURL(`${app.url}/`);
  });

  it('opens the webhook’s rules page from the endpoint page', async () => {
    await page.goto(`${app.url}/endpoints/${endpointId}`);
    await page.click(`#webhook-${w.webhook_id} a.rules-link`);
    await page.waitForURL(`${app.url}/endpoints/${endpointId}/webhooks/${w.webhook_id}/rules`);
    expect(JSON.parse(await page.inputValue('#rules-text'))).toEqual({ rules: [], params: {}, default_action: null });
    await shot('01-rules-page');
  });

  it('shows a rule with an error under the field, naming the rule, and keeps what was typed', async () => {
    const typed = rulesWith('event == "pull_request" &&');
    await page.fill('#rules-text', typed);
    await page.click('#rules-save');
    const error = await page.waitForSelector('#rules-error');
    expect(await error.textContent()).toMatch(/^rules\.1\.when: does not parse: /);
    expect(await page.textContent('#rules-error-rule')).toBe('In rule 1 (reviews for the bot).');
    expect(await page.getAttribute('#rules-text', 'aria-invalid')).toBe('true');
    expect(await page.inputValue('#rules-text')).toBe(typed);
    expect((await db.sql`select routing_rules from webhooks where id = ${w.webhook_id}`)[0]!.routing_rules).toEqual([]);
    await shot('02-rule-error');
  });

  it('fixes it and presses Try: the dry run shows the stored delivery would now be dropped, and nothing is saved', async () => {
    await page.fill('#rules-text', rulesWith(GOOD_WHEN));
    await page.click('#rules-try');
    const row = page.locator(`#dry-run-${storedEventId}`);
    await row.waitFor();
    expect(await page.textContent('#dry-run-summary')).toMatch(/^Nothing saved\. The latest delivery replayed: 0 would make todos, 1 would be dropped, 0 would fault; 1 differs/);
    expect(await row.getAttribute('class')).toContain('differs');
    expect(await row.locator('td').nth(1).textContent()).toBe('check_run');
    expect(await row.locator('td').nth(3).textContent()).toBe('drop by rule 0 (drop CI noise)');
    expect(await row.locator('td').nth(4).textContent()).toMatch(/^routed a todo in inbox of forge-bot-[0-9a-f]+ by default$/);
    expect(await page.$('#rules-error')).toBeNull();
    expect((await db.sql`select routing_rules from webhooks where id = ${w.webhook_id}`)[0]!.routing_rules).toEqual([]);
    await shot('03-try-dry-run');
  });

  it('presses Save: the rules are stored and the dry run says so', async () => {
    await page.click('#rules-save');
    await expect.poll(() => page.textContent('#dry-run-summary')).toMatch(/^Saved\. /);
    const [row] = await db.sql`select routing_rules, routing_params from webhooks where id = ${w.webhook_id}`;
    expect(row!.routing_rules).toHaveLength(2);
    expect(row!.routing_params).toEqual({ bot: 'hubot' });
    expect(JSON.parse(await page.inputValue('#rules-text'))).toEqual(JSON.parse(rulesWith(GOOD_WHEN)));
    await shot('04-saved');
  });

  it('the deliveries list shows the next check run dropped by its rule, and a routed todo says why it exists', async () => {
    // Another check run (the same body again would be a replay of the first delivery).
    const dropped = await deliver(w, 'check_run', { ...checkRun, check_run: { ...checkRun.check_run, id: 2 } });
    expect(dropped.json).toMatchObject({ dropped: true });
    expect(dropped.json.event_id).not.toBe(storedEventId);
    const review = await deliver(w, 'pull_request', reviewForHubot);
    expect(review.json).toMatchObject({ created: 1, queue: 'reviews' });
    await page.goto(`${app.url}/endpoints/${endpointId}`);
    const became = page.locator(`#event-${dropped.json.event_id} td.became`);
    expect(await became.locator('.badge').textContent()).toBe('dropped');
    expect(await became.locator('.rule-name').textContent()).toBe('rule 0 (drop CI noise)');
    expect(await page.textContent(`#event-${review.json.event_id} td.became`)).toBe('routed by rule 1 (reviews for the bot)');
    expect(await page.textContent(`#event-${storedEventId} td.became`)).toBe('routed by default');
    await page.locator('#webhooks').scrollIntoViewIfNeeded();
    await shot('05-deliveries-dropped');
    await page.click(`#event-${review.json.event_id} a[href^="/todos/"]`);
    await page.waitForURL(/\/todos\/td_/);
    expect(await page.textContent('#todo-why')).toBe('rule 1 (reviews for the bot): queue reviews, once');
    await shot('06-todo-why');
    expect(browser.cspViolations).toEqual([]);
  });
});

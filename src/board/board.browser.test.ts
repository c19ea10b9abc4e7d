import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Page } from 'playwright-core';
import { launchBoardBrowser, type BoardBrowser } from '../../test/support/chromium.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAgent, until, type Agent } from '../../test/support/agents.ts';
import { startOidcProvider, type TestOidcProvider } from '../../test/support/oidc-provider.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { App } from '../app.ts';
import { main } from '../cli/main.ts';
import { ManualClock } from '../lib/clock.ts';

/**
 * The board as a person uses it, in a real browser: Debian's Chromium, headless, driven by
 * playwright-core. Sign in by link, vend and read the credential once, clock out and see the held
 * todo, a refused and an accepted shift, a self-test that an SDK client answers, push a todo,
 * cancel it, retry a dead letter, create a webhook and read its secret once, revoke. Every page
 * is saved as a screenshot under test-results/board/.
 */


let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: App & { clock: ManualClock };
let idp: TestOidcProvider;
let browser: BoardBrowser;
let page: Page;
let human: { id: string; handle: string; token: string };
const clients: Client[] = [];

const shot = (name: string) => browser.shot(`${name}`);

beforeAll(async () => {
  db = await migratedDatabase();
  // The CLI mints the sign-in link with the system clock: start the app's clock at the real now.
  idp = await startOidcProvider({ user: { sub: 'browser-subject', name: 'Ada Lovelace', email: 'ada@example.test', email_verified: true, preferred_username: 'ada' } });
  app = await startTestApp(db.url, new ManualClock(new Date()), {
    selfTestRingDelayMs: 200,
    env: { SWITCHBOARD_OIDC_ISSUER: idp.issuer, SWITCHBOARD_OIDC_CLIENT_ID: idp.clientId, SWITCHBOARD_OIDC_CLIENT_SECRET: idp.clientSecret },
  });
  human = await humanWithToken(db.sql);
  browser = await launchBoardBrowser();
  page = browser.page;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app?.stop();
  await idp?.close();
  await db?.drop();
});

describe('the board in Chromium', { timeout: 60_000 }, () => {
  let endpointId = '';
  let slug = '';
  let credential = '';
  let agent: Agent;

  it('signs in with a link from switchboard admin login-link', async () => {
    let out = '';
    const code = await main(['node', 'switchboard', 'admin', 'login-link', human.handle], {
      io: { out: (t) => void (out += t), err: () => {} },
      env: { SWITCHBOARD_DATABASE_URL: db.url, SWITCHBOARD_BASE_URL: app.url },
      readStdin: async () => '',
      stdinIsTty: false,
    });
    expect(code).toBe(0);
    await page.goto(out.trim());
    await expect.poll(() => page.textContent('h1')).toBe('Sign in to Switchboard');
    await shot('01-login-confirm');
    await page.click('#confirm-login');
    await page.waitForURL(`${app.url}/`);
    expect(await page.textContent('.signout')).toContain(human.handle);
    expect(await page.textContent('main')).toContain('No endpoints yet');
    await shot('02-endpoints-empty');
  });

  it('vends an endpoint and shows its credential once', async () => {
    await page.fill('#vend input[name="name"]', 'review-bot');
    await page.fill('#vend input[name="queues"]', 'reviews');
    await page.click('#vend button[type="submit"]');
    await page.waitForSelector('#credential');
    credential = (await page.textContent('#credential'))!;
    expect(credential).toMatch(/^sbk_[A-Za-z0-9_-]{43}$/);
    expect(await page.textContent('#export-token')).toBe(`export SWITCHBOARD_AGENT_TOKEN=${credential}`);
    expect(await page.textContent('#mcp-json')).toContain('"Authorization": "Bearer ${SWITCHBOARD_AGENT_TOKEN}"');
    expect(await page.textContent('#claude-mcp-add')).toContain('claude mcp add switchboard --transport http');
    await shot('03-vended-credential-once');
    await page.click('text=Done: go to the endpoint');
    await page.waitForURL(/\/endpoints\/[0-9a-f-]{36}$/);
    endpointId = /\/endpoints\/([0-9a-f-]{36})$/.exec(page.url())![1]!;
    slug = (await db.sql`select slug from endpoints where id = ${endpointId}`)[0]!.slug as string;
    const html = await page.content();
    expect(html).not.toContain(credential);
    expect(html).toContain(`${credential.slice(0, 12)}…`);
    await shot('04-endpoint-card');
    await page.click('nav >> text=Endpoints');
    await page.waitForURL(`${app.url}/`);
    expect(await page.textContent(`#endpoint-${endpointId} .card-head`)).toContain('review-bot');
    await shot('04b-endpoints-list');
    await page.goto(`${app.url}/endpoints/${endpointId}`);
  });

  it('clocks the endpoint out: the card says out, never "off shift" without a shift, and the todo is held', async () => {
    const pushed = await apiCaller(app.url, human.token)('POST', `/api/v1/endpoints/${slug}/todos`, {
      title: 'Review PR 12',
      payload: { pr: 12, repo: 'acme/widgets' },
    });
    expect(pushed.status).toBe(201);
    // htmx swaps the answer in place: the page is not reloaded (the marker survives).
    await page.evaluate(() => ((globalThis as unknown as { sbMarker: number }).sbMarker = 1));
    await page.click('.presence-form button[value="out"]');
    await expect.poll(() => page.textContent('.presence-badge')).toBe('out');
    expect(await page.evaluate(() => (globalThis as unknown as { sbMarker?: number }).sbMarker)).toBe(1);
    expect(page.url()).toBe(`${app.url}/endpoints/${endpointId}`);
    expect(await page.textContent('.presence-detail')).toBe('operator · clocked out by a human · until clocked in');
    expect(await page.textContent('.card-head .state')).toBe('active');
    expect(await page.textContent('.pending-count')).toBe('1 pending');
    await shot('05-card-off-shift');
    await page.click('nav >> text=Todos');
    await page.waitForURL(`${app.url}/todos`);
    expect(await page.textContent('.todo-row .held')).toBe('held until clocked in');
    await shot('06-todos-held');
    await page.click('text=Review PR 12');
    await page.waitForURL(/\/todos\/td_/);
    expect(await page.textContent('#payload')).toContain('"repo": "acme/widgets"');
    await shot('07-todo');
  });

  it('shows a refused shift inline, naming the field, and stores a valid one', async () => {
    await page.goto(`${app.url}/endpoints/${endpointId}`);
    await page.fill(`#shift-${endpointId}`, 'Mon-Fri 25:00-17:00');
    await page.click('.shift-form button[value="save"]');
    const error = await page.waitForSelector('.shift-form .error');
    expect(await error.textContent()).toMatch(/^shift: /);
    expect(await page.getAttribute(`#shift-${endpointId}`, 'aria-invalid')).toBe('true');
    await shot('08-shift-error');
    await page.fill(`#shift-${endpointId}`, 'TZ=Europe/Berlin Mon-Fri 09:00-17:00');
    await page.click('.shift-form button[value="save"]');
    await page.locator('.shift-value').waitFor();
    // The stored canonical form, one window per day.
    expect(await page.textContent('.shift-value')).toMatch(/^TZ=Europe\/Berlin Mon 09:00-17:00; .*Fri 09:00-17:00$/);
    await shot('09-shift-saved');
  });

  it('runs the self-test against a connected SDK client and shows pass', async () => {
    await page.click('.presence-form button[value="in"]');
    await expect.poll(() => page.textContent('.presence-badge')).toBe('in');
    // A human's clock-in decides, not the shift.
    expect(await page.textContent('.presence-reason')).toBe('clocked in by a human');
    agent = await connectAgent(app, { slug, token: credential }, { track: clients });
    // The agent answers a self-test doorbell the way a woken Claude Code session would: it claims the todo.
    const heard = agent.client.fallbackNotificationHandler!;
    agent.client.fallbackNotificationHandler = async (n) => {
      await heard(n);
      const meta = (n.params as { meta?: Record<string, string> } | undefined)?.meta;
      if (meta?.kind === 'self_test') void agent.call('claim', { id: meta.todo_id });
    };
    await page.reload();
    expect(await page.textContent('.sessions')).toContain('1 attached');
    await page.click('#report button.selftest');
    // Without JavaScript the redirect lands on #report; htmx keeps the path (a fragment never reaches it).
    await page.waitForURL(new RegExp(`/endpoints/${endpointId}(#report)?$`));
    // The report updates in place when the live update arrives (no reload).
    await page.locator('#report .verdict-value', { hasText: /^pass$/ }).waitFor({ timeout: 15_000 });
    expect(await page.textContent('#report')).toMatch(/Claimed\s*within [\d.]+ s/);
    await shot('10-self-test-pass');
  });

  it('pushes a todo from the endpoint page and lands on it', async () => {
    await page.goto(`${app.url}/endpoints/${endpointId}`);
    // A refused push keeps what was typed and names the field.
    await page.fill('.push-form input[name="title"]', 'Board push');
    await page.fill('.push-form textarea[name="payload"]', '{"from": "board"');
    await page.click('.push-form button[type="submit"]');
    expect(await (await page.waitForSelector('#push-payload-error')).textContent()).toMatch(/^payload: must be JSON/);
    expect(await page.inputValue('.push-form input[name="title"]')).toBe('Board push');
    await page.fill('.push-form textarea[name="payload"]', '{"from": "board"}');
    await page.fill('.push-form input[name="priority"]', '5');
    await page.click('.push-form button[type="submit"]');
    await page.waitForURL(/\/todos\/td_[0-9a-f-]+$/);
    expect(await page.textContent('.todo-title')).toBe('Board push');
    expect(await page.textContent('#payload')).toContain('"from": "board"');
    expect((await db.sql`select priority from todos where endpoint_id = ${endpointId} and title = 'Board push'`)[0]).toEqual({ priority: 5 });
    await shot('10b-pushed-from-board');
  });

  it('cancels that todo from its page', async () => {
    await page.click('.todo-actions button.cancel');
    await expect.poll(() => page.textContent('#todo .badge')).toBe('canceled');
    expect(await page.$('.todo-actions button.cancel')).toBeNull();
    await shot('10c-canceled');
  });

  it('retries a dead letter', async () => {
    const pushed = await apiCaller(app.url, human.token)('POST', `/api/v1/endpoints/${slug}/todos`, { title: 'Fails once', max_attempts: 1 });
    expect(pushed.status).toBe(201);
    const id = pushed.json.id as string;
    await agent.call('claim', { id });
    await agent.call('fail', { id, result: { error: 'boom' } });
    await page.goto(`${app.url}/todos/${id}`);
    expect(await page.textContent('.badge.dead')).toBe('dead letter');
    await shot('10d-dead-letter');
    await page.click('.todo-actions button.retry');
    await expect.poll(() => page.textContent('#todo .badge')).toBe('pending');
    expect((await db.sql`select state, attempt from todos where id = ${id}`)[0]).toEqual({ state: 'pending', attempt: 0 });
    await shot('10e-retried');
  });

  it('creates a webhook and shows its secret once', async () => {
    await page.goto(`${app.url}/endpoints/${endpointId}`);
    await page.selectOption('.webhook-form select[name="source_type"]', 'github');
    await page.click('.webhook-form button[type="submit"]');
    const secret = (await (await page.waitForSelector('#signing-secret')).textContent())!;
    expect(secret).toMatch(/^whsec_/);
    expect(await page.textContent('#ingest-url')).toMatch(new RegExp(`^${app.url}/webhooks/w/`));
    await shot('10f-webhook-secret-once');
    await page.click('text=Done: back to the endpoint');
    await page.waitForSelector('.webhook-row');
    expect(await page.content()).not.toContain(secret);
    await shot('10g-webhook-listed');
  });

  it('revokes the endpoint through a confirm page', async () => {
    await page.click('a.danger >> text=Revoke');
    await page.waitForURL(`${app.url}/endpoints/${endpointId}/revoke`);
    await shot('11-revoke-confirm');
    await page.click('#confirm-revoke');
    await page.waitForURL(`${app.url}/endpoints/${endpointId}`);
    await expect.poll(() => page.textContent('.card-head .state')).toBe('revoked');
    expect(await page.textContent('.card')).toContain('Endpoint revoked');
    await until(() => app.services.sessions.sessionsOf(endpointId).length === 0, 'the revoked endpoint’s sessions to close');
    await shot('12-revoked');
    // On the endpoints page it is one line of the revoked list, not a card.
    await page.click('nav >> text=Endpoints');
    await page.waitForSelector(`#revoked-${endpointId}`);
    expect(await page.$(`#endpoint-${endpointId}`)).toBeNull();
    expect(await page.textContent(`#revoked-${endpointId}`)).toContain(slug);
    await shot('12b-revoked-list');
  });

  it('signs out, and the pages loaded without a single Content-Security-Policy violation', async () => {
    await page.click('.signout button');
    await page.waitForURL(`${app.url}/login`);
    await shot('13-signed-out');
    await page.goto(`${app.url}/todos`);
    await page.waitForURL(`${app.url}/login`);
    expect(browser.cspViolations).toEqual([]);
  });

  it('signs in through the OpenID Connect provider as a new human', async () => {
    await page.goto(`${app.url}/login`);
    await shot('14-login-with-provider');
    await page.click('#oidc-login');
    // The provider approves at once and sends the browser back to /auth/callback, then to /.
    await page.waitForURL(`${app.url}/`);
    expect(await page.textContent('.signout')).toContain('ada');
    expect(await page.textContent('main')).toContain('No endpoints yet');
    expect(idp.lastAuthorize?.get('code_challenge_method')).toBe('S256');
    await shot('15-signed-in-by-provider');
    expect(browser.cspViolations).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { connectAgent, settle, until } from '../../test/support/agents.ts';
import { apiCaller, humanWithToken, startTestApp } from '../../test/support/app.ts';
import { manyEndpoints } from '../../test/support/board-events.ts';
import { card, type CardData } from './pages.ts';
import { boardSession } from './auth.ts';
import {
  alice,
  app,
  bob,
  browser,
  clients,
  db,
  presenceRow,
  push,
  signedIn,
  useBoardSuite,
  vend,
} from '../../test/support/board.ts';

// The board over real HTTP: the endpoint card (presence and shift controls, vend and revoke),
// todos, and the live-update stream.

useBoardSuite();

describe('the endpoint card', () => {
  it('clock out shows out (operator) and held todos; a bad until or shift is shown inline; a valid shift is stored canonically', async () => {
    const e = await vend(alice, 'presence-bot');
    await push(alice, e.slug, 'waits for the agent');
    const b = await signedIn(alice);
    const out = await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: '', csrf_token: b.csrfToken });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe(`/endpoints/${e.id}`);
    const cardPage = await b.get(`/endpoints/${e.id}`);
    expect(cardPage.text).toContain('<span class="badge presence-badge">out</span>');
    // No shift is set, so the card never says "off shift".
    expect(cardPage.text).not.toContain('off shift');
    expect(cardPage.text).toMatch(/<span class="presence-source">operator<\/span> · <span class="presence-reason">clocked out by a human<\/span> · until clocked in/);
    const todos = await b.get('/todos');
    expect(todos.text).toContain('held until clocked in');

    // With an end: "held until <time>".
    expect((await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: '90m', csrf_token: b.csrfToken, return: 'list' })).headers.get('location')).toBe(
      `/#endpoint-${e.id}`,
    );
    // Shown to the minute and rounded up: the card never says the hold ends before it does.
    const until = new Date(Math.ceil((app.clock.now().getTime() + 90 * 60_000) / 60_000) * 60_000).toISOString().slice(0, 16).replace('T', ' ');
    expect((await b.get('/todos')).text).toContain(`held until <time datetime="`);
    expect((await b.get('/todos')).text).toContain(`${until} UTC</time>`);

    const badUntil = await b.post(`/endpoints/${e.id}/presence`, { presence: 'out', until: 'tomorrow', csrf_token: b.csrfToken });
    expect(badUntil.status).toBe(400);
    expect(badUntil.text).toMatch(/<p class="error" id="until-error-[^"]+" role="alert">until: must be a duration/);

    const bad = await b.post(`/endpoints/${e.id}/shift`, { shift: 'Mon-Fri 25:00-17:00', action: 'save', csrf_token: b.csrfToken });
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/<p class="error" id="shift-error-[^"]+" role="alert">shift: /);
    expect(bad.text).toContain('value="Mon-Fri 25:00-17:00"');
    expect(bad.text).toContain('aria-invalid="true"');
    expect((await presenceRow(e.id)).shift).toBeNull();

    const good = await b.post(`/endpoints/${e.id}/shift`, { shift: 'TZ=Europe/Berlin mon-fri 09:00-17:00', action: 'save', csrf_token: b.csrfToken });
    expect(good.status).toBe(303);
    const stored = (await presenceRow(e.id)).shift;
    expect(stored).toMatch(/^TZ=Europe\/Berlin /);
    expect((await b.get(`/endpoints/${e.id}`)).text).toContain(`<code class="shift-value">${stored}</code>`);
    expect((await b.post(`/endpoints/${e.id}/shift`, { shift: stored, action: 'clear', csrf_token: b.csrfToken })).status).toBe(303);
    expect((await presenceRow(e.id)).shift).toBeNull();
    expect((await b.post(`/endpoints/${e.id}/presence/clear`, { csrf_token: b.csrfToken })).status).toBe(303);
    expect((await presenceRow(e.id)).presence_override).toBeNull();
  });

  it('a blank shift saved from the board is refused naming shift and keeps the stored one; the clear button clears', async () => {
    const e = await vend(alice, 'blank-shift');
    const b = await signedIn(alice);
    expect((await b.post(`/endpoints/${e.id}/shift`, { shift: 'Mon-Fri 09:00-17:00', action: 'save', csrf_token: b.csrfToken })).status).toBe(303);
    const stored = (await presenceRow(e.id)).shift;
    expect(stored).toMatch(/^TZ=UTC Mon 09:00-17:00/);
    for (const blank of ['', '   ', '\t']) {
      const refused = await b.post(`/endpoints/${e.id}/shift`, { shift: blank, action: 'save', csrf_token: b.csrfToken });
      expect(refused.status).toBe(400);
      expect(refused.text).toMatch(/<p class="error" id="shift-error-[^"]+" role="alert">shift: must not be blank/);
      expect((await presenceRow(e.id)).shift).toBe(stored);
    }
    expect((await b.post(`/endpoints/${e.id}/shift`, { shift: '', action: 'clear', csrf_token: b.csrfToken })).status).toBe(303);
    expect((await presenceRow(e.id)).shift).toBeNull();
  });

  it('shows sessions and the unheard label, but neither warning while the endpoint is out', async () => {
    const e = await vend(alice, 'listener');
    const agent = await connectAgent(app, e, { track: clients });
    const b = await signedIn(alice);
    let page = (await b.get(`/endpoints/${e.id}`)).text;
    expect(page).toContain('1 attached');
    expect(page).toContain('claude-code 2.1.0');
    expect(page).not.toContain('rings reach it but nothing acts on them');
    // Three doorbells reach the session and nothing acts on them within the window.
    for (const title of ['one', 'two', 'three']) await push(alice, e.slug, title);
    await until(() => agent.heard.length === 3, 'three doorbells');
    await until(async () => (await db.sql`select 1 from doorbell_rings where session_id = ${agent.sessionId}`).length === 3, 'their ring records');
    await settle(300); // the pushes' own todo_ready echoes, gated
    page = (await b.get(`/endpoints/${e.id}`)).text;
    expect(page).not.toContain('rings reach it but nothing acts on them');
    // Which session the doorbells went to, and why (its ring records' reason).
    expect(page).toMatch(/data-reason="never_called_tool">last doorbell <time[^>]*>0s ago<\/time>: chosen because no streaming session has listed or called tools yet; newest stream<\/span>/);
    app.clock.advance(15 * 60_000 + 1000);
    await app.services.acks.sweep();
    expect(app.services.sessions.all().find((s) => s.id === agent.sessionId)!.unheard).toBe(true);
    const b2 = await signedIn(alice);
    page = (await b2.get(`/endpoints/${e.id}`)).text;
    expect(page).toContain('1 unheard session: rings reach it but nothing acts on them.');
    expect(page).toContain(`href="/endpoints/${e.id}#report"`);
    await b2.post(`/endpoints/${e.id}/presence`, { presence: 'out', csrf_token: b2.csrfToken });
    page = (await b2.get(`/endpoints/${e.id}`)).text;
    expect(page).toContain('<span class="badge presence-badge">out</span>');
    expect(page).not.toContain('rings reach it but nothing acts on them');
  });

  it('on another instance than the agent\'s, shows its session and the unheard label from the directory', async () => {
    const other = await startTestApp(db.url, app.clock);
    try {
      const e = await vend(alice, 'elsewhere');
      const agent = await connectAgent(other, e, { track: clients });
      const b = await signedIn(alice);
      let page = (await b.get(`/endpoints/${e.id}`)).text;
      expect(page).toContain('1 attached');
      expect(page).toContain('claude-code 2.1.0');
      for (const title of ['one', 'two', 'three']) await push(alice, e.slug, title);
      await until(() => agent.heard.length === 3, 'three doorbells on the other instance');
      await until(async () => (await db.sql`select 1 from doorbell_rings where session_id = ${agent.sessionId}`).length === 3, 'their ring records');
      // The pushes' todo_ready echoes reach both instances; one that came after the clock moved
      // would find its ring gate expired and ring again, and a fresh ring is not unheard.
      await settle(300);
      app.clock.advance(15 * 60_000 + 1000);
      await other.services.acks.sweep();
      // One sign-in for the whole wait: the sign-in route is rate-limited per client IP.
      await until(async () => {
        page = (await b.get(`/endpoints/${e.id}`)).text;
        return page.includes('1 unheard session: rings reach it but nothing acts on them.');
      }, 'the unheard label on this instance');
      expect(app.services.sessions.all().some((s) => s.id === agent.sessionId)).toBe(false);
    } finally {
      await other.stop();
    }
  });

  it('renders the deaf-consumer warning only while in', () => {
    const now = app.clock.now();
    const s = boardSession({ id: 'h', handle: 'h', display_name: null, email: null, created_at: now }, 'A'.repeat(43), now);
    const base: CardData = {
      endpoint: {
        id: '00000000-0000-4000-8000-000000000001', agent_id: 'a', agent_name: 'deaf', owner_human_id: 'h', slug: 'deaf-1', credential_prefix: 'sbk_abcdefgh',
        scope_queues: ['inbox'], scope_verbs: ['claim'], state: 'active', created_at: now, revoked_at: null, last_seen_at: null, shift: null,
        presence_override: null, override_until: null, override_set_at: null, override_by: null, webhook_max: 0,
      },
      presence: { presence: 'in', source: 'default', until: null },
      mcpUrl: 'http://x/mcp/deaf-1',
      sessions: [{ id: 's', client: 'c 1', stream: true, unheard: false, deaf: true, lastRing: null }],
      counts: { pending: 0, claimed: 0 },
    };
    expect(card(base, s, now).value).toContain('Deaf consumer: 1 attached session receives nothing');
    expect(card({ ...base, presence: { presence: 'out', source: 'operator', until: null } }, s, now).value).not.toContain('Deaf consumer');
  });

  it('Run self-test redirects to the card report; a second while one runs is refused inline', async () => {
    const e = await vend(alice, 'tested');
    // A listening session that never claims: the doorbell is written and the test runs its full wait
    // (with no session it would end as no_session as soon as its ring was due, 100 ms later).
    await connectAgent(app, e, { track: clients });
    const b = await signedIn(alice);
    const r = await b.post(`/endpoints/${e.id}/self-test`, { csrf_token: b.csrfToken });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe(`/endpoints/${e.id}#report`);
    const report = await b.get(`/endpoints/${e.id}`);
    expect(report.text).toMatch(/Verdict: <strong class="verdict-value">pending<\/strong>/);
    const again = await b.post(`/endpoints/${e.id}/self-test`, { csrf_token: b.csrfToken });
    expect(again.status).toBe(429);
    expect(again.text).toContain('a self-test is already running on this endpoint');
  });

  it('vends with the credential shown once, and revokes through a confirm page', async () => {
    const b = await signedIn(alice);
    const refused = await b.post('/endpoints', { name: 'vended-bot', queues: 'Bad Queue', verbs: ['claim'], csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/<p class="error" id="queues-error" role="alert">queues: /);
    const r = await b.post('/endpoints', { name: 'vended-bot', queues: 'reviews, inbox', verbs: ['claim', 'complete'], csrf_token: b.csrfToken });
    expect(r.status).toBe(201);
    const credential = /export SWITCHBOARD_AGENT_TOKEN=<span id="credential" class="secret">(sbk_[A-Za-z0-9_-]{43})<\/span>/.exec(r.text)![1]!;
    expect(r.text.split(credential)).toHaveLength(2);
    expect(r.text).toContain('&quot;Authorization&quot;: &quot;Bearer ${SWITCHBOARD_AGENT_TOKEN}&quot;');
    expect(r.text).toContain(`claude mcp add switchboard --transport http --scope user`);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const id = /href="\/endpoints\/([0-9a-f-]{36})"/.exec(r.text)![1]!;
    const cardPage = await b.get(`/endpoints/${id}`);
    expect(cardPage.text).not.toContain(credential);
    expect(cardPage.text).toContain(`${credential.slice(0, 12)}…`);
    expect((await db.sql`select scope_queues, scope_verbs from endpoints where id = ${id}`)[0]).toEqual({ scope_queues: ['reviews', 'inbox'], scope_verbs: ['claim', 'complete'] });

    const confirm = await b.get(`/endpoints/${id}/revoke`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('Revoke vended-bot?');
    expect((await presenceRow(id)).state).toBe('active');
    const revoked = await b.post(`/endpoints/${id}/revoke`, { csrf_token: b.csrfToken });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get('location')).toBe(`/endpoints/${id}`);
    expect((await presenceRow(id)).state).toBe('revoked');
    expect((await b.get(`/endpoints/${id}`)).text).toContain('Endpoint revoked');
    expect((await b.post(`/endpoints/${id}/presence`, { presence: 'out', csrf_token: b.csrfToken })).status).toBe(409);
    expect((await b.post(`/endpoints/${id}/revoke`, { csrf_token: b.csrfToken })).status).toBe(409);
  });

  it('a vend form sent twice (a reload of the credential page) vends one endpoint and never shows a credential again', async () => {
    const b = await signedIn(alice);
    const form = await b.get('/');
    const request = /name="vend_request" value="([A-Za-z0-9_-]+)"/.exec(form.text)![1]!;
    // A refused send keeps the form's id, so the corrected form is still the same vend.
    const refused = await b.post('/endpoints', { vend_request: request, name: '', queues: 'reviews', csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain(`name="vend_request" value="${request}"`);
    const sent = { vend_request: request, name: 'once-bot', queues: 'reviews', verbs: ['claim'], csrf_token: b.csrfToken };
    const [first, second] = await Promise.all([b.post('/endpoints', sent), b.post('/endpoints', sent)]);
    expect([first.status, second.status].sort()).toEqual([201, 409]);
    const again = await b.post('/endpoints', sent);
    expect(again.status).toBe(409);
    expect(again.text).toContain('Already vended');
    expect(again.text).not.toMatch(/sbk_[A-Za-z0-9_-]{43}/);
    const rows = await db.sql`select e.id from endpoints e join agents a on a.id = e.agent_id where a.owner_human_id = ${alice.id} and a.name = 'once-bot'`;
    expect(rows).toHaveLength(1);
    expect(again.text).toContain(`href="/endpoints/${rows[0]!.id}"`);
    // Another human replaying the id vends their own endpoint (the id is scoped to its owner's forms).
    const other = await signedIn(bob);
    expect((await other.post('/endpoints', { ...sent, csrf_token: other.csrfToken })).status).toBe(201);
  });
});

describe('the endpoints page at many endpoints (issue 40)', () => {
  // At 100,000 endpoints one page of every card was 470 MB of HTML in 57 s (bench/loops.ts).
  const cardIds = (text: string) => [...text.matchAll(/<article class="card[^"]*" id="endpoint-([0-9a-f-]{36})"/g)].map((m) => m[1]!);
  it('shows 50 cards a page, newest first, with links to the others; each page has its sparklines; a card form comes back to its page', async () => {
    const h = await humanWithToken(db.sql);
    await manyEndpoints(db.sql, h.id, 120);
    await db.sql`update endpoints e set state = 'revoked', revoked_at = now() from agents a where a.id = e.agent_id and a.owner_human_id = ${h.id} and e.slug in (select slug from endpoints e2 join agents a2 on a2.id = e2.agent_id where a2.owner_human_id = ${h.id} order by e2.slug limit 3)`;
    const b = await signedIn(h);
    const pages = [await b.get('/'), await b.get('/?page=2'), await b.get('/?page=3')];
    expect(pages.map((p) => cardIds(p.text).length)).toEqual([50, 50, 17]);
    expect(new Set(pages.flatMap((p) => cardIds(p.text))).size).toBe(117);
    expect(pages[0]!.text).toContain('Endpoints 1–50 of 117 active, newest first.');
    expect(pages[0]!.text).toContain('<a rel="next" href="/?page=2">Next</a>');
    expect(pages[2]!.text).toContain('Endpoints 101–117 of 117 active, newest first.');
    expect(pages[2]!.text).toContain('<a rel="prev" href="/?page=2">Previous</a>');
    // Newest first, as the whole list was.
    const order = (await db.sql<{ id: string }[]>`
      select e.id from endpoints e join agents a on a.id = e.agent_id where a.owner_human_id = ${h.id} and e.state = 'active' order by e.created_at desc, e.id`).map((r) => r.id);
    expect(pages.flatMap((p) => cardIds(p.text))).toEqual(order);
    // Past the last page: the last; not a page number: the first.
    expect(cardIds((await b.get('/?page=99')).text)).toEqual(cardIds(pages[2]!.text));
    expect(cardIds((await b.get('/?page=x')).text)).toEqual(cardIds(pages[0]!.text));
    // The revoked: their count and each one's line.
    expect(pages[0]!.text).toContain('<h2>Revoked <span class="count">3</span></h2>');
    // Each page's sparklines are its own cards'.
    expect(pages[1]!.text).toContain('data-chart-src="/endpoints/sparklines.json?page=2"');
    expect(pages[0]!.text).toContain('data-chart-src="/endpoints/sparklines.json"');
    const spark = JSON.parse((await b.get('/endpoints/sparklines.json?page=2')).text) as { series: Record<string, number[]> };
    expect(Object.keys(spark.series).sort()).toEqual([...cardIds(pages[1]!.text)].sort());
    // A card's form on page 2 says so, and comes back there.
    const id = cardIds(pages[1]!.text)[3]!;
    expect(pages[1]!.text).toContain('<input type="hidden" name="return" value="list"><input type="hidden" name="page" value="2">');
    const r = await b.post(`/endpoints/${id}/presence`, { presence: 'out', until: '', return: 'list', page: '2', csrf_token: b.csrfToken });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe(`/?page=2#endpoint-${id}`);
    // A refused one is page 2 again, with the error on that card.
    const refused = await b.post(`/endpoints/${id}/presence`, { presence: 'out', until: 'soon', return: 'list', page: '2', csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(cardIds(refused.text)).toEqual(cardIds(pages[1]!.text));
  });
});

describe('todos', () => {
  it('filters by state and queue with counts, and shows one todo with its payload and lifecycle', async () => {
    const h = await humanWithToken(db.sql);
    const e = await vend(h, 'filters', ['alpha', 'beta']);
    const a1 = await push(h, e.slug, 'alpha one', { queue: 'alpha', payload: { n: 1, nested: { ok: true } } });
    await push(h, e.slug, 'alpha two', { queue: 'alpha' });
    await push(h, e.slug, 'beta one', { queue: 'beta' });
    const agent = await connectAgent(app, e, { track: clients });
    expect(await agent.call('claim', { id: a1 })).toMatchObject({ state: 'claimed' });
    const b = await signedIn(h);
    const all = (await b.get('/todos')).text;
    expect(all).toMatch(/all <span class="count">3<\/span>/);
    expect(all).toMatch(/pending <span class="count">2<\/span>/);
    expect(all).toMatch(/claimed <span class="count">1<\/span>/);
    expect(all).toMatch(/alpha <span class="count">2<\/span>/);
    const pendingAlpha = (await b.get('/todos?state=pending&queue=alpha')).text;
    expect(pendingAlpha).toContain('alpha two');
    expect(pendingAlpha).not.toContain('alpha one');
    expect(pendingAlpha).not.toContain('beta one');
    expect(pendingAlpha).toMatch(/alpha <span class="count">1<\/span>/);
    expect((await b.get('/todos?state=sleeping')).status).toBe(400);
    const one = (await b.get(`/todos/${a1}`)).text;
    expect(one).toContain('<pre class="json" id="payload">{\n  &quot;n&quot;: 1,\n  &quot;nested&quot;: {\n    &quot;ok&quot;: true\n  }\n}</pre>');
    expect(one).toContain('<span class="badge state-claimed">claimed</span>');
    expect(one).toMatch(/<dt>Lease expires<\/dt><dd><time/);
    // Self-test todos never show.
    await b.post(`/endpoints/${e.id}/self-test`, { csrf_token: b.csrfToken });
    expect((await b.get('/todos')).text).toMatch(/all <span class="count">3<\/span>/);
  });
});

describe('live updates', () => {
  it('a signed-in page re-reads every data-live region of its own URL in one request, and a POST answer none', async () => {
    const e = await vend(alice, 'live-regions');
    const b = await signedIn(alice);
    const card = (await b.get(`/endpoints/${e.id}`)).text;
    const updater = /<div id="live-updates" hidden hx-get="([^"]+)" hx-trigger="sb-changed from:body" hx-swap="none" hx-select-oob="([^"]+)"/.exec(card)!;
    expect(updater[1]).toBe(`/endpoints/${e.id}`);
    const regions = [...card.matchAll(/id="([^"]+)" data-live/g)].map((m) => `#${m[1]}`);
    expect(regions).toContain(`#status-${e.id}`);
    expect(regions).toContain('#report');
    expect(updater[2]!.split(',')).toEqual(regions);
    const todos = (await b.get('/todos?state=pending')).text;
    expect(todos).toContain('hx-get="/todos?state=pending"');
    // A refused form's answer is not live: a re-read would wipe the inline error.
    const refused = await b.post(`/endpoints/${e.id}/shift`, { shift: 'Mon 25:00-26:00', action: 'save', csrf_token: b.csrfToken });
    expect(refused.status).toBe(400);
    expect(refused.text).not.toContain('id="live-updates"');
  });

  /** Reads an SSE stream in the background; frames collect in `events`. */
  async function stream(b: ReturnType<typeof browser>) {
    const ac = new AbortController();
    const res = await fetch(`${app.url}/events`, { headers: { cookie: b.cookie }, signal: ac.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const events: { event: string; data: any }[] = [];
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    void (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buf += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const frame = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const ev = /^event: (.+)$/m.exec(frame)?.[1];
            const data = /^data: (.+)$/m.exec(frame)?.[1];
            if (ev && data) events.push({ event: ev, data: JSON.parse(data) });
          }
        }
      } catch {
        /* aborted */
      }
    })();
    return { events, close: () => ac.abort() };
  }

  it("carries only the signed-in human's own events: todo created and claimed, presence changes", async () => {
    const h1 = await humanWithToken(db.sql);
    const h2 = await humanWithToken(db.sql);
    const mine = await vend(h1, 'mine');
    const theirs = await vend(h2, 'theirs');
    const s1 = await stream(await signedIn(h1));
    const s2 = await stream(await signedIn(h2));
    // Each stream says when its baseline is taken.
    await until(() => s1.events.some((e) => e.event === 'ready') && s2.events.some((e) => e.event === 'ready'), 'ready', 12_000);
    const id = await push(h1, mine.slug, 'for h1');
    await push(h1, mine.slug, 'also for h1');
    await until(() => s1.events.some((e) => e.event === 'todo' && e.data.id === id && e.data.type === 'created'), 'the created event', 12_000);
    const agent = await connectAgent(app, mine, { track: clients });
    await agent.call('claim', { id });
    await until(() => s1.events.some((e) => e.event === 'todo' && e.data.id === id && e.data.type === 'claimed'), 'the claimed event', 12_000);
    await apiCaller(app.url, h1.token)('PUT', `/api/v1/endpoints/${mine.slug}/presence`, { presence: 'out', until: null });
    await until(() => s1.events.some((e) => e.event === 'presence' && e.data.endpoint_id === mine.id && e.data.presence === 'out'), 'the presence event', 12_000);
    expect(s1.events.filter((e) => e.event !== 'ready').every((e) => e.data.endpoint_id === mine.id)).toBe(true);
    expect(s2.events.filter((e) => e.event !== 'ready' && e.data.endpoint_id !== theirs.id)).toEqual([]);
    // A second stream of the same human joins the running watch and is told it is ready at once.
    const s3 = await stream(await signedIn(h1));
    await until(() => s3.events.some((e) => e.event === 'ready'), 'ready on the joining stream', 2000);
    s3.close();
    s1.close();
    s2.close();
  }, 60_000);

  it('shutting the server down ends open streams instead of waiting on them', async () => {
    const other = await startTestApp(db.url, app.clock);
    const b = await signedIn(alice, other);
    const res = await fetch(`${other.url}/events`, { headers: { cookie: b.cookie } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('retry: 5000\n\n');
    const t0 = Date.now();
    await other.stop();
    // An open stream would hold the HTTP server open for good; a loaded machine still stops within seconds.
    expect(Date.now() - t0).toBeLessThan(15_000);
    await expect((async () => {
      for (;;) if ((await reader.read()).done) return 'ended';
    })()).resolves.toBe('ended');
  }, 30_000);
});
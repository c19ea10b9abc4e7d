import { describe, expect, it } from 'vitest';
import { connectAgent, until } from '../../test/support/agents.ts';
import { alice, app, browser, clients, db, signedIn, useBoardSuite, vend } from '../../test/support/board.ts';
import { CONNECT_GUIDE_PATH, GUIDE_LINK } from '../domain/guides.ts';
import { TROUBLESHOOTING, hintsFor, type Verdict } from '../services/doorbell/self-tests.ts';
import { BOARD_CSP } from './plugin.ts';
import { hintWithLinks, renderGuide } from './views/docs.ts';

// The connect guide (docs/connect.md) as a page of the server, and the self-test hints that link it.

useBoardSuite();

const VERDICTS: Verdict[] = ['pending', 'pass', 'no_session', 'no_stream', 'write_failed', 'unheard'];

describe('the connect guide', () => {
  it('is served to anyone at /docs/connect with the board CSP, its sections anchored', async () => {
    const r = await browser().get(CONNECT_GUIDE_PATH);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('content-security-policy')).toBe(BOARD_CSP);
    for (const id of ['claude-code', 'other-mcp-clients', 'clients-without-push', 'troubleshooting']) expect(r.text).toContain(`id="${id}"`);
    expect(r.text).toContain('<code>claude --dangerously-load-development-channels server:switchboard --allowedTools mcp__switchboard</code>');
    expect(r.text).toContain('<a href="#troubleshooting">troubleshooting</a>');
    expect(r.text).not.toContain('sign in');
  });

  it('every guide link in every hint names a page of this server and a section on it', async () => {
    expect(TROUBLESHOOTING).toMatch(GUIDE_LINK);
    const links = new Set<string>();
    for (const v of VERDICTS) for (const client of ['claude-code', 'crush', null]) for (const h of hintsFor(v, client)) for (const m of h.matchAll(GUIDE_LINK)) links.add(m[0]);
    expect([...links].sort()).toEqual(['/docs/connect#clients-without-push', '/docs/connect#other-mcp-clients', '/docs/connect#troubleshooting']);
    for (const link of links) {
      const [path, anchor] = link.split('#') as [string, string];
      const r = await browser().get(path);
      expect(r.status, link).toBe(200);
      expect(r.text, link).toContain(`id="${anchor}"`);
    }
  });

  it('renders only what the guide uses, escaped', () => {
    const { title, body } = renderGuide('# A <b>guide</b>\n\nSee [x](javascript:alert) and [y](#ok) and `<i>`.\n\n- one\n  continued\n  - nested\n\n1. first\n');
    expect(title).toBe('A <b>guide</b>');
    expect(body.value).toContain('<h1 id="a-bguideb">A &lt;b&gt;guide&lt;/b&gt;</h1>');
    expect(body.value).toContain('See x and <a href="#ok">y</a> and <code>&lt;i&gt;</code>.');
    expect(body.value).toContain('<ul><li>one continued<ul><li>nested</li></ul></li></ul><ol><li>first</li></ol>');
    expect(hintWithLinks('<x> Troubleshooting: /docs/connect#troubleshooting.').value).toBe(
      '&lt;x&gt; Troubleshooting: <a href="/docs/connect#troubleshooting">/docs/connect#troubleshooting</a>.',
    );
  });
});

describe('the self-test report on the board', () => {
  it('shows its hints with the guide links as links', async () => {
    const e = await vend(alice, 'deaf-client');
    const agent = await connectAgent(app, e, { name: 'some-other-client', track: clients });
    const b = await signedIn(alice);
    expect((await b.post(`/endpoints/${e.id}/self-test`, { csrf_token: b.csrfToken })).status).toBe(303);
    await until(() => agent.tests().length === 1, 'the test doorbell');
    await until(async () => (await db.sql`select 1 from doorbell_tests where endpoint_id = ${e.id} and delivery = 'written'`).length === 1, 'the delivery record');
    app.clock.advance(61_000);
    const page = (await b.get(`/endpoints/${e.id}`)).text;
    expect(/Verdict: <strong class="verdict-value">(\w+)/.exec(page)?.[1]).toBe('unheard');
    expect(page).toContain('See the connect guide for your client: <a href="/docs/connect#other-mcp-clients">/docs/connect#other-mcp-clients</a>');
    expect(page).toContain('Troubleshooting: <a href="/docs/connect#troubleshooting">/docs/connect#troubleshooting</a>');
  });
});

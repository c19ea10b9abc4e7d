import { randomBytes } from 'node:crypto';
import type { EffectivePresence } from '../../domain/presence/index.ts';
import { GRANTABLE_VERBS, DEFAULT_VERBS } from '../../domain/scope.ts';
import type { Endpoint } from '../../services/endpoints.ts';
import type { EventSummary } from '../../services/webhooks.ts';
import type { BoardSession } from '../auth.ts';
import { Html, html, path, withQuery, type Part } from '../html.ts';
import type { ConnectInstructions } from '../../domain/connect-instructions.ts';
import { connectSection } from './connect.ts';
import { hintWithLinks } from './docs.ts';
import { ago, chips, csrfField, fieldError, page, time, untilTime, type FieldError } from './layout.ts';
import { notifyHooksSection, webhooksSection, type HookForm, type HookView, type WebhookForm, type WebhookView } from './integrations.ts';
import { pushSection, type PushForm } from './push.ts';
import { presenceReason } from '../../domain/presence-words.ts';
import { RING_CHOICE_WORDS, type RingChoiceReason } from '../../domain/doorbell-choice.ts';
import { grantsFacts, type GrantSummary } from './grants.ts';
import { presenceWeekSection, type PresenceWeek } from './presence-history.ts';
import { sparkline } from './charts.ts';

// ---------------------------------------------------------------------------------------------
// Endpoint card

export interface SessionInfo {
  id: string;
  client: string;
  stream: boolean;
  unheard: boolean;
  deaf: boolean;
  /** Its latest doorbell, and why this session was the one chosen for it. */
  lastRing: { sent_at: Date; reason: RingChoiceReason | null } | null;
}

export interface CardData {
  endpoint: Endpoint;
  presence: EffectivePresence;
  mcpUrl: string;
  sessions: SessionInfo[];
  /** Its pending todos and those claimed (held by an agent under a lease). */
  counts: { pending: number; claimed: number };
  /** Its live OAuth grants (clients connected by URL alone); absent: none. */
  grants?: GrantSummary[];
  /** Its pending depth over the last 24 h (the endpoints page's sparkline); absent on its own page. */
  pending24h?: { values: number[]; from: string; step_seconds: number; src?: string };
  /** On the endpoints page: the page it is on (its forms come back there). */
  listPage?: number;
}

export interface CardErrors {
  /** Inline error of the presence or shift form (field `until`, `presence` or `shift`). */
  error?: FieldError;
  /** The shift text to put back in the editor after a refused save. */
  shiftValue?: string;
}

/**
 * Presence in the one vocabulary (domain/presence-words.ts): the badge is `in` or `out`, then its
 * source as the API names it and the reason in words ("on shift" only when the shift decides).
 */
export function presenceLine(p: EffectivePresence): Html {
  const until = p.until ? html`until ${untilTime(p.until)}` : p.presence === 'out' ? html`until clocked in` : html`no end`;
  return html`<p class="presence presence-${p.presence}"><span class="badge presence-badge">${p.presence}</span> <span class="presence-detail"><span class="presence-source">${p.source}</span> · <span class="presence-reason">${presenceReason(p)}</span> · ${until}</span></p>`;
}

/** The held-todo wording: "held until <time>" or "held until clocked in". */
export function heldText(p: EffectivePresence): Html {
  return p.until ? html`held until ${untilTime(p.until)}` : html`held until clocked in`;
}

/** "2 pending · 1 claimed", each a link to those todos; pending ones of an endpoint that is out are held. */
function todoCounts(c: CardData): Html {
  const e = c.endpoint;
  const link = (state: 'pending' | 'claimed', n: number) =>
    html`<a class="${state}-count" href="${withQuery('/todos', { endpoint: e.id, state })}">${n} ${state}</a>`;
  const held = e.state === 'active' && c.presence.presence === 'out' && c.counts.pending > 0 ? html` <span class="held">(${heldText(c.presence)})</span>` : '';
  return html`${link('pending', c.counts.pending)}${held} · ${link('claimed', c.counts.claimed)}`;
}

/** "last doorbell 3 min ago: chosen because it acknowledged a doorbell most recently". */
function lastRingLine(s: SessionInfo, now: Date): Html {
  if (!s.lastRing) return html``;
  const why = s.lastRing.reason ? html`: chosen because ${RING_CHOICE_WORDS[s.lastRing.reason]}` : '';
  return html` <span class="muted last-ring" data-reason="${s.lastRing.reason ?? ''}">last doorbell ${ago(s.lastRing.sent_at, now)}${why}</span>`;
}

function cardStatus(c: CardData, now: Date): Html {
  const e = c.endpoint;
  const active = e.state === 'active';
  // SPEC-0022: an endpoint that is out is never shown with the deaf or unheard warning.
  const warn = active && c.presence.presence === 'in';
  const deaf = c.sessions.filter((s) => s.deaf).length;
  const unheard = c.sessions.filter((s) => s.unheard).length;
  return html`<div class="card-status" id="status-${e.id}" data-live>
${active ? presenceLine(c.presence) : html`<p class="presence"><span class="badge state-revoked">revoked</span> ${time(e.revoked_at)}</p>`}
${warn && deaf > 0 ? html`<p class="warn deaf-warning" role="status">Deaf consumer: ${deaf} attached session${deaf === 1 ? '' : 's'} receive${deaf === 1 ? 's' : ''} nothing (the last doorbell writes failed).</p>` : ''}
${
  warn && unheard > 0
    ? html`<p class="warn unheard-warning" role="status">${unheard} unheard session${unheard === 1 ? '' : 's'}: rings reach it but nothing acts on them. <a href="${path('/endpoints', e.id)}#report">Run a self-test</a></p>`
    : ''
}
<dl class="facts">
  <dt>Slug</dt><dd><code>${e.slug}</code></dd>
  <dt>Todos</dt><dd class="todo-counts">${todoCounts(c)}</dd>
  <dt>Queues</dt><dd>${chips(e.scope_queues)}</dd>
  <dt>Verbs</dt><dd>${chips(e.scope_verbs)}</dd>
  <dt>MCP URL</dt><dd><code class="mcp-url">${c.mcpUrl}</code></dd>
  <dt>Credential</dt><dd><code>${e.credential_prefix}…</code> <span class="muted">hashed · shown once at vend</span></dd>
  <dt>Last seen</dt><dd class="last-seen">${ago(e.last_seen_at, now)}</dd>
  <dt>Shift</dt><dd>${e.shift ? html`<code class="shift-value">${e.shift}</code>` : html`<span class="muted">none</span>`}</dd>
  <dt>Sessions</dt><dd class="sessions">${c.sessions.length} attached${unheard > 0 && warn ? html`, ${unheard} unheard` : ''}${
    c.sessions.length
      ? html`<ul class="session-list">${c.sessions.map(
          (s) =>
            html`<li><code>${s.client}</code> ${s.stream ? 'stream open' : html`<span class="muted">no stream</span>`}${
              warn && s.unheard ? html` <span class="badge warn-badge">unheard: rings reach it but nothing acts on them</span>` : ''
            }${warn && s.deaf ? html` <span class="badge warn-badge">deaf: writes fail</span>` : ''}${lastRingLine(s, now)}</li>`,
        )}</ul>`
      : ''
  }</dd>
</dl>
</div>`;
}

function cardControls(c: CardData, s: BoardSession, errs: CardErrors, home: 'list' | 'card'): Html {
  const e = c.endpoint;
  // Card forms come back to the page they were sent from: one of two fixed paths (the list's page a number).
  const back =
    home === 'list'
      ? html`<input type="hidden" name="return" value="list">${c.listPage && c.listPage > 1 ? html`<input type="hidden" name="page" value="${String(c.listPage)}">` : ''}`
      : '';
  const id = e.id;
  const overrideLive = c.presence.source === 'agent' || c.presence.source === 'operator';
  const shiftValue = errs.shiftValue ?? e.shift ?? '';
  const shiftErr = errs.error?.field === 'shift';
  return html`<div class="controls">
<div class="row">
<form class="presence-form" method="post" action="${path('/endpoints', id, 'presence')}">
  ${csrfField(s)}${back}
  <label>Until <input type="text" name="until" placeholder="optional: 90m or 2026-12-01T17:00:00Z" autocomplete="off"${
    errs.error?.field === 'until' ? html` aria-invalid="true"` : ''
  }></label>
  <button type="submit" name="presence" value="out">Clock out</button>
  <button type="submit" name="presence" value="in">Clock in</button>
  ${fieldError(errs.error, 'until', `until-error-${id}`)}${fieldError(errs.error, 'presence', `presence-error-${id}`)}
</form>
${
  overrideLive
    ? html`<form class="inline" method="post" action="${path('/endpoints', id, 'presence', 'clear')}">${csrfField(s)}${back}<button type="submit">Clear override</button></form>`
    : ''
}
</div>
<form class="shift-form" method="post" action="${path('/endpoints', id, 'shift')}">
  ${csrfField(s)}${back}
  <label for="shift-${id}">Shift</label>
  <input type="text" id="shift-${id}" name="shift" value="${shiftValue}" placeholder="TZ=Europe/Berlin Mon-Fri 09:00-17:00" autocomplete="off"${
    shiftErr ? html` aria-invalid="true" aria-describedby="shift-error-${id}"` : ''
  }>
  <button type="submit" name="action" value="save">Save shift</button>
  <button type="submit" name="action" value="clear">Clear shift</button>
  ${fieldError(errs.error, 'shift', `shift-error-${id}`)}
</form>
${
  // On the endpoint's own page the report section below carries this button.
  home === 'list'
    ? html`<form class="inline" method="post" action="${path('/endpoints', id, 'self-test')}">${csrfField(s)}<button type="submit" class="selftest">Run self-test</button></form>`
    : ''
}
<p class="links"><a href="${path('/endpoints', id)}#push">Push a todo</a> · <a href="${path('/endpoints', id)}#webhooks">Webhooks</a> · <a href="${path('/endpoints', id)}#notify-hooks">Notify hooks</a> · <a class="danger" href="${path('/endpoints', id, 'revoke')}">Revoke…</a></p>
</div>`;
}

export function card(c: CardData, s: BoardSession, now: Date, errs: CardErrors = {}, home: 'list' | 'card' = 'card'): Html {
  const e = c.endpoint;
  return html`<article class="card${e.state === 'active' ? '' : ' revoked'}" id="endpoint-${e.id}">
<header class="card-head">
  <h2><a href="${path('/endpoints', e.id)}">${e.agent_name}</a></h2>
  <span class="badge state state-${e.state}">${e.state}</span>
</header>
${cardStatus(c, now)}
${c.pending24h ? sparkline(e.id, c.pending24h.values, c.pending24h.from, c.pending24h.step_seconds, c.pending24h.src) : ''}
${e.state === 'active' ? html`<dl class="facts grants-facts">${grantsFacts(e.id, c.grants ?? [], s, now, home)}</dl>` : ''}
${e.state === 'active' ? cardControls(c, s, errs, home) : html`<p class="muted">Endpoint revoked ${time(e.revoked_at)}. Its history stays readable.</p>`}
</article>`;
}

// ---------------------------------------------------------------------------------------------
// Endpoints page

export interface VendForm {
  /** The form's one-time id, kept across a refused send so the corrected form is still one vend. */
  request?: string;
  name?: string;
  queues?: string;
  verbs?: readonly string[];
  error?: FieldError;
}

function vendSection(s: BoardSession, f: VendForm): Html {
  const verbs = f.verbs ?? DEFAULT_VERBS;
  const invalid = (field: string) => (f.error?.field === field ? html` aria-invalid="true"` : '');
  return html`<section class="vend" id="vend">
<h2>Vend an endpoint</h2>
<form method="post" action="/endpoints">
  ${csrfField(s)}
  <input type="hidden" name="vend_request" value="${f.request ?? randomBytes(18).toString('base64url')}">
  <label>Name <input type="text" name="name" value="${f.name ?? ''}" maxlength="100" placeholder="review-bot"${invalid('name')}></label>
  ${fieldError(f.error, 'name', 'name-error')}
  <label>Queues <input type="text" name="queues" value="${f.queues ?? 'inbox'}" placeholder="inbox, reviews"${invalid('queues')}></label>
  <p class="hint">Comma- or space-separated queue names.</p>
  ${fieldError(f.error, 'queues', 'queues-error')}
  <fieldset><legend>Verbs</legend>
  ${GRANTABLE_VERBS.map((v) => html`<label class="check"><input type="checkbox" name="verbs" value="${v}"${verbs.includes(v) ? html` checked` : ''}> ${v}</label>`)}
  </fieldset>
  ${fieldError(f.error, 'verbs', 'verbs-error')}
  <button type="submit" class="primary">Vend</button>
</form>
</section>`;
}

/** Revoked endpoints: one short line each (name, slug, when), their cards one click away; the newest `revoked.length` of `total`. */
function revokedSection(revoked: readonly Endpoint[], total: number): Html {
  if (revoked.length === 0) return html``;
  return html`<section class="revoked-list" id="revoked">
<h2>Revoked <span class="count">${total.toLocaleString('en')}</span></h2>
${total > revoked.length ? html`<p class="muted">The newest ${revoked.length} of ${total.toLocaleString('en')}.</p>` : ''}
<table><thead><tr><th>Name</th><th>Slug</th><th>Revoked at</th></tr></thead><tbody>
${revoked.map(
  (e) => html`<tr class="revoked-row" id="revoked-${e.id}"><td><a href="${path('/endpoints', e.id)}">${e.agent_name}</a></td><td><code>${e.slug}</code></td><td>${time(e.revoked_at)}</td></tr>`,
)}
</tbody></table>
</section>`;
}

/** Which active endpoints the page shows: page `page` of `pages`, `size` a page, of `total`. */
export interface ListPager {
  page: number;
  pages: number;
  size: number;
  total: number;
}

/** Active endpoints a page of the endpoints page shows, and revoked ones listed under them (issue 40: 100,000 endpoints). */
export const ENDPOINTS_PER_PAGE = 50;
export const REVOKED_SHOWN = 50;

/** `?page=N` of the endpoints page and of its sparklines (a card form's `page` too): a positive integer, else the first. */
export const listPageOf = (raw: unknown): number => (typeof raw === 'string' && /^[1-9][0-9]{0,8}$/.test(raw) ? Number(raw) : 1);

/** The link to page `n` of the endpoints page (its first: `/`). */
export const endpointsPageUrl = (n: number): string => (n > 1 ? `/?page=${n}` : '/');

/** Where the page is among the active endpoints, and links to the pages around it. */
function pagerNav(p: ListPager): Html {
  if (p.total <= p.size) return html``;
  const first = (p.page - 1) * p.size + 1;
  const last = Math.min(p.total, p.page * p.size);
  const near = [...new Set([1, p.page - 2, p.page - 1, p.page, p.page + 1, p.page + 2, p.pages])].filter((n) => n >= 1 && n <= p.pages).sort((a, b) => a - b);
  return html`<nav class="pager" aria-label="Endpoint pages">
<p>Endpoints ${first.toLocaleString('en')}–${last.toLocaleString('en')} of ${p.total.toLocaleString('en')} active, newest first.</p>
<p>${p.page > 1 ? html`<a rel="prev" href="${endpointsPageUrl(p.page - 1)}">Previous</a> · ` : ''}${near.map((n, i) =>
    html`${i > 0 && n - near[i - 1]! > 1 ? '… ' : ''}${n === p.page ? html`<strong aria-current="page">${String(n)}</strong>` : html`<a href="${endpointsPageUrl(n)}">${String(n)}</a>`} `,
  )}${p.page < p.pages ? html`· <a rel="next" href="${endpointsPageUrl(p.page + 1)}">Next</a>` : ''}</p>
</nav>`;
}

/**
 * Active endpoints as cards, a page of them at a time (`pager`; 100,000 cards would be half a
 * gigabyte of page), then the newest revoked ones as a short list, then the vend form.
 */
export function endpointsPage(
  s: BoardSession,
  cards: CardData[],
  revoked: readonly Endpoint[],
  now: Date,
  opts: { vend?: VendForm; errorsFor?: { id: string; errs: CardErrors }; pager?: ListPager; revokedTotal?: number } = {},
): string {
  const pager = opts.pager ?? { page: 1, pages: 1, size: cards.length, total: cards.length };
  return page(
    { title: 'Endpoints', session: s, liveUrl: opts.vend?.error || opts.errorsFor ? undefined : endpointsPageUrl(pager.page), nav: 'endpoints' },
    html`<h1>Endpoints</h1>
${cards.length === 0 ? html`<p class="empty">${revoked.length ? 'No active endpoints.' : 'No endpoints yet.'} Vend one below; hand its MCP URL and credential to an agent.</p>` : ''}
${pagerNav(pager)}
<div class="cards">${cards.map((c) => card(c, s, now, opts.errorsFor?.id === c.endpoint.id ? opts.errorsFor.errs : {}, 'list'))}</div>
${pagerNav(pager)}
${revokedSection(revoked, opts.revokedTotal ?? revoked.length)}
${vendSection(s, opts.vend ?? {})}`,
  );
}

// ---------------------------------------------------------------------------------------------
// One endpoint: card, self-test report, webhooks

export interface ReportView {
  test_id: string;
  verdict: string;
  wait_seconds: number;
  delivered: { written: boolean; at: string | null };
  claimed_within_seconds: number | null;
  hints: string[];
  started_at: Date;
}

function reportSection(e: Endpoint, s: BoardSession, report: ReportView | null, error: string | undefined): Html {
  return html`<section class="report" id="report" data-live>
<h2>Doorbell self-test</h2>
<p class="muted">Creates a self-test todo on this endpoint and rings it about 2 seconds later; an agent that hears the doorbell claims it, and the verdict is <code>pass</code>.</p>
${error ? html`<p class="error" role="alert">${error}</p>` : ''}
${
  report
    ? html`<p class="verdict verdict-${report.verdict}">Verdict: <strong class="verdict-value">${report.verdict}</strong></p>
<dl class="facts">
  <dt>Test</dt><dd><code>${report.test_id}</code>, started ${time(report.started_at)}, waits ${report.wait_seconds} s</dd>
  <dt>Doorbell</dt><dd>${report.delivered.written ? html`written ${report.delivered.at ? time(new Date(report.delivered.at)) : ''}` : html`<span class="muted">not written</span>`}</dd>
  <dt>Claimed</dt><dd>${report.claimed_within_seconds === null ? html`<span class="muted">not yet</span>` : html`within ${report.claimed_within_seconds} s`}</dd>
</dl>
${report.hints.length ? html`<h3>Hints</h3><ul class="hints">${report.hints.map((h) => html`<li>${hintWithLinks(h)}</li>`)}</ul>` : ''}`
    : html`<p class="empty">No self-test has run on this endpoint yet.</p>`
}
${e.state === 'active' ? html`<form method="post" action="${path('/endpoints', e.id, 'self-test')}">${csrfField(s)}<button type="submit" class="selftest">Run self-test</button></form>` : ''}
</section>`;
}

export function endpointPage(
  s: BoardSession,
  c: CardData,
  now: Date,
  extra: {
    report: ReportView | null;
    reportError?: string;
    webhooks: WebhookView[];
    events: EventSummary[];
    hooks: { hooks: HookView[]; ceiling: { max: number; used: number } };
    /** Its presence changes over the last 7 days, newest first. */
    presenceWeek: PresenceWeek;
    /** The history section (views/charts.ts), drawn over `range` (kept by live updates). */
    charts?: Part;
    range?: string;
    errs?: CardErrors;
    forms?: EndpointForms;
    live: boolean;
  },
): string {
  const e = c.endpoint;
  const forms = extra.forms ?? {};
  return page(
    { title: e.agent_name, session: s, liveUrl: extra.live ? withQuery(path('/endpoints', e.id), { range: extra.range }) : undefined, nav: 'endpoints' },
    html`<p class="crumbs"><a href="/">Endpoints</a> / <code>${e.slug}</code></p>
${card(c, s, now, extra.errs ?? {})}
${extra.charts ?? ''}
${presenceWeekSection(extra.presenceWeek)}
${e.state === 'active' ? pushSection(e, s, forms.push) : ''}
${reportSection(e, s, extra.report, extra.reportError)}
${webhooksSection(e, s, extra.webhooks, extra.events, forms.webhook)}
${notifyHooksSection(e, s, extra.hooks, forms.hook)}
<p><a href="${withQuery('/todos', { endpoint: e.id })}">This endpoint's todos</a> · <a href="/todos">All your todos</a></p>`,
  );
}

/** Refused forms of the endpoint page, each shown again with its values and error. */
export interface EndpointForms {
  push?: PushForm;
  webhook?: WebhookForm;
  hook?: HookForm;
}

// ---------------------------------------------------------------------------------------------
// Vend result and revoke

export function vendedPage(
  s: BoardSession,
  v: { id: string; name: string; slug: string; mcpUrl: string; credential: string; connect: ConnectInstructions },
): string {
  return page(
    { title: 'Endpoint vended', session: s, nav: 'endpoints' },
    html`<section class="vended">
<h1>Endpoint vended: ${v.name}</h1>
<p class="warn" role="status">Copy the credential now. It is shown this once; Switchboard keeps only its hash.</p>
<dl class="facts">
  <dt>Slug</dt><dd><code>${v.slug}</code></dd>
  <dt>MCP URL</dt><dd><code>${v.mcpUrl}</code></dd>
</dl>
${connectSection(v.connect, v.credential)}
<p><a class="button" href="${path('/endpoints', v.id)}">Done: go to the endpoint</a></p>
</section>`,
  );
}

/** The answer to a vend form sent a second time (a reload of the credential page, a double click). */
export function alreadyVendedPage(s: BoardSession, e: Endpoint): string {
  return page(
    { title: 'Already vended', session: s, nav: 'endpoints' },
    html`<section class="message">
<h1>Already vended</h1>
<p>This form already vended <code>${e.slug}</code>. Its credential was shown once, on the page that answered the first send, and Switchboard keeps only its hash.</p>
<p>Lost it? Revoke the endpoint and vend a new one.</p>
<p><a class="button" href="${path('/endpoints', e.id)}">Go to the endpoint</a></p>
</section>`,
  );
}

export function revokeConfirmPage(s: BoardSession, e: Endpoint): string {
  return page(
    { title: `Revoke ${e.agent_name}`, session: s, nav: 'endpoints' },
    html`<section class="message">
<h1>Revoke ${e.agent_name}?</h1>
<p>Endpoint <code>${e.slug}</code>: its credential stops working at once, its agent's sessions are closed on every instance, and its live todos are dead-lettered. This cannot be undone; vend a new endpoint to replace it.</p>
<form method="post" action="${path('/endpoints', e.id, 'revoke')}">${csrfField(s)}<button type="submit" class="danger" id="confirm-revoke">Revoke ${e.slug}</button> <a href="${path('/endpoints', e.id)}">Cancel</a></form>
</section>`,
  );
}

import { rfc3339 } from '../../domain/time.ts';
import { VERSION } from '../../lib/version.ts';
import type { BoardSession } from '../auth.ts';
import { Html, html, type Part } from '../html.ts';

/**
 * Every page of the board. Each function returns escaped HTML (see html.ts); no page carries an
 * inline script or style, so the board's Content-Security-Policy needs no exception. Regions
 * marked data-live are re-read in place when a live update arrives (see liveUpdater).
 */

// ---------------------------------------------------------------------------------------------
// Small pieces

export function time(d: Date | null | undefined, empty = 'never'): Html {
  if (!d) return html`<span class="muted">${empty}</span>`;
  const iso = rfc3339(d);
  return html`<time datetime="${iso}">${iso.replace('T', ' ').replace(/:\d\dZ$/, ' UTC')}</time>`;
}

/** When a presence changes: shown to the minute, rounded up so it never reads earlier than the change. */
export function untilTime(d: Date): Html {
  return time(new Date(Math.ceil(d.getTime() / 60_000) * 60_000));
}

export function ago(d: Date | null | undefined, now: Date, empty = 'never seen'): Html {
  if (!d) return html`<span class="muted">${empty}</span>`;
  const s = Math.max(0, Math.round((now.getTime() - d.getTime()) / 1000));
  const text = s < 60 ? `${s}s ago` : s < 3600 ? `${Math.floor(s / 60)}m ago` : s < 86_400 ? `${Math.floor(s / 3600)}h ago` : `${Math.floor(s / 86_400)}d ago`;
  return html`<time datetime="${rfc3339(d)}" title="${rfc3339(d)}">${text}</time>`;
}

export const chips = (items: readonly string[]) => html`<ul class="chips">${items.map((i) => html`<li>${i}</li>`)}</ul>`;

export const csrfField = (s: BoardSession) => html`<input type="hidden" name="csrf_token" value="${s.csrf}">`;

/** One inline error under a field, named after it. */
export interface FieldError {
  field: string;
  message: string;
}

export const fieldError = (err: FieldError | undefined, field: string, id: string) =>
  err && err.field === field ? html`<p class="error" id="${id}" role="alert">${err.message}</p>` : '';

// ---------------------------------------------------------------------------------------------
// Layout

export interface PageOptions {
  title: string;
  session?: BoardSession;
  /** The GET path whose data-live regions are re-read on a live update; absent on POST answers. */
  liveUrl?: string;
  nav?: 'endpoints' | 'todos';
}

/** The vendored htmx (src/board/static/vendor/); the version is in the name, so it may be cached for good. */
export const HTMX_ASSET = 'htmx-2.0.11.min.js';
/** The vendored uPlot (the board's charts), loaded by charts.js only on a page that has a chart. */
export const UPLOT_ASSET = 'uPlot-1.6.32.iife.min.js';
export const UPLOT_CSS_ASSET = 'uPlot-1.6.32.min.css';

/**
 * htmx's settings, read from a meta tag: nothing evaluated or injected (the CSP allows neither),
 * requests to this origin only, no page snapshots in sessionStorage (the vend answer holds a
 * credential), and refused forms (400, 409…) swapped in like any page so inline errors show.
 */
const HTMX_CONFIG = JSON.stringify({
  includeIndicatorStyles: false,
  // Settling copies these attributes in a second step; `style` there is an inline style the CSP refuses.
  attributesToSettle: ['class', 'width', 'height'],
  allowEval: false,
  allowScriptTags: false,
  selfRequestsOnly: true,
  historyCacheSize: 0,
  refreshOnHistoryMiss: true,
  responseHandling: [
    { code: '204', swap: false },
    { code: '...', swap: true },
  ],
});

/** The ids of the page's data-live regions, in the order the page renders them. */
function liveRegionIds(body: string): string[] {
  return [...body.matchAll(/<[a-z]+ [^>]*\bid="([^"]+)"[^>]*\sdata-live[\s>]/g)].map((m) => m[1]!);
}

/**
 * With JavaScript, a signed-in page is boosted by htmx (links and forms swap the page in place)
 * and its data-live regions are re-read, all in one request, when the human's event stream says
 * something changed (board.js turns the stream's events into `sb-changed`). Without JavaScript
 * every link and form works as plain HTML.
 */
function liveUpdater(url: string, body: string): Part {
  const ids = liveRegionIds(body);
  if (ids.length === 0) return '';
  return html`<div id="live-updates" hidden hx-get="${url}" hx-trigger="sb-changed from:body" hx-swap="none" hx-select-oob="${ids.map((id) => `#${id}`).join(',')}" hx-push-url="false"></div>`;
}

export function page(opts: PageOptions, body: Part): string {
  const s = opts.session;
  const navLink = (href: string, label: string, key: PageOptions['nav']) =>
    html`<a href="${href}"${opts.nav === key ? html` aria-current="page"` : ''}>${label}</a>`;
  const main = html`${body}`.value;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${opts.title} · Switchboard</title>
<link rel="stylesheet" href="/static/board.css">
${
  s
    ? html`<meta name="htmx-config" content="${HTMX_CONFIG}">
<script src="/static/${HTMX_ASSET}" defer></script>
<script src="/static/board.js" defer></script>
<script src="/static/charts.js" data-uplot-js="/static/${UPLOT_ASSET}" data-uplot-css="/static/${UPLOT_CSS_ASSET}" defer></script>`
    : ''
}
</head>
<body${s ? html` hx-boost="true"` : ''}>
<header class="top">
  <a class="brand" href="/">switchboard</a>
  ${
    s
      ? html`<nav aria-label="Board">${navLink('/', 'Endpoints', 'endpoints')}${navLink('/todos', 'Todos', 'todos')}</nav>
  <form class="signout" method="post" action="/logout">${csrfField(s)}<span class="muted">signed in as <strong>${s.human.handle}</strong></span> <button type="submit">Sign out</button></form>`
      : ''
  }
</header>
<main id="main">
${new Html(main)}
</main>
${s && opts.liveUrl ? liveUpdater(opts.liveUrl, main) : ''}
<footer class="muted">Switchboard ${VERSION}</footer>
</body>
</html>
`.value;
}

export function messagePage(opts: PageOptions, heading: string, text: Part, more: Part = ''): string {
  return page(opts, html`<section class="message"><h1>${heading}</h1><p>${text}</p>${more}</section>`);
}

import { SOURCE_TYPES } from '../../domain/webhook-source.ts';
import type { Endpoint } from '../../services/endpoints.ts';
import type { EventSummary } from '../../services/webhooks.ts';
import type { BoardSession } from '../auth.ts';
import { Html, html, path } from '../html.ts';
import { csrfField, fieldError, page, time, type FieldError } from './layout.ts';
import { dispositionCell } from './routing.ts';

// The endpoint page's webhooks and notify hooks: lists, create forms, the one-time secret pages
// and the confirm pages of rotate and delete. Secrets appear only on a create or rotate answer.

/** A webhook as the service lists it: never its secret, only a hint of its ingest URL. */
export interface WebhookView {
  webhook_id: string;
  source_type: string;
  trust_mode: string;
  target_queue: string;
  ingest_url_hint: string;
  created_at: string;
  rotated_at: string | null;
  last_delivery_at: string | null;
}

/** A notify hook as the service lists it (a query string in its URL redacted). */
export interface HookView {
  hook_id: string;
  url: string;
  queues: string[];
  ignore_presence: boolean;
  enabled: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
}

/** A refused create form, sent back with its values and the error under its field. */
export interface WebhookForm {
  error: FieldError;
  source_type?: string;
  target_queue?: string;
}
export interface HookForm {
  error: FieldError;
  url?: string;
  queues?: readonly string[];
  ignore_presence?: boolean;
}

const at = (iso: string | null, empty: string) => (iso ? time(new Date(iso)) : html`<span class="muted">${empty}</span>`);
const invalid = (err: FieldError | undefined, field: string) => (err?.field === field ? html` aria-invalid="true"` : '');

function webhookForm(e: Endpoint, s: BoardSession, f: WebhookForm | undefined): Html {
  const source = f?.source_type ?? 'github';
  const queue = f?.target_queue ?? e.scope_queues[0];
  return html`<form class="webhook-form" method="post" action="${path('/endpoints', e.id, 'webhooks')}">
  ${csrfField(s)}
  <label>Source <select name="source_type"${invalid(f?.error, 'source_type')}>${SOURCE_TYPES.map(
    (t) => html`<option value="${t}"${t === source ? html` selected` : ''}>${t}</option>`,
  )}</select></label>
  <label>Queue <select name="target_queue"${invalid(f?.error, 'target_queue')}>${e.scope_queues.map(
    (q) => html`<option value="${q}"${q === queue ? html` selected` : ''}>${q}</option>`,
  )}</select></label>
  <button type="submit" class="primary">Create webhook</button>
  ${fieldError(f?.error, 'source_type', 'webhook-source-error')}${fieldError(f?.error, 'target_queue', 'webhook-queue-error')}${fieldError(f?.error, 'form', 'webhook-error')}
</form>
<p class="hint"><code>github</code> and <code>gitea</code> webhooks are signed with a secret; <code>generic</code> ones trust their unguessable URL. The URL and secret are shown once.</p>`;
}

export function webhooksSection(e: Endpoint, s: BoardSession, webhooks: WebhookView[], events: EventSummary[], form?: WebhookForm): Html {
  const active = e.state === 'active';
  return html`<section class="webhooks" id="webhooks" data-live>
<h2>Webhooks</h2>
${
  webhooks.length
    ? html`<table><thead><tr><th>Source</th><th>Queue</th><th>Trust</th><th>Ingest URL</th><th>Last delivery</th><th></th></tr></thead><tbody>
${webhooks.map(
  (w) =>
    html`<tr class="webhook-row" id="webhook-${w.webhook_id}"><td>${w.source_type}</td><td>${w.target_queue}</td><td>${w.trust_mode}</td><td><code>${w.ingest_url_hint}</code></td><td>${at(
      w.last_delivery_at,
      'none yet',
    )}</td><td class="actions"><a class="rules-link" href="${path('/endpoints', e.id, 'webhooks', w.webhook_id, 'rules')}">Rules…</a> <a href="${path(
      '/endpoints',
      e.id,
      'webhooks',
      w.webhook_id,
      'rotate',
    )}">Rotate…</a> <a class="danger" href="${path('/endpoints', e.id, 'webhooks', w.webhook_id, 'delete')}">Delete…</a></td></tr>`,
)}
</tbody></table>`
    : html`<p class="empty">No webhooks.</p>`
}
${active ? webhookForm(e, s, form) : ''}
${
  events.length
    ? html`<h3>Last deliveries</h3><table class="deliveries"><thead><tr><th>Received</th><th>Source</th><th>Event</th><th>Trust</th><th>Became</th><th>Todo</th></tr></thead><tbody>
${events.map(
  (ev) =>
    html`<tr class="delivery-row" id="event-${ev.id}"><td>${time(ev.received_at)}</td><td>${ev.source}</td><td>${ev.event_type ?? ''}</td><td>${ev.trust_mode}${
      ev.verified ? ' · verified' : ''
    }</td><td class="became">${dispositionCell(ev)}</td><td>${
      ev.todo_id ? html`<a href="${path('/todos', ev.todo_id)}"><code>${ev.todo_id.slice(0, 11)}…</code></a>` : ''
    }</td></tr>`,
)}
</tbody></table>`
    : ''
}
</section>`;
}

function hookForm(e: Endpoint, s: BoardSession, f: HookForm | undefined): Html {
  const chosen = f?.queues ?? [];
  return html`<form class="hook-form" method="post" action="${path('/endpoints', e.id, 'hooks')}">
  ${csrfField(s)}
  <label>URL <input type="text" name="url" value="${f?.url ?? ''}" placeholder="https://ci.example.com/switchboard-hook" autocomplete="off"${invalid(f?.error, 'url')}></label>
  <fieldset><legend>Queues <span class="muted">(none ticked: all of the endpoint's)</span></legend>
  ${e.scope_queues.map((q) => html`<label class="check"><input type="checkbox" name="queues" value="${q}"${chosen.includes(q) ? html` checked` : ''}> ${q}</label>`)}
  </fieldset>
  <label class="check"><input type="checkbox" name="ignore_presence" value="true"${f?.ignore_presence ? html` checked` : ''}> call it even while the endpoint is out</label>
  <button type="submit" class="primary">Create notify hook</button>
  ${fieldError(f?.error, 'url', 'hook-url-error')}${fieldError(f?.error, 'queues', 'hook-queues-error')}${fieldError(f?.error, 'ignore_presence', 'hook-presence-error')}${fieldError(f?.error, 'form', 'hook-error')}
</form>`;
}

function health(h: HookView): Html {
  const last = h.last_attempt_at
    ? html`last call ${time(new Date(h.last_attempt_at))}${h.last_status !== null ? html`: ${h.last_status}` : ''}${h.last_error ? html` <span class="muted">${h.last_error}</span>` : ''}`
    : html`<span class="muted">not called yet</span>`;
  const state = h.enabled ? html`<span class="badge state-active">enabled</span>` : html`<span class="badge state-revoked">disabled</span> ${h.disabled_reason ?? ''}`;
  return html`${state}${h.consecutive_failures > 0 ? html` · ${h.consecutive_failures} failing` : ''} · ${last}`;
}

export function notifyHooksSection(e: Endpoint, s: BoardSession, list: { hooks: HookView[]; ceiling: { max: number; used: number } }, form?: HookForm): Html {
  const active = e.state === 'active';
  return html`<section class="hooks" id="notify-hooks" data-live>
<h2>Notify hooks <span class="muted">(${list.ceiling.used} of ${list.ceiling.max})</span></h2>
<p class="muted">An HTTPS call that tells a consumer with no live session that work is waiting; signed with a secret shown once.</p>
${
  list.hooks.length
    ? html`<table><thead><tr><th>URL</th><th>Queues</th><th>Presence</th><th>Health</th><th></th></tr></thead><tbody>
${list.hooks.map(
  (h) =>
    html`<tr class="hook-row" id="hook-${h.hook_id}"><td><code>${h.url}</code></td><td>${h.queues.length ? h.queues.join(', ') : html`<span class="muted">all</span>`}</td><td>${
      h.ignore_presence ? 'ignores it' : 'waits while out'
    }</td><td>${health(h)}</td><td class="actions"><a href="${path('/endpoints', e.id, 'hooks', h.hook_id, 'rotate')}">Rotate…</a> <a class="danger" href="${path('/endpoints', e.id, 'hooks', h.hook_id, 'delete')}">Delete…</a></td></tr>`,
)}
</tbody></table>`
    : html`<p class="empty">No notify hooks.</p>`
}
${active ? hookForm(e, s, form) : ''}
</section>`;
}

// ---------------------------------------------------------------------------------------------
// The one-time answers and the confirm pages

export function mintedWebhookPage(s: BoardSession, e: Endpoint, w: WebhookView & { ingest_url: string; signing_secret?: string }, how: 'created' | 'rotated'): string {
  return page(
    { title: `Webhook ${how}`, session: s, nav: 'endpoints' },
    html`<section class="vended minted">
<h1>Webhook ${how}: ${w.source_type} into ${w.target_queue}</h1>
<p class="warn" role="status">Copy ${w.signing_secret ? 'the URL and the secret' : 'the URL'} now. ${w.signing_secret ? 'They are' : 'It is'} shown this once; Switchboard keeps only ${
      w.signing_secret ? 'a hash of the URL and the sealed secret' : 'its hash'
    }.${how === 'rotated' ? ' The previous URL and secret stopped working.' : ''}</p>
<dl class="facts">
  <dt>Endpoint</dt><dd><code>${e.slug}</code></dd>
  <dt>Ingest URL</dt><dd><code id="ingest-url" class="secret">${w.ingest_url}</code></dd>
  ${w.signing_secret ? html`<dt>Signing secret</dt><dd><code id="signing-secret" class="secret">${w.signing_secret}</code></dd>` : ''}
</dl>
<p>${
      w.signing_secret
        ? html`At the forge, set the payload URL to the ingest URL, the content type to <code>application/json</code> and the secret to the signing secret.`
        : html`Have the producer <code>POST</code> JSON to the ingest URL.`
    }</p>
<p><a class="button" href="${path('/endpoints', e.id)}#webhooks">Done: back to the endpoint</a></p>
</section>`,
  );
}

export function mintedHookPage(s: BoardSession, e: Endpoint, h: HookView & { signing_secret: string }, how: 'created' | 'rotated'): string {
  return page(
    { title: `Notify hook ${how}`, session: s, nav: 'endpoints' },
    html`<section class="vended minted">
<h1>Notify hook ${how}</h1>
<p class="warn" role="status">Copy the signing secret now. It is shown this once.${how === 'rotated' ? ' The previous secret keeps signing alongside it for 24 hours.' : ''}</p>
<dl class="facts">
  <dt>Endpoint</dt><dd><code>${e.slug}</code></dd>
  <dt>URL</dt><dd><code>${h.url}</code></dd>
  <dt>Signing secret</dt><dd><code id="signing-secret" class="secret">${h.signing_secret}</code></dd>
</dl>
<p>Calls are signed the Standard Webhooks way (<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>).</p>
<p><a class="button" href="${path('/endpoints', e.id)}#notify-hooks">Done: back to the endpoint</a></p>
</section>`,
  );
}

export interface ConfirmView {
  title: string;
  text: Html | string;
  action: string;
  button: string;
  cancel: string;
  danger?: boolean;
}

/** A GET page whose one form does the change: destructive actions are never one click from a list. */
export function confirmPage(s: BoardSession, c: ConfirmView): string {
  return page(
    { title: c.title, session: s, nav: 'endpoints' },
    html`<section class="message">
<h1>${c.title}</h1>
<p>${c.text}</p>
<form method="post" action="${c.action}">${csrfField(s)}<button type="submit" id="confirm-action"${c.danger ? html` class="danger"` : ''}>${c.button}</button> <a href="${c.cancel}">Cancel</a></form>
</section>`,
  );
}

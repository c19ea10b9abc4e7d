import type { RouteTrace } from '../../domain/routing/route.ts';
import { ENVELOPE_VARIABLES } from '../../domain/routing/expression.ts';
import type { Endpoint } from '../../services/endpoints.ts';
import type { DryRunRow } from '../../services/webhook-routing.ts';
import type { BoardSession } from '../auth.ts';
import { Html, html, join, path, withQuery } from '../html.ts';
import { csrfField, page, time, type FieldError } from './layout.ts';
import { deliveriesChart } from './charts.ts';
import type { HistoryRange } from '../../domain/history.ts';

// Webhook routing on the board (issue 37): the rules page of one webhook (a textarea holding the
// rules write as JSON, Save and Try, the dry run as a table), and the words for a routing trace
// shared by the deliveries list and the todo page.

// ---------------------------------------------------------------------------------------------
// A trace in words

const isTrace = (t: unknown): t is RouteTrace => !!t && typeof t === 'object' && typeof (t as RouteTrace).stage === 'string' && typeof (t as RouteTrace).action === 'string';

/** "rule 1 (reviews for the bot)" or "default": the part of the rules that decided. */
export function deciderText(t: RouteTrace): string {
  if (t.stage === 'default') return 'default';
  if (t.rule_index === null) return t.rule_name ? `rule ${t.rule_name}` : 'the rules';
  return `rule ${t.rule_index}${t.rule_name ? ` (${t.rule_name})` : ''}`;
}

/** What the decision did: "queue reviews, once", "fan-out to a, b in queue reviews", "drop", "fault (error): …". */
export function actionText(t: RouteTrace): string {
  switch (t.action) {
    case 'drop':
      return 'drop';
    case 'fault':
      return `fault${t.cause ? ` (${t.cause})` : ''}${t.message ? `: ${t.message}` : ''}`;
    case 'fanout':
      return `fan-out to ${(t.endpoints ?? []).join(', ')} in queue ${t.queue ?? '?'}${t.once ? ', once' : ''}`;
    default:
      return t.queue ? `queue ${t.queue}${t.once ? ', once' : ''}` : "the webhook's target queue";
  }
}

/** Why a todo or event is what it is, in one line; null for no trace (an operator's push, an event older than routing). */
export function traceText(trace: unknown): string | null {
  if (!isTrace(trace)) return null;
  return `${deciderText(trace)}: ${actionText(trace)}`;
}

/** The rule a trace names, for the deliveries list: "rule 0 (drop CI noise)", "default", or nothing. */
export function traceRule(trace: unknown): string | null {
  return isTrace(trace) ? deciderText(trace) : null;
}

/** " by rule 0 (drop CI noise)", " by default". */
const byRule = (t: RouteTrace) => html` <span class="muted">by</span> <span class="rule-name">${deciderText(t)}</span>`;

/** What an event became, as the deliveries list shows it: a badge, and the rule (and a fault's cause and message). */
export function dispositionCell(ev: { disposition: string | null; routing: unknown; todo_id: string | null }): Html {
  // Events from before routing kept no disposition: a todo means routed, none a ping's record (as GET /api/v1/events says).
  const d = ev.disposition ?? (ev.todo_id ? 'routed' : 'recorded');
  const t = isTrace(ev.routing) ? ev.routing : null;
  const fault = d === 'faulted' && t ? html` <span class="fault-detail">${t.cause ?? 'error'}: ${t.message ?? ''}</span>` : '';
  return html`<span class="badge disposition disposition-${d}">${d}</span>${t ? byRule(t) : ''}${fault}`;
}

// ---------------------------------------------------------------------------------------------
// The dry run

const wouldKey = (w: DryRunRow['would']) =>
  w.action === 'fanout' ? `fanout:${w.queue}:${[...w.endpoints].sort().join(',')}` : w.action === 'queue' ? `queue:${w.queue}` : w.action;

/** What an event became, in the terms `would` uses: from its trace, else from its disposition and todos. */
function didKey(d: DryRunRow['did']): string {
  if (d.disposition === 'dropped') return 'drop';
  if (d.disposition === 'faulted') return 'fault';
  if (isTrace(d.trace) && (d.trace.action === 'queue' || d.trace.action === 'fanout') && d.trace.queue) {
    return d.trace.action === 'fanout' ? `fanout:${d.trace.queue}:${[...(d.trace.endpoints ?? [])].sort().join(',')}` : `queue:${d.trace.queue}`;
  }
  const slugs = [...new Set(d.todos.map((t) => t.slug))].sort();
  if (slugs.length > 1) return `fanout:${d.todos[0]!.queue}:${slugs.join(',')}`;
  return d.todos.length ? `queue:${d.todos[0]!.queue}` : 'none';
}

/** Recorded events (pings and the like) never reach the rules: whatever they would do, they stay recorded. */
const notRouted = (r: DryRunRow) => !r.routed;

/** True when the rules replayed would make of the event something other than what it became. */
export const differs = (r: DryRunRow): boolean => !notRouted(r) && wouldKey(r.would) !== didKey(r.did);

function wouldCell(r: DryRunRow): Html {
  if (notRouted(r)) return html`<span class="muted">not routed (recorded only)</span>`;
  return html`<span class="would-action">${actionText(r.would.trace)}</span>${byRule(r.would.trace)}`;
}

function didCell(r: DryRunRow): Html {
  const d = r.did.disposition ?? (r.did.todos.length ? 'routed' : 'recorded');
  const todos = r.did.todos.length
    ? html` <span class="did-todos">${r.did.todos.length === 1 ? 'a todo' : `${r.did.todos.length} todos`} in ${join(
        r.did.todos.map((t) => `${t.queue} of ${t.slug}`),
        ', ',
      )}</span>`
    : '';
  const rule = isTrace(r.did.trace) ? byRule(r.did.trace) : '';
  const fault = d === 'faulted' && isTrace(r.did.trace) ? html` <span class="fault-detail">${r.did.trace.cause ?? 'error'}: ${r.did.trace.message ?? ''}</span>` : '';
  return html`<span class="badge disposition disposition-${d}">${d}</span>${todos}${rule}${fault}`;
}

/** One line: how many events were replayed, what the rules make of them, and how many differ. */
export function dryRunSummary(rows: readonly DryRunRow[], saved: boolean): string {
  const head = saved ? 'Saved.' : 'Nothing saved.';
  if (rows.length === 0) return `${head} No stored deliveries to replay yet: the rules will meet their first delivery live.`;
  const routed = rows.filter((r) => !notRouted(r));
  const count = (kind: (a: DryRunRow['would']['action']) => boolean) => routed.filter((r) => kind(r.would.action)).length;
  const todos = count((a) => a === 'queue' || a === 'fanout');
  const drops = count((a) => a === 'drop');
  const faults = count((a) => a === 'fault');
  const n = rows.filter(differs).length;
  const skipped = rows.length - routed.length;
  const many = rows.length === 1 ? 'latest delivery' : `${rows.length} latest deliveries`;
  return `${head} The ${many} replayed: ${todos} would make todos, ${drops} would be dropped, ${faults} would fault${
    skipped ? ` (${skipped} recorded only, not routed)` : ''
  }; ${n === 0 ? 'none differs from what it became' : n === 1 ? '1 differs from what it became' : `${n} differ from what they became`}.`;
}

export function dryRunSection(rows: readonly DryRunRow[], saved: boolean): Html {
  return html`<section class="dry-run" id="dry-run">
<h2>Dry run <span class="muted">(${saved ? 'the saved rules' : 'these rules, not saved'})</span></h2>
<p class="dry-run-summary" id="dry-run-summary" role="status">${dryRunSummary(rows, saved)}</p>
${
  rows.length
    ? html`<table class="dry-run-table"><thead><tr><th>Event id</th><th>Event</th><th>Received</th><th>Would become</th><th>What it became</th></tr></thead><tbody>
${rows.map((r) => {
  const diff = differs(r);
  return html`<tr class="dry-run-row${diff ? ' differs' : ''}" id="dry-run-${r.event_id}"><td><code>${r.event_id}</code>${
    diff ? html` <span class="badge differs-badge">differs</span>` : ''
  }</td><td>${r.event ?? ''}</td><td>${r.received_at ? time(new Date(r.received_at)) : ''}</td><td>${wouldCell(r)}</td><td>${didCell(r)}</td></tr>`;
})}
</tbody></table>`
    : ''
}
</section>`;
}

// ---------------------------------------------------------------------------------------------
// The rules page

export interface RulesWebhook {
  webhook_id: string;
  source_type: string;
  target_queue: string;
}

export interface RulesPageView {
  endpoint: Endpoint;
  webhook: RulesWebhook;
  /** The textarea's text: the stored rules formatted, or what was sent. */
  text: string;
  error?: FieldError & { rule?: string };
  dryRun?: { rows: readonly DryRunRow[]; saved: boolean };
  /** The webhook's deliveries by outcome over `range` (the chart under the rules). */
  deliveries?: { range: HistoryRange; step_seconds: number; from: string; outcomes: Record<string, number[]> };
  /** A plain GET of the page: its chart's table is re-read on a live update. */
  live?: boolean;
}

/** An object's keys in the order a person writes them (PostgreSQL's jsonb keeps shorter keys first), the rest after. */
function ordered(v: unknown, first: readonly string[]): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return v;
  const o = v as Record<string, unknown>;
  return Object.fromEntries([...first.filter((k) => k in o), ...Object.keys(o).filter((k) => !first.includes(k))].map((k) => [k, o[k]]));
}
const ACTION_KEYS = ['queue', 'endpoints', 'once', 'drop'];

/** The stored rules as the textarea shows them: the rules write that would store them again. */
export function rulesText(v: { rules: unknown; params: unknown; default_action: unknown }): string {
  const rules = Array.isArray(v.rules)
    ? v.rules.map((r) => {
        const rule = ordered(r, ['name', 'when', 'action']) as Record<string, unknown>;
        return 'action' in rule ? { ...rule, action: ordered(rule.action, ACTION_KEYS) } : rule;
      })
    : v.rules;
  return JSON.stringify({ rules, params: v.params, default_action: ordered(v.default_action, ACTION_KEYS) }, null, 2);
}

const EXAMPLE = JSON.stringify(
  {
    rules: [
      { name: 'drop CI noise', when: 'event in ["check_run", "check_suite", "status"]', action: { drop: true } },
      { name: 'reviews for the bot', when: 'event == "pull_request" && requested_reviewers.exists(r, r == params.bot)', action: { queue: 'reviews', once: true } },
    ],
    params: { bot: 'hubot' },
    default_action: null,
  },
  null,
  2,
);

export function rulesPage(s: BoardSession, v: RulesPageView): string {
  const e = v.endpoint;
  const w = v.webhook;
  const active = e.state === 'active';
  const base = path('/endpoints', e.id, 'webhooks', w.webhook_id, 'rules');
  const err = v.error;
  return page(
    { title: `Rules of a ${w.source_type} webhook`, session: s, nav: 'endpoints', liveUrl: v.live && v.deliveries ? withQuery(base, { range: v.deliveries.range }) : undefined },
    html`<p class="crumbs"><a href="${path('/endpoints', e.id)}"><code>${e.slug}</code></a> / <a href="${path('/endpoints', e.id)}#webhooks">webhooks</a> / <code>${w.webhook_id}</code> / rules</p>
<section class="rules" id="rules">
<h1>Routing rules: ${w.source_type} webhook into ${w.target_queue}</h1>
<p class="hint">The first rule whose <code>when</code> is true decides; if none matches, the default action does (<code>null</code>: a todo in the webhook's target queue, <code>${w.target_queue}</code>). An action is <code>{"queue": …}</code> (with <code>"once": true</code> for one live todo per issue or pull request, <code>"endpoints": [slugs]</code> to fan out to your other endpoints) or <code>{"drop": true}</code>. A rule that errors makes the delivery fault: no todo, and the producer is told to retry.</p>
<p class="hint"><code>when</code> is a CEL expression over ${join(
      ENVELOPE_VARIABLES.map((n) => html`<code>${n}</code>`),
      ', ',
    )}. A field left out of the JSON keeps what is stored; <code>null</code> clears it.</p>
${
  active
    ? html`<form class="rules-form" method="post" action="${base}">
  ${csrfField(s)}
  <label class="block" for="rules-text">Rules (JSON)</label>
  <textarea id="rules-text" name="rules" rows="${Math.min(40, Math.max(12, v.text.split('\n').length + 2))}" spellcheck="false" autocomplete="off"${
    err ? html` aria-invalid="true" aria-describedby="rules-error"` : ''
  }>${v.text}</textarea>
  ${err ? html`<p class="error" id="rules-error" role="alert">${err.message}</p>${err.rule ? html`<p class="hint" id="rules-error-rule">In ${err.rule}.</p>` : ''}` : ''}
  <div class="rules-buttons">
    <button type="submit" class="primary" id="rules-save">Save</button>
    <button type="submit" id="rules-try" formaction="${base}/test">Try</button>
    <span class="hint">Both replay the rules over the webhook's latest deliveries; Try saves nothing.</span>
  </div>
</form>`
    : html`<p class="warn" role="status">This endpoint is revoked: its rules are read-only.</p>
<pre class="json" id="rules-text">${v.text}</pre>`
}
<details class="rules-example"><summary>An example</summary><pre class="json">${EXAMPLE}</pre></details>
</section>
${v.dryRun ? dryRunSection(v.dryRun.rows, v.dryRun.saved) : ''}
${v.deliveries ? deliveriesChart(base, w.webhook_id, v.deliveries, v.deliveries.range) : ''}
<p><a href="${path('/endpoints', e.id)}#webhooks">Back to the endpoint</a></p>`,
  );
}

import type { EffectivePresence } from '../../domain/presence/index.ts';
import type { ClaimingClient, HumanTodo, HumanTodoRow } from '../../services/board-reads.ts';
import { TODO_STATES, isDead, type TodoState } from '../../services/todos.ts';
import type { BoardSession } from '../auth.ts';
import { Html, html, path, withQuery, type Part } from '../html.ts';
import { heldText } from './endpoints.ts';
import { ago, csrfField, page, time } from './layout.ts';
import { traceText } from './routing.ts';
import { queueCharts } from './charts.ts';
import type { HistoryPoint } from '../../services/history.ts';
import type { HistoryRange } from '../../domain/history.ts';

// ---------------------------------------------------------------------------------------------
// Todos

export interface TodoListView {
  rows: (HumanTodoRow & { held: EffectivePresence | null })[];
  endpoint?: { id: string; slug: string };
  state?: TodoState;
  queue?: string;
  /** Counts by state within the chosen endpoint and queue. */
  stateCounts: Record<string, number>;
  /** Counts by endpoint within the chosen state. */
  endpointCounts: { id: string; slug: string; n: number }[];
  /** Counts by (endpoint, queue) within the chosen state and endpoint: a queue is always one endpoint's. */
  queueCounts: { endpoint_id: string; endpoint_slug: string; queue: string; n: number }[];
  limit: number;
  /** The queues' history over the chosen range (the charts), within the endpoint and queue filters. */
  history?: { range: HistoryRange; step_seconds: number; from: string; queues: Record<string, HistoryPoint[]> };
}

/**
 * Who holds or held a todo: the claiming MCP session's client (its id on hover) while the session
 * row lasts, else the session id, else the stored owner.
 */
export function ownerOf(t: Pick<HumanTodoRow, 'owner' | 'claimed_session_id'> & ClaimingClient): Html {
  if (t.claimed_session_id && t.claimed_client_name) {
    const client = `${t.claimed_client_name} ${t.claimed_client_version ?? ''}`.trim();
    return html`<span class="owner" title="session ${t.claimed_session_id}">${client}</span>`;
  }
  if (t.claimed_session_id) return html`<code class="owner" title="the session has ended">${t.claimed_session_id}</code>`;
  if (t.owner) return html`<code class="owner">${t.owner}</code>`;
  return html`<span class="muted">none</span>`;
}

export function todosPage(s: BoardSession, v: TodoListView, now: Date, liveUrl: string): string {
  const current = (on: boolean) => (on ? html` aria-current="true"` : '');
  const pill = (href: string, on: boolean, label: Part, n: number) => html`<li><a href="${href}"${current(on)}>${label} <span class="count">${n}</span></a></li>`;
  const endpointId = v.endpoint?.id;
  const allInScope = Object.values(v.stateCounts).reduce((a, b) => a + b, 0);
  const allEndpoints = v.endpointCounts.reduce((a, c) => a + c.n, 0);
  const allQueues = v.queueCounts.reduce((a, c) => a + c.n, 0);
  return page(
    { title: 'Todos', session: s, liveUrl, nav: 'todos' },
    html`<h1>Todos${v.endpoint ? html` of <code>${v.endpoint.slug}</code>` : ''}</h1>
${v.history ? queueCharts(v.history, v.history.range, { endpoint: endpointId, state: v.state, queue: v.queue }) : ''}
<div id="todos" data-live>
<nav class="filters" aria-label="Filter by endpoint"><ul class="pills">
${pill(withQuery('/todos', { state: v.state }), !endpointId, 'every endpoint', allEndpoints)}
${v.endpointCounts.map((c) => pill(withQuery('/todos', { endpoint: c.id, state: v.state }), endpointId === c.id, html`<code>${c.slug}</code>`, c.n))}
</ul></nav>
<nav class="filters" aria-label="Filter by state"><ul class="pills">
${pill(withQuery('/todos', { endpoint: endpointId, queue: v.queue }), !v.state, 'all', allInScope)}
${TODO_STATES.map((st) => pill(withQuery('/todos', { endpoint: endpointId, state: st, queue: v.queue }), v.state === st, st, v.stateCounts[st] ?? 0))}
</ul></nav>
<nav class="filters" aria-label="Filter by queue"><ul class="pills">
${pill(withQuery('/todos', { endpoint: endpointId, state: v.state }), !v.queue, 'every queue', allQueues)}
${v.queueCounts.map((c) =>
  pill(
    withQuery('/todos', { endpoint: c.endpoint_id, state: v.state, queue: c.queue }),
    v.queue === c.queue && endpointId === c.endpoint_id,
    endpointId ? c.queue : html`<code>${c.endpoint_slug}</code> / ${c.queue}`,
    c.n,
  ),
)}
</ul></nav>
${
  v.rows.length
    ? html`<table class="todos"><thead><tr><th>Title</th><th>Endpoint</th><th>Queue</th><th>State</th><th>Attempt</th><th>Created</th><th></th></tr></thead><tbody>
${v.rows.map(
  (t) => html`<tr class="todo-row state-${t.state}" id="todo-${t.id}">
<td><a href="${path('/todos', t.id)}">${t.title}</a></td>
<td><a href="${path('/endpoints', t.endpoint_id)}"><code>${t.endpoint_slug}</code></a></td>
<td>${t.queue}</td>
<td>${stateBadge(t)}${t.held ? html` <span class="held">${heldText(t.held)}</span>` : ''}${
    t.state === 'claimed' ? html` <span class="muted">by</span> ${ownerOf(t)}` : ''
  }</td>
<td>${t.attempt}/${t.max_attempts}</td>
<td>${ago(t.created_at, now, '')}</td>
<td class="actions">${todoActions(s, t, liveUrl)}</td>
</tr>`,
)}
</tbody></table>
${v.rows.length >= v.limit ? html`<p class="hint">Showing the newest ${v.limit}.</p>` : ''}`
    : html`<p class="empty">No todos${v.state || v.queue || v.endpoint ? ' match this filter' : ' yet'}.</p>`
}
</div>`,
  );
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2) ?? 'null';

export interface TodoPageOptions {
  /** The push that led here matched a live todo by its key: nothing new was made. */
  existing?: boolean;
  /** A cancel or retry refused for the todo's state (409). */
  refused?: string;
}

const CANCELABLE: readonly TodoState[] = ['pending', 'claimed', 'failed'];

/**
 * Cancel (pending, claimed or failed) and Retry (failed: a dead letter or one waiting for its
 * retry), as POST forms with the CSRF token; `back` is the list to return to, else the todo's page.
 */
function todoActions(s: BoardSession, t: Pick<HumanTodoRow, 'id' | 'state'>, back?: string): Html {
  const form = (action: 'cancel' | 'retry', label: string, cls: string) =>
    html`<form class="inline todo-action" method="post" action="${path('/todos', t.id, action)}">${csrfField(s)}${
      back ? html`<input type="hidden" name="return" value="${back}">` : ''
    }<button type="submit" class="${cls}">${label}</button></form>`;
  return html`${t.state === 'failed' ? form('retry', 'Retry', 'retry') : ''}${CANCELABLE.includes(t.state) ? form('cancel', 'Cancel', 'cancel danger') : ''}`;
}

/** The state badge, with "dead letter" for a failed todo with no retry left. */
const stateBadge = (t: Pick<HumanTodoRow, 'state' | 'next_retry_at'>) =>
  html`<span class="badge state-${t.state}">${t.state}</span>${isDead(t) ? html` <span class="badge dead">dead letter</span>` : ''}`;

export function todoPage(s: BoardSession, t: HumanTodo, held: EffectivePresence | null, now: Date, opts: TodoPageOptions = {}): string {
  const row = (label: string, value: Part) => html`<dt>${label}</dt><dd>${value}</dd>`;
  // The routing trace of the delivery that made it; an operator's push has none.
  const why = traceText(t.routing);
  return page(
    { title: t.title, session: s, liveUrl: opts.refused ? undefined : path('/todos', t.id), nav: 'todos' },
    html`<p class="crumbs"><a href="/todos">Todos</a> / <code>${t.id}</code></p>
${opts.existing ? html`<p class="warn" role="status" id="push-existing">Already live: a todo with this key exists, so nothing new was created. This is that todo.</p>` : ''}
<div id="todo" data-live>
<h1 class="todo-title">${t.title}</h1>
<p>${stateBadge(t)}${held ? html` <span class="held">${heldText(held)}</span>` : ''}</p>
${opts.refused ? html`<p class="error" role="alert" id="todo-refused">${opts.refused}</p>` : ''}
<div class="todo-actions">${todoActions(s, t)}</div>
<dl class="facts lifecycle">
${row('Endpoint', html`<a href="${path('/endpoints', t.endpoint_id)}"><code>${t.endpoint_slug}</code></a> (${t.agent_name})`)}
${row('Queue', t.queue)}
${row('Source', t.source ?? '')}
${why ? row('Why', html`<span id="todo-why">${why}</span>`) : ''}
${row('Kind', t.kind ?? '')}
${row('Created', html`${time(t.created_at)} (${ago(t.created_at, now, '')})`)}
${row('Claimed', time(t.claimed_at, 'not yet'))}
${row('Owner', ownerOf(t))}
${row('Lease expires', t.state === 'claimed' ? time(t.lease_expires_at, 'no lease') : html`<span class="muted">no lease</span>`)}
${row('Completed', time(t.completed_at, 'not yet'))}
${row('Attempt', `${t.attempt} of ${t.max_attempts}`)}
${row('Next retry', time(t.next_retry_at, 'none'))}
${row('Updated', time(t.updated_at))}
${row('Idempotency key', t.idempotency_key ? html`<code>${t.idempotency_key}</code>` : html`<span class="muted">none</span>`)}
</dl>
<h2>Payload <span class="muted">(${t.payload_size} bytes)</span></h2>
<pre class="json" id="payload">${pretty(t.payload)}</pre>
${t.result === null || t.result === undefined ? '' : html`<h2>Result</h2><pre class="json" id="result">${pretty(t.result)}</pre>`}
</div>`,
  );
}

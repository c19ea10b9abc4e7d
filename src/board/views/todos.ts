import type { EffectivePresence } from '../../domain/presence/index.ts';
import type { HumanTodo, HumanTodoRow } from '../../services/board-reads.ts';
import { TODO_STATES, type TodoState } from '../../services/todos.ts';
import type { BoardSession } from '../auth.ts';
import { html, path, withQuery, type Part } from '../html.ts';
import { heldText } from './endpoints.ts';
import { ago, page, time } from './layout.ts';

// ---------------------------------------------------------------------------------------------
// Todos

export interface TodoListView {
  rows: (HumanTodoRow & { held: EffectivePresence | null })[];
  state?: TodoState;
  queue?: string;
  /** Counts by state within the chosen queue, and by queue within the chosen state. */
  stateCounts: Record<string, number>;
  queueCounts: [string, number][];
  total: number;
  limit: number;
}

export function todosPage(s: BoardSession, v: TodoListView, now: Date, liveUrl: string): string {
  const stateLink = (st: TodoState | undefined, label: string, n: number) =>
    html`<li><a href="${withQuery('/todos', { state: st, queue: v.queue })}"${v.state === st ? html` aria-current="true"` : ''}>${label} <span class="count">${n}</span></a></li>`;
  const queueLink = (q: string | undefined, label: string, n: number) =>
    html`<li><a href="${withQuery('/todos', { state: v.state, queue: q })}"${v.queue === q ? html` aria-current="true"` : ''}>${label} <span class="count">${n}</span></a></li>`;
  const allInQueue = Object.values(v.stateCounts).reduce((a, b) => a + b, 0);
  const allInState = v.queueCounts.reduce((a, [, n]) => a + n, 0);
  return page(
    { title: 'Todos', session: s, liveUrl, nav: 'todos' },
    html`<h1>Todos</h1>
<div id="todos" data-live>
<nav class="filters" aria-label="Filter by state"><ul class="pills">
${stateLink(undefined, 'all', allInQueue)}
${TODO_STATES.map((st) => stateLink(st, st, v.stateCounts[st] ?? 0))}
</ul></nav>
<nav class="filters" aria-label="Filter by queue"><ul class="pills">
${queueLink(undefined, 'every queue', allInState)}
${v.queueCounts.map(([q, n]) => queueLink(q, q, n))}
</ul></nav>
${
  v.rows.length
    ? html`<table class="todos"><thead><tr><th>Title</th><th>Endpoint</th><th>Queue</th><th>State</th><th>Attempt</th><th>Created</th></tr></thead><tbody>
${v.rows.map(
  (t) => html`<tr class="todo-row state-${t.state}" id="todo-${t.id}">
<td><a href="${path('/todos', t.id)}">${t.title}</a></td>
<td><a href="${path('/endpoints', t.endpoint_id)}"><code>${t.endpoint_slug}</code></a></td>
<td>${t.queue}</td>
<td><span class="badge state-${t.state}">${t.state}</span>${t.held ? html` <span class="held">${heldText(t.held)}</span>` : ''}</td>
<td>${t.attempt}/${t.max_attempts}</td>
<td>${ago(t.created_at, now, '')}</td>
</tr>`,
)}
</tbody></table>
${v.rows.length >= v.limit ? html`<p class="hint">Showing the newest ${v.limit}.</p>` : ''}`
    : html`<p class="empty">No todos${v.state || v.queue ? ' match this filter' : ' yet'}.</p>`
}
</div>`,
  );
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2) ?? 'null';

export function todoPage(s: BoardSession, t: HumanTodo, held: EffectivePresence | null, now: Date): string {
  const row = (label: string, value: Part) => html`<dt>${label}</dt><dd>${value}</dd>`;
  return page(
    { title: t.title, session: s, liveUrl: path('/todos', t.id), nav: 'todos' },
    html`<p class="crumbs"><a href="/todos">Todos</a> / <code>${t.id}</code></p>
<div id="todo" data-live>
<h1 class="todo-title">${t.title}</h1>
<p><span class="badge state-${t.state}">${t.state}</span>${held ? html` <span class="held">${heldText(held)}</span>` : ''}</p>
<dl class="facts lifecycle">
${row('Endpoint', html`<a href="${path('/endpoints', t.endpoint_id)}"><code>${t.endpoint_slug}</code></a> (${t.agent_name})`)}
${row('Queue', t.queue)}
${row('Source', t.source ?? '')}
${row('Kind', t.kind ?? '')}
${row('Created', html`${time(t.created_at)} (${ago(t.created_at, now, '')})`)}
${row('Claimed', time(t.claimed_at, 'not yet'))}
${row('Owner', t.owner ?? html`<span class="muted">none</span>`)}
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

import { CHANGE_REASON_WORDS } from '../../domain/presence-words.ts';
import type { PresenceChangeRow } from '../../services/presence-history.ts';
import { Html, html } from '../html.ts';
import { time, untilTime } from './layout.ts';

/** An endpoint's presence changes over the board's week (services/presence-history.ts presenceWeek). */
export interface PresenceWeek {
  changes: PresenceChangeRow[];
  /** The last change before the week: what the week started with (null: none kept). */
  before: PresenceChangeRow | null;
}

/** Who changed it, for a person: its agent, the clock (a boundary or an override running out), or the human's handle. */
function changedBy(c: PresenceChangeRow): Html {
  if (c.by === 'agent') return html`its agent`;
  if (c.by === 'shift') return html`<span class="muted">the clock</span>`;
  return c.by_handle ? html`${c.by_handle}` : html`<span class="muted">${c.by}</span>`;
}

/**
 * "Presence this week": each change of the endpoint's effective presence over the last 7 days,
 * newest first, as a plain table (no script). Presence history is kept 30 days; the API
 * (GET .../presence/history) and `switchboard endpoint presence REF --history` reach further.
 */
export function presenceWeekSection(week: PresenceWeek): Html {
  const { changes, before } = week;
  const start = before
    ? html`<p class="muted presence-week-start">The week began <strong>${before.to}</strong> (since ${time(before.at)}).</p>`
    : '';
  return html`<section class="presence-history" id="presence-history" data-live>
<h2>Presence this week</h2>
${
  changes.length
    ? html`<table class="presence-changes"><thead><tr><th scope="col">When</th><th scope="col">Change</th><th scope="col">Source</th><th scope="col">By</th><th scope="col">Why</th><th scope="col">Until</th></tr></thead><tbody>
${changes.map(
  (c) =>
    html`<tr class="presence-change presence-${c.to}"><td>${time(c.at)}</td><td><span class="presence-from">${c.from}</span> → <span class="badge presence-badge">${c.to}</span></td><td>${c.source}</td><td>${changedBy(c)}</td><td data-reason="${c.reason}">${CHANGE_REASON_WORDS[c.reason]}</td><td>${c.until ? untilTime(c.until) : html`<span class="muted">${c.to === 'out' ? 'until clocked in' : 'no end'}</span>`}</td></tr>`,
)}
</tbody></table>`
    : html`<p class="empty">No presence changes in the last 7 days.</p>`
}
${start}
<p class="hint">Kept 30 days: <code>switchboard endpoint presence REF --history --since 720h</code> lists them all.</p>
</section>`;
}

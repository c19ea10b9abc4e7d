import { HISTORY_RANGES, type HistoryRange } from '../../domain/history.ts';
import type { HistoryPoint, HistoryView } from '../../services/history.ts';
import { Html, html, path, withQuery, type Part } from '../html.ts';

// The board's charts (issue 39): each chart is an element that charts.js fills with a uPlot
// drawing of the JSON at its `data-chart-src` (a `data-chart` kind says which series), beside a
// table of the same numbers rendered here from the same service call, for a browser without
// JavaScript and for screen readers. No inline script or style: charts.js reads data attributes
// and sizes its canvas through the CSSOM, which the board's CSP allows.

export const RANGE_WORDS: Record<HistoryRange, string> = { '1h': '1 h', '24h': '24 h', '7d': '7 d' };
const STEP_WORDS: Record<HistoryRange, string> = { '1h': 'per minute', '24h': 'per 15 minutes', '7d': 'per hour' };

/** A duration in milliseconds as a person reads it: 850 ms, 12.3 s, 12.7 min, 3.2 h. */
export function fmtMs(ms: number | null): string {
  if (ms === null) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** A point's start, in UTC, as short as the range allows ("10:15", or "03-02 10:15"). */
function stepLabel(iso: string, range: HistoryRange): Html {
  const text = range === '1h' ? iso.slice(11, 16) : `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
  return html`<time datetime="${iso}">${text}</time>`;
}

/** "1 h · 24 h · 7 d": plain links to the same page at another range (no JavaScript needed). */
export function rangeNav(base: string, current: HistoryRange, query: Record<string, string | undefined> = {}, anchor = ''): Html {
  return html`<nav class="ranges" aria-label="Time range"><ul class="pills">${HISTORY_RANGES.map(
    (r) => html`<li><a href="${withQuery(base, { ...query, range: r })}${anchor}"${r === current ? html` aria-current="true"` : ''}>${RANGE_WORDS[r]}</a></li>`,
  )}</ul></nav>`;
}

export interface ChartSpec {
  /** Unique on the page: the figure is `chart-<id>`, its table's live region `chart-<id>-table`. */
  id: string;
  /** Which series charts.js draws from the JSON (see KINDS there). */
  kind: string;
  src: string;
  title: Part;
  caption?: Part;
  /** The numbers of the chart as a table (or a sentence when there are none). */
  table: Part;
  /** Extra data attributes for charts.js, e.g. `series` (a sparkline's endpoint id). */
  series?: string;
  /** A sparkline (a card's): small, no axes. */
  small?: boolean;
  /** A band (the presence week): wide and short. */
  band?: boolean;
}

export function chartFigure(c: ChartSpec): Html {
  return html`<figure class="chart${c.small ? ' chart-small' : ''}${c.band ? ' chart-band' : ''}" id="chart-${c.id}">
<figcaption><span class="chart-title">${c.title}</span>${c.caption ? html` <span class="muted">${c.caption}</span>` : ''}</figcaption>
<div class="chart-plot" id="chart-${c.id}-plot" data-chart="${c.kind}" data-chart-src="${c.src}"${c.series ? html` data-series="${c.series}"` : ''} aria-hidden="true"></div>
<details class="chart-table" open><summary>Table</summary><div id="chart-${c.id}-table" data-live>${c.table}</div></details>
</figure>`;
}

export interface Column {
  key: keyof HistoryPoint;
  label: string;
  /** Cell text (default: the number). */
  fmt?: (v: number | null) => string;
}

const cellValue = (p: HistoryPoint, k: keyof HistoryPoint) => p[k] as number | null;

/**
 * Rows of points, one column per field; points where every column is 0 or empty are left out
 * (said under the table), so a quiet day reads as a few rows.
 */
export function pointsTable(points: readonly HistoryPoint[], columns: readonly Column[], range: HistoryRange): Html {
  const rows = points.filter((p) => columns.some((c) => (cellValue(p, c.key) ?? 0) !== 0));
  if (rows.length === 0) return html`<p class="empty">Nothing in the last ${RANGE_WORDS[range]}.</p>`;
  return html`<table class="chart-data"><thead><tr><th scope="col">UTC</th>${columns.map((c) => html`<th scope="col">${c.label}</th>`)}</tr></thead><tbody>
${rows.map(
  (p) =>
    html`<tr><th scope="row">${stepLabel(p.t, range)}</th>${columns.map((c) => {
      const v = cellValue(p, c.key);
      return html`<td data-key="${c.key}">${c.fmt ? c.fmt(v) : String(v ?? '')}</td>`;
    })}</tr>`,
)}
</tbody></table>
<p class="hint">${STEP_WORDS[range]}; steps with nothing left out.</p>`;
}

/** Rows of named series (a queue's or an outcome's numbers), one column per series; all-zero rows left out. */
export function seriesTable(from: string, stepSeconds: number, series: Record<string, readonly number[]>, range: HistoryRange, empty: string): Html {
  const names = Object.keys(series);
  const n = Math.max(0, ...names.map((k) => series[k]!.length));
  const start = new Date(from).getTime();
  const rows: { t: string; values: number[] }[] = [];
  for (let i = 0; i < n; i++) {
    const values = names.map((k) => series[k]![i] ?? 0);
    if (values.some((v) => v !== 0)) rows.push({ t: new Date(start + i * stepSeconds * 1000).toISOString(), values });
  }
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<table class="chart-data"><thead><tr><th scope="col">UTC</th>${names.map((k) => html`<th scope="col">${k}</th>`)}</tr></thead><tbody>
${rows.map((r) => html`<tr><th scope="row">${stepLabel(r.t, range)}</th>${r.values.map((v, i) => html`<td data-key="${names[i]!}">${v}</td>`)}</tr>`)}
</tbody></table>
<p class="hint">${STEP_WORDS[range]}; steps with nothing left out.</p>`;
}

// ---------------------------------------------------------------------------------------------
// The endpoint page

const DEPTH: Column[] = [
  { key: 'pending', label: 'Pending' },
  { key: 'claimed_depth', label: 'Claimed' },
];
const THROUGHPUT: Column[] = [
  { key: 'created', label: 'Created' },
  { key: 'claimed', label: 'Claimed' },
  { key: 'completed', label: 'Done' },
  { key: 'failed', label: 'Failed' },
  { key: 'dead', label: 'Dead letters' },
];
const WAIT: Column[] = [
  { key: 'wait_p50_ms', label: 'p50', fmt: fmtMs },
  { key: 'wait_p95_ms', label: 'p95', fmt: fmtMs },
];
const RINGS: Column[] = [
  { key: 'rings_sent', label: 'Sent' },
  { key: 'heard_claim', label: 'Heard (claim)' },
  { key: 'heard_ack', label: 'Heard (ack)' },
  { key: 'unheard', label: 'Unheard' },
  { key: 'digests', label: 'Digests' },
];

/** An endpoint's history section: depth, throughput, claim wait and doorbells over the chosen range. */
export function endpointCharts(endpointId: string, view: HistoryView, extra: Part = ''): Html {
  const r = view.range;
  const src = withQuery(path('/endpoints', endpointId, 'history.json'), { range: r });
  const fig = (id: string, title: string, caption: string, columns: Column[]) =>
    chartFigure({ id, kind: id, src, title, caption, table: pointsTable(view.points, columns, r) });
  return html`<section class="charts" id="charts">
<div class="charts-head"><h2>History</h2>${rangeNav(path('/endpoints', endpointId), r, {}, '#charts')}</div>
<div class="chart-grid">
${fig('depth', 'Depth', 'pending and claimed at the end of each step', DEPTH)}
${fig('throughput', 'Throughput', `todos ${STEP_WORDS[r]}`, THROUGHPUT)}
${fig('wait', 'Claim wait', 'created to claimed, p50 and p95', WAIT)}
${fig('rings', 'Doorbells', 'sent, heard and unheard, by the minute they were sent; digests', RINGS)}
</div>
${extra}
</section>`;
}

// ---------------------------------------------------------------------------------------------
// The todos page

/** Per queue, its pending depth and todos created over the range (the todos page's filters apply). */
export function queueCharts(
  v: { step_seconds: number; from: string; queues: Record<string, HistoryPoint[]> },
  range: HistoryRange,
  filters: Record<string, string | undefined>,
): Html {
  const src = withQuery('/todos/history.json', { endpoint: filters.endpoint, queue: filters.queue, range });
  const field = (k: 'pending' | 'created') => Object.fromEntries(Object.entries(v.queues).map(([q, points]) => [q, points.map((p) => p[k])]));
  return html`<section class="charts" id="charts">
<div class="charts-head"><h2>Queues over time</h2>${rangeNav('/todos', range, filters, '#charts')}</div>
<div class="chart-grid">
${chartFigure({ id: 'queues-pending', kind: 'queues-pending', src, title: 'Pending per queue', caption: 'at the end of each step', table: seriesTable(v.from, v.step_seconds, field('pending'), range, `Nothing pending in the last ${RANGE_WORDS[range]}.`) })}
${chartFigure({ id: 'queues-created', kind: 'queues-created', src, title: 'Created per queue', caption: STEP_WORDS[range], table: seriesTable(v.from, v.step_seconds, field('created'), range, `Nothing created in the last ${RANGE_WORDS[range]}.`) })}
</div>
</section>`;
}

// ---------------------------------------------------------------------------------------------
// A webhook's rules page

/** Deliveries of one webhook by outcome (routed, dropped, repeat, faulted, recorded, refused). */
export function deliveriesChart(
  base: string,
  webhookId: string,
  v: { step_seconds: number; from: string; outcomes: Record<string, number[]> },
  range: HistoryRange,
): Html {
  const src = withQuery(path('/webhooks', webhookId, 'history.json'), { range });
  return html`<section class="charts" id="charts">
<div class="charts-head"><h2>Deliveries</h2>${rangeNav(base, range, {}, '#charts')}</div>
${chartFigure({ id: 'deliveries', kind: 'deliveries', src, title: 'Deliveries by outcome', caption: STEP_WORDS[range], table: seriesTable(v.from, v.step_seconds, v.outcomes, range, `No deliveries in the last ${RANGE_WORDS[range]}.`) })}
</section>`;
}

// ---------------------------------------------------------------------------------------------
// The endpoints page: a sparkline of pending depth per card

export const SPARKLINES_SRC = '/endpoints/sparklines.json';
/** The sparklines of the endpoints page `page` shows (its first page: no parameter). */
export const sparklinesSrc = (page = 1): string => (page > 1 ? `${SPARKLINES_SRC}?page=${page}` : SPARKLINES_SRC);

/** An endpoint's pending depth over the last 24 h, on its card; its table lists the non-zero quarter hours. */
export function sparkline(endpointId: string, values: readonly number[], from: string, stepSeconds: number, src: string = SPARKLINES_SRC): Html {
  return chartFigure({
    id: `spark-${endpointId}`,
    kind: 'sparkline',
    src,
    series: endpointId,
    small: true,
    title: 'Pending, 24 h',
    table: seriesTable(from, stepSeconds, { pending: values }, '24h', 'Nothing pending in the last 24 h.'),
  });
}

// ---------------------------------------------------------------------------------------------
// The endpoint page: the week's presence band

/** The band's data, as routes/charts.ts builds it (ISO times). */
export interface PresenceBandView {
  since: string;
  until: string;
  spans: { from: string; to: string; presence: 'in' | 'out'; source: string | null }[];
  shift: { from: string; to: string }[];
  shift_text: string | null;
}

const spanTime = (iso: string) => html`<time datetime="${iso}">${iso.slice(5, 10)} ${iso.slice(11, 16)}</time>`;

/** In or out over the last 7 days, each span with what decided it; the shift's windows drawn behind. */
export function presenceBandFigure(endpointId: string, band: PresenceBandView): Html {
  const table = band.spans.length
    ? html`<table class="chart-data presence-spans"><thead><tr><th scope="col">From (UTC)</th><th scope="col">To</th><th scope="col">Presence</th><th scope="col">Source</th></tr></thead><tbody>
${band.spans.map(
  (s) => html`<tr class="presence-span presence-${s.presence}"><td>${spanTime(s.from)}</td><td>${spanTime(s.to)}</td><td>${s.presence}</td><td>${s.source ?? html`<span class="muted">not kept</span>`}</td></tr>`,
)}
</tbody></table>
${band.shift.length ? html`<p class="hint">On shift: ${band.shift.map((w, i) => html`${i ? ', ' : ''}${spanTime(w.from)}–${spanTime(w.to)}`)}.</p>` : ''}`
    : html`<p class="empty">No presence in the last 7 days.</p>`;
  return chartFigure({
    id: 'presence',
    kind: 'presence',
    src: path('/endpoints', endpointId, 'presence.json'),
    band: true,
    title: 'Presence, 7 d',
    caption: html`<span class="swatch swatch-in"></span> in <span class="swatch swatch-out"></span> out, labelled by source${
      band.shift_text ? html`; behind, <span class="swatch swatch-shift"></span> the shift <code>${band.shift_text}</code>` : ''
    }`,
    table,
  });
}

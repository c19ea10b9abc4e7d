import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { githubHeaders } from '../src/domain/ingest/fixtures.testkit.ts';
import { until } from './support/agents.ts';
import { push, vend, withApp } from './support/fixtures.ts';

/**
 * The monitoring files operators load (issue 39 item 4): deploy/grafana/switchboard.json and
 * deploy/prometheus/alerts.yml. A real app is driven through the paths that move each series
 * (pushes, a doorbell heard and claimed over MCP, webhook deliveries accepted, dropped, faulted
 * and refused, a notify hook failing until it is disabled), /metrics is scraped, and every series,
 * label and label value the dashboard's and the rules' PromQL names must be in that scrape. With
 * promtool (Debian's `prometheus` package; CI installs it) the rules are checked, each alert is run
 * against sample series (`promtool test rules`), and every dashboard query is parsed.
 */

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const DASHBOARD = path.join(root, 'deploy/grafana/switchboard.json');
const ALERTS = path.join(root, 'deploy/prometheus/alerts.yml');
const DEPLOY_DOC = path.join(root, 'docs/deploy.md');
const PROMTOOL = '/usr/bin/promtool';
const METRICS_TOKEN = randomBytes(24).toString('hex');

/** Labels Prometheus attaches to every series of a scrape target. */
const TARGET_LABELS = new Set(['job', 'instance']);
/** Series Prometheus writes itself for every target (not on /metrics, but real for any scrape job). */
const PROMETHEUS_SERIES: Record<string, string[]> = { up: [], scrape_duration_seconds: [] };

const f = withApp({
  env: {
    SWITCHBOARD_METRICS_TOKEN: METRICS_TOKEN,
    SWITCHBOARD_SECRET_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    SWITCHBOARD_PUSH_ALLOW_HTTP: '1',
    SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32',
  },
  notifyHookDelivery: { attempts: 1, backoffMs: [10, 10], timeoutMs: 2000 },
});

// ---------------------------------------------------------------------------------------------
// The scrape: sample name -> label -> values seen

type Exposed = Map<string, Map<string, Set<string>>>;

function parseExposition(text: string): Exposed {
  const out: Exposed = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+$/.exec(line);
    if (!m) throw new Error(`unparsable exposition line: ${line}`);
    const labels = out.get(m[1]!) ?? new Map<string, Set<string>>();
    out.set(m[1]!, labels);
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      const values = labels.get(l[1]!) ?? new Set<string>();
      values.add(l[2]!);
      labels.set(l[1]!, values);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// PromQL: the series, matchers and grouping labels an expression names

interface Matcher {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}
interface Selector {
  metric: string;
  matchers: Matcher[];
}
interface Refs {
  selectors: Selector[];
  /** Labels in by/without/on/ignoring/group_left/group_right clauses. */
  grouping: string[];
}

const GROUPING = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'atan2']);
const FUNCTIONS = new Set([
  'sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values', 'group',
  'rate', 'irate', 'increase', 'delta', 'idelta', 'deriv', 'predict_linear', 'resets', 'changes',
  'abs', 'absent', 'absent_over_time', 'ceil', 'floor', 'round', 'clamp', 'clamp_min', 'clamp_max', 'scalar', 'vector', 'time', 'timestamp',
  'histogram_quantile', 'label_replace', 'label_join', 'sort', 'sort_desc',
  'avg_over_time', 'min_over_time', 'max_over_time', 'sum_over_time', 'count_over_time', 'last_over_time', 'quantile_over_time',
]);

function unquote(s: string): string {
  return JSON.parse(s.startsWith("'") ? `"${s.slice(1, -1).replace(/"/g, '\\"')}"` : s) as string;
}

function promqlRefs(expr: string): Refs {
  const token = /\s+|#[^\n]*|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|\{([^}]*)\}|\[[^\]]*\]|(\d+(?:\.\d+)?(?:ms|[smhdwy])?)|([A-Za-z_:][A-Za-z0-9_:]*)|(=~|!~|!=|==|>=|<=|[-+*/%^<>(),])/gy;
  type Tok = { kind: 'ident' | 'matchers' | 'punct' | 'other'; text: string; matchers?: Matcher[] };
  const toks: Tok[] = [];
  let at = 0;
  while (at < expr.length) {
    token.lastIndex = at;
    const m = token.exec(expr);
    if (!m) throw new Error(`PromQL: cannot read ${JSON.stringify(expr.slice(at, at + 30))} in ${expr}`);
    at = token.lastIndex;
    if (m[2] !== undefined) {
      const matchers: Matcher[] = [];
      const inner = m[2].trim();
      const one = /\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*(?:,|$)/gy;
      let j = 0;
      while (j < inner.length) {
        one.lastIndex = j;
        const mm = one.exec(inner);
        if (!mm) throw new Error(`PromQL: cannot read the matchers {${inner}}`);
        j = one.lastIndex;
        matchers.push({ label: mm[1]!, op: mm[2] as Matcher['op'], value: unquote(mm[3]!) });
      }
      toks.push({ kind: 'matchers', text: m[0], matchers });
    } else if (m[4] !== undefined) toks.push({ kind: 'ident', text: m[4] });
    else if (m[5] !== undefined) toks.push({ kind: 'punct', text: m[5] });
    else if (m[0].trim() !== '' && !m[0].startsWith('#')) toks.push({ kind: 'other', text: m[0] });
  }
  const refs: Refs = { selectors: [], grouping: [] };
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i]!;
    const next = toks[i + 1];
    if (t.kind === 'matchers') throw new Error(`PromQL: a selector without a metric name: ${t.text}`);
    if (t.kind !== 'ident') continue;
    if (GROUPING.has(t.text)) {
      if (next?.text !== '(') continue; // group_left without labels
      for (i += 2; toks[i] && toks[i]!.text !== ')'; i++) if (toks[i]!.kind === 'ident') refs.grouping.push(toks[i]!.text);
    } else if (KEYWORDS.has(t.text)) {
      continue;
    } else if (next?.text === '(' || next?.text === 'by' || next?.text === 'without') {
      if (!FUNCTIONS.has(t.text)) throw new Error(`PromQL: unknown function ${t.text}() in ${expr}`);
    } else {
      const matchers = next?.kind === 'matchers' ? next.matchers! : [];
      refs.selectors.push({ metric: t.text, matchers });
      if (next?.kind === 'matchers') i++;
    }
  }
  return refs;
}

/** Every problem with the series, labels and label values one expression names, against the scrape. */
function problemsOf(where: string, expr: string, exposed: Exposed, extraLabels: string[] = []): string[] {
  const problems: string[] = [];
  let refs: Refs;
  try {
    refs = promqlRefs(expr);
  } catch (err) {
    return [`${where}: ${(err as Error).message}`];
  }
  if (refs.selectors.length === 0) problems.push(`${where}: names no series: ${expr}`);
  const labelsOf = (metric: string): Set<string> => {
    if (metric in PROMETHEUS_SERIES) return new Set([...TARGET_LABELS, ...PROMETHEUS_SERIES[metric]!]);
    return new Set([...TARGET_LABELS, ...(exposed.get(metric)?.keys() ?? [])]);
  };
  for (const s of refs.selectors) {
    if (!(s.metric in PROMETHEUS_SERIES) && !exposed.has(s.metric)) {
      problems.push(`${where}: ${s.metric} is not on /metrics`);
      continue;
    }
    if (!s.metric.startsWith('switchboard_') && !(s.metric in PROMETHEUS_SERIES)) problems.push(`${where}: ${s.metric} is neither a switchboard_ series nor one Prometheus writes`);
    for (const m of s.matchers) {
      if (!labelsOf(s.metric).has(m.label)) {
        problems.push(`${where}: ${s.metric} has no label ${m.label}`);
        continue;
      }
      // A literal value (or a literal alternation) must be one the series really takes.
      if (TARGET_LABELS.has(m.label) || m.value.includes('$') || m.op.startsWith('!')) continue;
      const values = exposed.get(s.metric)?.get(m.label) ?? new Set<string>();
      const wanted = m.op === '=' ? [m.value] : /^[\w.-]+(\|[\w.-]+)*$/.test(m.value) ? m.value.split('|') : [];
      for (const v of wanted) if (!values.has(v)) problems.push(`${where}: ${s.metric}{${m.label}="${v}"} is not on /metrics (seen: ${[...values].join(', ')})`);
    }
  }
  const carried = new Set(refs.selectors.flatMap((s) => [...labelsOf(s.metric)]));
  for (const label of [...refs.grouping, ...extraLabels]) if (!carried.has(label)) problems.push(`${where}: no series it names carries the label ${label}`);
  return problems;
}

// ---------------------------------------------------------------------------------------------
// The files

interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  type: string;
  name: string;
  query: string | { query: string };
  datasource?: { type?: string; uid?: string };
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Variable[] };
}
interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleFile {
  groups: { name: string; interval?: string; rules: Rule[] }[];
}

let dashboard: Dashboard;
let alerts: RuleFile;
const allPanels = () => dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const variableQuery = (v: Variable) => (typeof v.query === 'string' ? v.query : v.query.query);
/** The labels a legend (`{{queue}}`) prints. */
const legendLabels = (legend = '') => [...legend.matchAll(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g)].map((m) => m[1]!);

// ---------------------------------------------------------------------------------------------
// Traffic, then one scrape

let receiver: Server;
let scrape = '';
let exposed: Exposed;

beforeAll(async () => {
  dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as Dashboard;
  alerts = parse(await readFile(ALERTS, 'utf8')) as RuleFile;

  // A notify hook receiver that is down: every delivery fails, and the tenth in a row disables the hook.
  receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.statusCode = 500;
      res.end('{"down":true}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));

  const api = f.api;
  // Refills the clock-driven write limits between writes.
  const tick = () => void f.app.clock.advance(5_000);
  const e = await vend(api, { name: 'monitored', queues: ['reviews', 'inbox'] });

  tick();
  const hook = await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`, queues: ['inbox'] });
  expect(hook.status, hook.text).toBe(201);
  for (let i = 0; i < 10; i++) {
    tick();
    await push(api, e, { title: `inbox ${i}`, queue: 'inbox' });
  }

  // A doorbell heard and its todo claimed and completed over MCP.
  const agent = await f.agent(e);
  tick();
  const rung = await push(api, e, { title: 'review me', queue: 'reviews' });
  await until(() => agent.heard.some((n) => n.params.meta.todo_id === rung.id), 'the doorbell');
  const claimed = await agent.call('claim_next', { queue: 'reviews' });
  expect(claimed.todo.id).toBe(rung.id);
  expect(await agent.call('complete', { id: rung.id })).not.toHaveProperty('error');

  // Webhook deliveries through rules: one queued, one dropped, one faulted (refused with 503).
  tick();
  const gen = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'inbox' });
  expect(gen.status, gen.text).toBe(201);
  tick();
  const rules = await api('PUT', `/api/v1/endpoints/${e.slug}/webhooks/${gen.json.webhook_id}/rules`, {
    rules: [
      { name: 'drop noise', when: 'event == "noise"', action: { drop: true } },
      { name: 'numbered', when: 'payload.n > 1', action: { queue: 'inbox' } },
    ],
  });
  expect(rules.status, rules.text).toBe(200);
  const deliver = (event: string, body: unknown) =>
    fetch(gen.json.ingest_url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-event-type': event }, body: JSON.stringify(body) });
  expect((await deliver('build.failed', { n: 2 })).status).toBe(202);
  expect((await deliver('noise', { n: 3 })).status).toBe(202);
  expect((await deliver('build.failed', { m: 1 })).status).toBe(503);

  // A signed delivery with the wrong signature: refused and counted by reason.
  tick();
  const gh = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github', target_queue: 'reviews' });
  expect(gh.status, gh.text).toBe(201);
  const body = JSON.stringify({ zen: 'Keep it logically awesome.' });
  expect((await fetch(gh.json.ingest_url, { method: 'POST', headers: githubHeaders('ping', body, 'not-the-secret'), body })).status).toBe(401);

  await until(async () => (await f.sql`select 1 from notify_hooks where id = ${hook.json.hook_id} and not enabled`).length > 0, 'the hook to be disabled');

  const res = await fetch(`${f.app.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.status).toBe(200);
  scrape = await res.text();
  exposed = parseExposition(scrape);
});
afterAll(async () => {
  await new Promise((r) => receiver?.close(r));
});

// ---------------------------------------------------------------------------------------------

describe('the PromQL reader this file checks with', () => {
  it('finds series, matchers and grouping labels, and refuses what it cannot read', () => {
    expect(promqlRefs('sum by (job, queue) (rate(a_total{x="1", y=~"b|c"}[5m])) / on (job) group_left b offset 1h > bool 0')).toEqual({
      selectors: [
        { metric: 'a_total', matchers: [{ label: 'x', op: '=', value: '1' }, { label: 'y', op: '=~', value: 'b|c' }] },
        { metric: 'b', matchers: [] },
      ],
      grouping: ['job', 'queue', 'job'],
    });
    expect(() => promqlRefs('{__name__="x"}')).toThrow(/without a metric name/);
    expect(() => promqlRefs('ratee(x[5m])')).toThrow(/unknown function ratee/);
    const seen = parseExposition('# TYPE switchboard_a counter\nswitchboard_a{kind="todo"} 1\nprocess_b 1\n');
    expect(problemsOf('t', 'sum by (kind, job) (switchboard_a{kind="todo", instance=~"$instance"}) + up', seen)).toEqual([]);
    expect(problemsOf('t', 'switchboard_a{kind="dead"} + switchboard_a_missing + sum by (queue) (switchboard_a{via="x"}) + process_b', seen)).toEqual([
      't: switchboard_a{kind="dead"} is not on /metrics (seen: todo)',
      't: switchboard_a_missing is not on /metrics',
      't: switchboard_a has no label via',
      't: process_b is neither a switchboard_ series nor one Prometheus writes',
      't: no series it names carries the label queue',
    ]);
  });
});

describe('deploy/grafana/switchboard.json', () => {
  it('is a dashboard with a Prometheus data source variable that every panel, query and variable uses', () => {
    expect(dashboard).toMatchObject({ uid: 'switchboard', title: 'Switchboard' });
    const ds = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(ds).toMatchObject({ name: 'datasource', query: 'prometheus' });
    for (const v of dashboard.templating.list.filter((v) => v.type === 'query')) expect(v.datasource, v.name).toEqual({ type: 'prometheus', uid: '${datasource}' });
    for (const p of allPanels().filter((p) => p.type !== 'row')) {
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) {
        expect(typeof t.expr === 'string' && t.expr.trim() !== '', `${p.title} ${t.refId}`).toBe(true);
        expect(t.datasource, `${p.title} ${t.refId}`).toEqual({ type: 'prometheus', uid: '${datasource}' });
      }
      expect(new Set(p.targets!.map((t) => t.refId)).size, p.title).toBe(p.targets!.length);
    }
  });

  it('has unique panel ids, and panels inside the 24-column grid that do not overlap', () => {
    const panels = allPanels();
    const ids = panels.map((p) => p.id);
    expect(ids.every((id) => Number.isInteger(id) && id > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Map<string, string>();
    for (const p of panels) {
      const { x, y, w, h } = p.gridPos;
      expect(x >= 0 && w > 0 && x + w <= 24 && y >= 0 && h > 0, p.title).toBe(true);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          expect(cells.get(`${i},${j}`), `${p.title} overlaps`).toBeUndefined();
          cells.set(`${i},${j}`, p.title);
        }
      }
    }
  });

  it('shows what the issue asks for', () => {
    const exprs = allPanels()
      .flatMap((p) => p.targets ?? [])
      .map((t) => t.expr)
      .join('\n');
    for (const series of [
      'switchboard_queue_todos', // queue depth
      'switchboard_queue_oldest_pending_seconds',
      'switchboard_doorbell_rings_acknowledged_total{job=~"$job", instance=~"$instance", via="claim"}', // the claims that answered a doorbell
      'switchboard_doorbell_rings_total',
      'switchboard_doorbell_rings_unheard_total',
      'switchboard_doorbell_unheard_sessions',
      'switchboard_webhook_deliveries_total',
      'switchboard_webhook_verify_failures_total',
      'switchboard_routing_decisions_total',
      'switchboard_routing_faults_total',
      'switchboard_notify_hook_notifications_total',
      'switchboard_notify_hook_attempts_total',
      'switchboard_notify_hooks_disabled_total',
      'switchboard_nodejs_eventloop_lag_p99_seconds',
      'scrape_duration_seconds',
    ]) {
      expect(exprs).toContain(series);
    }
  });

  it('names only series, labels and label values /metrics really serves', () => {
    const problems: string[] = [];
    for (const p of allPanels()) {
      for (const t of p.targets ?? []) problems.push(...problemsOf(`panel ${p.id} "${p.title}" ${t.refId}`, t.expr, exposed, legendLabels(t.legendFormat)));
    }
    for (const v of dashboard.templating.list.filter((v) => v.type === 'query')) {
      const m = /^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(variableQuery(v));
      if (!m) {
        problems.push(`variable ${v.name}: not a label_values(selector, label) query`);
        continue;
      }
      problems.push(...problemsOf(`variable ${v.name}`, m[1]!, exposed, [m[2]!]));
    }
    expect(problems).toEqual([]);
  });

  it.skipIf(!existsSync(PROMTOOL))('has queries Prometheus parses (promtool, each query as a recording rule)', async () => {
    const grafanaVariables = (expr: string) =>
      expr
        .replace(/\$__rate_interval|\$__interval|\$__range/g, '5m')
        .replace(/"\$\{?[A-Za-z_]+\}?"/g, '".*"');
    const rules = allPanels().flatMap((p) => (p.targets ?? []).map((t) => ({ record: `dashboard:panel_${p.id}_${t.refId}`, expr: grafanaVariables(t.expr) })));
    for (const v of dashboard.templating.list.filter((v) => v.type === 'query')) {
      rules.push({ record: `dashboard:variable_${v.name}`, expr: grafanaVariables(/^label_values\((.+),\s*\w+\)$/.exec(variableQuery(v))![1]!) });
    }
    const out = await promtool(['check', 'rules'], { 'dashboard-queries.yml': stringify({ groups: [{ name: 'dashboard', rules }] }) });
    expect(out).toContain(`SUCCESS: ${rules.length} rules found`);
  });
});

describe('deploy/prometheus/alerts.yml', () => {
  const rules = () => alerts.groups.flatMap((g) => g.rules);

  it('is a rules file: named groups of alerts, each with for:, a severity, and a summary, description and runbook link', () => {
    expect(Array.isArray(alerts.groups) && alerts.groups.length > 0).toBe(true);
    expect(Object.keys(alerts)).toEqual(['groups']);
    const groupNames = alerts.groups.map((g) => g.name);
    expect(groupNames.every((n) => typeof n === 'string' && n !== '')).toBe(true);
    expect(new Set(groupNames).size).toBe(groupNames.length);
    for (const g of alerts.groups) {
      expect(Object.keys(g).every((k) => ['name', 'interval', 'rules'].includes(k)), g.name).toBe(true);
      expect(g.rules.length, g.name).toBeGreaterThan(0);
    }
    const names = rules().map((r) => r.alert);
    expect(new Set(names).size).toBe(names.length);
    for (const r of rules()) {
      expect(Object.keys(r).sort(), r.alert).toEqual(['alert', 'annotations', 'expr', 'for', 'labels']);
      expect(r.alert, r.alert).toMatch(/^Switchboard[A-Za-z]+$/);
      expect(typeof r.expr === 'string' && r.expr.trim() !== '', r.alert).toBe(true);
      expect(r.for, r.alert).toMatch(/^(\d+[smhdwy])+$/);
      expect(r.labels, r.alert).toEqual({ severity: expect.stringMatching(/^(critical|warning|info)$/) });
      expect(Object.keys(r.annotations!).sort(), r.alert).toEqual(['description', 'runbook_url', 'summary']);
      for (const [k, v] of Object.entries(r.annotations!)) expect(typeof v === 'string' && v.trim() !== '', `${r.alert} ${k}`).toBe(true);
      expect(r.annotations!.description!.length, `${r.alert} says what to do`).toBeGreaterThan(150);
    }
    expect(names).toEqual(expect.arrayContaining(['SwitchboardOldestPendingTooOld', 'SwitchboardUnheardSessions', 'SwitchboardDeadLettersRising', 'SwitchboardIngestRefusalsRising']));
  });

  it("links each alert to its own section of docs/deploy.md", async () => {
    const doc = await readFile(DEPLOY_DOC, 'utf8');
    // GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
    const anchors = new Set([...doc.matchAll(/^#+\s+(.+)$/gm)].map((m) => m[1]!.trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')));
    for (const r of rules()) {
      const [file, anchor] = r.annotations!.runbook_url!.split('#');
      expect(file, r.alert).toBe('docs/deploy.md');
      expect(anchor, r.alert).toBe(r.alert!.toLowerCase());
      expect(anchors.has(anchor!), `docs/deploy.md has a section ${r.alert}`).toBe(true);
    }
  });

  it('names only series, labels and label values /metrics really serves', () => {
    const problems: string[] = [];
    for (const r of rules()) {
      const templated = [...Object.values(r.annotations ?? {}).join(' ').matchAll(/\$labels\.([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!);
      problems.push(...problemsOf(r.alert!, r.expr, exposed, templated));
    }
    expect(problems).toEqual([]);
  });

  it.skipIf(!existsSync(PROMTOOL))('passes promtool check rules', async () => {
    const { stdout } = await run(PROMTOOL, ['check', 'rules', ALERTS]);
    expect(stdout).toContain(`SUCCESS: ${rules().length} rules found`);
  });

  it('has an alerting scenario for every rule, over series /metrics serves', () => {
    const problems = SCENARIOS.flatMap((s) => s.input_series.flatMap((i) => problemsOf(`scenario input ${i.series}`, i.series, exposed)));
    expect(problems).toEqual([]);
    const tested = new Set(SCENARIOS.flatMap((s) => s.alert_rule_test.map((t) => t.alertname)));
    expect([...tested].sort()).toEqual(rules().map((r) => r.alert!).sort());
  });

  it.skipIf(!existsSync(PROMTOOL))('fires each alert when it should, and not before (promtool test rules)', async () => {
    // The rules as shipped, but without annotations, so a scenario states only the labels it expects.
    const bare = { groups: alerts.groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _, ...r }) => r) })) };
    const out = await promtool(['test', 'rules'], {
      'alerts.yml': stringify(bare),
      'alerts-test.yml': stringify({ rule_files: ['alerts.yml'], evaluation_interval: '1m', tests: SCENARIOS }),
    });
    expect(out).toContain('SUCCESS');
  });
});

// ---------------------------------------------------------------------------------------------
// promtool

/** Runs promtool on the last of `files` (written to a scratch directory); its output, or a failure with it. */
async function promtool(args: string[], files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'sb-promtool-'));
  try {
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
    const last = path.join(dir, Object.keys(files).at(-1)!);
    try {
      const { stdout, stderr } = await run(PROMTOOL, [...args, last], { cwd: dir, timeout: 60_000 });
      return stdout + stderr;
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? e.message}`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface Scenario {
  interval: string;
  input_series: { series: string; values: string }[];
  alert_rule_test: { eval_time: string; alertname: string; exp_alerts: { exp_labels: Record<string, string> }[] }[];
}

const A = 'job="switchboard", instance="sb-1:8080"';
const B = 'job="switchboard", instance="sb-2:8080"';
const fires = (alertname: string, eval_time: string, ...labels: Record<string, string>[]) => ({ eval_time, alertname, exp_alerts: labels.map((l) => ({ exp_labels: l })) });
const quiet = (alertname: string, eval_time: string) => ({ eval_time, alertname, exp_alerts: [] });
const warning = (labels: Record<string, string>) => ({ severity: 'warning', job: 'switchboard', ...labels });

/** Sample series (one point a minute) and when each alert must, and must not, be firing. */
const SCENARIOS: Scenario[] = [
  {
    // reviews waits longer and longer, reported alike by both instances (one alert, not two); inbox drains.
    interval: '1m',
    input_series: [
      { series: `switchboard_queue_oldest_pending_seconds{${A}, queue="reviews"}`, values: '0+60x60' },
      { series: `switchboard_queue_oldest_pending_seconds{${B}, queue="reviews"}`, values: '0+60x60' },
      { series: `switchboard_queue_oldest_pending_seconds{${A}, queue="inbox"}`, values: '0x60' },
    ],
    alert_rule_test: [
      quiet('SwitchboardOldestPendingTooOld', '35m'), // over 30 minutes, but not yet for 10
      fires('SwitchboardOldestPendingTooOld', '45m', warning({ queue: 'reviews' })),
    ],
  },
  {
    // From minute 10 one session on sb-1 is unheard; sb-2 has none.
    interval: '1m',
    input_series: [
      { series: `switchboard_doorbell_unheard_sessions{${A}}`, values: '0x9 1x50' },
      { series: `switchboard_doorbell_unheard_sessions{${B}}`, values: '0x60' },
    ],
    alert_rule_test: [quiet('SwitchboardUnheardSessions', '20m'), fires('SwitchboardUnheardSessions', '30m', warning({}))],
  },
  {
    // reviews gains a dead letter at minute 30 that stays; inbox holds a todo waiting 15 minutes for its retry.
    interval: '1m',
    input_series: [
      { series: `switchboard_queue_todos{${A}, queue="reviews", state="failed"}`, values: '0x29 1x60' },
      { series: `switchboard_queue_todos{${B}, queue="reviews", state="failed"}`, values: '0x29 1x60' },
      { series: `switchboard_queue_todos{${A}, queue="inbox", state="failed"}`, values: '0x20 1x14 0x55' },
      { series: `switchboard_queue_todos{${A}, queue="reviews", state="pending"}`, values: '5+1x90' },
    ],
    alert_rule_test: [
      quiet('SwitchboardDeadLettersRising', '40m'),
      fires('SwitchboardDeadLettersRising', '55m', warning({ queue: 'reviews' })),
    ],
  },
  {
    // GitHub: one refused delivery a minute beside one accepted. generic: one refused in 10 minutes among 100 accepted.
    interval: '1m',
    input_series: [
      { series: `switchboard_webhook_deliveries_total{${A}, provider="github", trust_mode="signed", verdict="rejected"}`, values: '0+1x40' },
      { series: `switchboard_webhook_deliveries_total{${A}, provider="github", trust_mode="signed", verdict="accepted"}`, values: '0+1x40' },
      { series: `switchboard_webhook_deliveries_total{${A}, provider="generic", trust_mode="token", verdict="rejected"}`, values: '0+0.1x40' },
      { series: `switchboard_webhook_deliveries_total{${B}, provider="generic", trust_mode="token", verdict="accepted"}`, values: '0+10x40' },
    ],
    alert_rule_test: [
      quiet('SwitchboardIngestRefusalsRising', '10m'),
      fires('SwitchboardIngestRefusalsRising', '25m', warning({ provider: 'github' })),
    ],
  },
  {
    // One routing fault at minute 10, none after.
    interval: '1m',
    input_series: [{ series: `switchboard_routing_faults_total{${A}, cause="error"}`, values: '0x9 1x50' }],
    alert_rule_test: [
      quiet('SwitchboardRoutingFaults', '5m'),
      fires('SwitchboardRoutingFaults', '12m', warning({ cause: 'error' })),
      quiet('SwitchboardRoutingFaults', '30m'),
    ],
  },
  {
    interval: '1m',
    input_series: [{ series: `switchboard_notify_hooks_disabled_total{${B}, reason="consecutive_failures"}`, values: '0x9 1x80' }],
    alert_rule_test: [
      quiet('SwitchboardNotifyHookDisabled', '5m'),
      fires('SwitchboardNotifyHookDisabled', '15m', warning({})),
      quiet('SwitchboardNotifyHookDisabled', '80m'),
    ],
  },
  {
    // sb-2's queue query fails every scrape from minute 10; the ring collector's errors do not count.
    interval: '1m',
    input_series: [
      { series: `switchboard_metrics_collection_errors_total{${A}, collector="queue"}`, values: '0x40' },
      { series: `switchboard_metrics_collection_errors_total{${B}, collector="queue"}`, values: '0x9 1+1x30' },
      { series: `switchboard_metrics_collection_errors_total{${A}, collector="doorbell_rings"}`, values: '0+1x40' },
    ],
    alert_rule_test: [
      quiet('SwitchboardQueueMetricsFailing', '12m'),
      fires('SwitchboardQueueMetricsFailing', '20m', warning({ instance: 'sb-2:8080' })),
    ],
  },
  {
    // No scrape succeeds: only Prometheus's own up series exists.
    interval: '1m',
    input_series: [{ series: `up{${A}}`, values: '0x30' }],
    alert_rule_test: [quiet('SwitchboardMetricsAbsent', '5m'), fires('SwitchboardMetricsAbsent', '15m', { severity: 'critical' })],
  },
  {
    // Scraped: no alert.
    interval: '1m',
    input_series: [{ series: `switchboard_build_info{${A}, version="0.1.0"}`, values: '1x30' }],
    alert_rule_test: [quiet('SwitchboardMetricsAbsent', '15m')],
  },
];

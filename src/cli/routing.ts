import type { RouteTraceView, WebhookRules } from '../api/wire.ts';
import type { Io } from './output.ts';
import { printTable } from './output.ts';

// Webhook routing in words, for `webhook rules` and `todo show`: rules, actions and traces as
// people read them. Rule numbers are the 0-based indexes the server names fields by (`rules.1.when`).

type Action = WebhookRules['rules'][number]['action'];
type DryRunRow = NonNullable<WebhookRules['dry_run']>[number];

/** `drop`, `queue reviews`, `queue reviews, once`, `queue reviews on a, b (fan-out)`. */
export function actionWords(a: Action | { queue?: string; endpoints?: string[]; once?: boolean } | null, targetQueue?: string): string {
  if (a === null) return targetQueue ? `queue ${targetQueue} (the webhook's target queue)` : "the webhook's target queue";
  if ('drop' in a) return 'drop';
  const parts = [a.queue ? `queue ${a.queue}` : 'target queue'];
  if (a.endpoints?.length) parts[0] += ` on ${a.endpoints.join(', ')} (fan-out)`;
  if (a.once) parts.push('once');
  return parts.join(', ');
}

/**
 * Why a todo exists, from its routing trace: "routed by rule 1 (reviews for the bot): queue
 * reviews, once", or "default: target queue" when no rule matched.
 */
export function traceWords(t: RouteTraceView): string {
  const what = t.action === 'drop' ? 'drop' : t.action === 'fault' ? `fault (${t.cause ?? 'error'}${t.message ? `: ${t.message}` : ''})` : actionWords(t);
  if (t.stage === 'default') return `default: ${what}`;
  const rule = `rule ${t.rule_index ?? '?'}${t.rule_name ? ` (${t.rule_name})` : ''}`;
  return t.action === 'fault' ? `faulted at ${rule}: ${what}` : `routed by ${rule}: ${what}`;
}

/** One line per field of the rules, then the rules table (WHEN last: the one column without a bound). */
export function printRules(io: Io, r: WebhookRules): void {
  io.out(`Webhook ${r.webhook_id}, target queue ${r.target_queue}\n`);
  if (r.rules.length === 0) io.out('Rules:   none (every delivery goes to the default action)\n');
  else {
    io.out('Rules (the first that matches decides):\n');
    printTable(
      io,
      ['#', 'NAME', 'ACTION', 'WHEN'],
      r.rules.map((rule, i) => [i, rule.name, actionWords(rule.action), rule.when.replace(/\s+/g, ' ')]),
    );
  }
  io.out(`Params:  ${Object.keys(r.params).length === 0 ? 'none' : JSON.stringify(r.params)}\n`);
  io.out(`Default: ${actionWords(r.default_action, r.target_queue)}\n`);
}

/** What an event did, as an outcome comparable with what it would do (null: not known). */
function didOutcome(d: DryRunRow['did'], targetQueue: string): string | null {
  if (d.disposition === 'faulted') return 'fault';
  if (d.disposition === 'dropped') return 'drop';
  const t = (d.trace ?? null) as RouteTraceView | null;
  if (t?.action === 'fanout') return `fanout ${t.queue} ${[...(t.endpoints ?? [])].sort().join(',')}`;
  if (t?.action === 'queue') return `queue ${t.queue ?? d.todos[0]?.queue ?? targetQueue}`;
  // Before routing kept a trace: what its todos say.
  const queue = d.todos[0]?.queue;
  return queue ? `queue ${queue}` : null;
}

function wouldOutcome(w: DryRunRow['would']): string {
  if (w.action === 'fault' || w.action === 'drop') return w.action;
  if (w.action === 'fanout') return `fanout ${w.queue} ${[...w.endpoints].sort().join(',')}`;
  return `queue ${w.queue}`;
}

/** A ping or a test delivery: recorded before routing, whatever the rules say. */
const isPing = (row: DryRunRow) => !row.routed;

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The dry run: what each replayed event would become beside what it became, then one line of counts. */
export function printDryRun(io: Io, r: WebhookRules): void {
  const rows = r.dry_run ?? [];
  if (rows.length === 0) return io.out('Dry run: no events yet to replay.\n');
  io.out(`Dry run over the ${plural(rows.length, 'latest event', 'latest events')}, newest first:\n`);
  printTable(
    io,
    ['EVENT ID', 'EVENT', 'WOULD', 'QUEUE/ENDPOINTS', 'DID'],
    rows.map((row) => {
      const w = row.would;
      const by = w.trace.stage === 'default' ? 'default' : `rule ${w.trace.rule_index}`;
      const would = isPing(row) ? 'nothing (ping)' : `${w.action} (${by})`;
      const where = isPing(row) || w.queue === null ? null : w.endpoints.length ? `${w.queue} on ${w.endpoints.join(', ')}` : w.queue;
      const made = row.did.todos.map((t) => `${t.slug}/${t.queue}`).join(', ');
      return [row.event_id, row.event, would, where, `${row.did.disposition ?? 'unknown'}${made ? ` → ${made}` : ''}`];
    }),
  );
  io.out(`${dryRunSummary(r)}\n`);
}

/** "50 events: 3 would make a todo, 45 dropped, 2 faulted; 12 differ from what happened". */
export function dryRunSummary(r: WebhookRules): string {
  const rows = r.dry_run ?? [];
  const routed = rows.filter((x) => !isPing(x));
  const count = (a: string[]) => routed.filter((x) => a.includes(x.would.action)).length;
  const differ = routed.filter((x) => wouldOutcome(x.would) !== didOutcome(x.did, r.target_queue)).length;
  const pings = rows.length - routed.length;
  return (
    `${plural(rows.length, 'event', 'events')}: ${count(['queue', 'fanout'])} would make a todo, ${count(['drop'])} dropped, ${count(['fault'])} faulted` +
    `${pings ? `, ${plural(pings, 'ping', 'pings')} recorded as always` : ''}; ${plural(differ, 'differs', 'differ')} from what happened`
  );
}

import type { Command } from 'commander';
import type { EndpointView, PresenceView, RevokeResult, VendResult } from '../api/wire.ts';
import { exportLine } from '../domain/connect-instructions.ts';
import { isSwitchboardError } from '../domain/errors.ts';
import { parsePresenceUntil } from '../domain/presence/until.ts';
import { presenceReason, presenceWithSource } from '../domain/presence-words.ts';
import { ApiClient, type ApiClientOptions } from './client.ts';
import type { CliContext } from './context.ts';
import { loadCredentials } from './credentials.ts';
import { CliError, printJson, printTable, usageError, type Io } from './output.ts';
import { registerGrantCommands } from './endpoint-grants.ts';
import { showPresenceHistory } from './presence-history.ts';

/**
 * An endpoint's presence as the CLI reports it: none for a revoked endpoint, which is never rung
 * (its state says all; the API still computes one). Tables print '-', JSON null.
 */
export const reportedPresence = (e: Pick<EndpointView, 'state' | 'presence'>): EndpointView['presence'] | null => (e.state === 'active' ? e.presence : null);

/** `in (shift) until ...`: presence and source in the API's words (domain/presence-words.ts). */
const describePresence = (p: Pick<PresenceView, 'presence' | 'source' | 'until'>) => `${presenceWithSource(p)}${p.until ? ` until ${p.until}` : ''}`;

/**
 * `--until`: the board's rule (domain/presence/until.ts): a duration from now such as 90m or 2h,
 * or a strict RFC 3339 time; empty means no end. Sent to the API as RFC 3339 (toISOString), so
 * the API reads the instant the CLI read. A refusal is a usage error (exit 2).
 */
export function untilArg(raw: string | undefined, now: Date = new Date()): string | null {
  if (raw === undefined) return null;
  try {
    return parsePresenceUntil(raw, now)?.toISOString() ?? null;
  } catch (err) {
    if (isSwitchboardError(err) && err.code === 'invalid_argument') throw usageError(`--until: ${JSON.stringify(raw)} is neither an RFC 3339 time nor a duration like 90m or 2h`);
    throw err;
  }
}

function printPresence(io: Io, slug: string, p: PresenceView): void {
  io.out(`${slug} is ${describePresence(p)}\n`);
  io.out(`  reason   ${presenceReason(p)}\n`);
  io.out(`  shift    ${p.shift ?? 'none'}\n`);
  io.out(`  pending  ${p.pending} push-eligible todo(s)${p.presence === 'out' ? ', held' : ''}\n`);
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** A client with the caller's credentials; `options` say which flag each API field is, and which endpoint reference was given. */
export const apiClient = async (ctx: CliContext, options: ApiClientOptions = {}) => new ApiClient(await loadCredentials(ctx.env), options);

function printVend(io: Io, v: VendResult): void {
  io.out(`Vended endpoint ${v.slug} for agent "${v.agent_name}".\n\n`);
  io.out(`  MCP URL     ${v.mcp_url}\n`);
  io.out(`  Queues      ${v.queues.join(', ')}\n`);
  io.out(`  Verbs       ${v.verbs.join(', ')}\n\n`);
  // The credential, once: every snippet below reads it from this variable.
  io.out(`Credential, shown once (store it now; lost it? revoke this endpoint and vend a new one):\n`);
  io.out(`  ${exportLine(v.token)}\n\n`);
  io.out(v.connect);
}

function printEndpoint(io: Io, e: EndpointView): void {
  const presence = reportedPresence(e);
  const rows: [string, string][] = [
    ['Slug', e.slug],
    ['Id', e.id],
    ['Agent', e.agent_name],
    ['State', e.state],
    ['Queues', e.queues.join(', ')],
    ['Verbs', e.verbs.join(', ')],
    ['MCP URL', e.mcp_url],
    ['Created', e.created_at],
    ['Last seen', e.last_seen_at ?? 'never'],
    ['Presence', presence ? `${describePresence(presence)}: ${presenceReason(presence)}` : '-'],
    ['Shift', e.shift ?? 'none'],
  ];
  if (e.revoked_at) rows.push(['Revoked', e.revoked_at]);
  for (const [k, v] of rows) io.out(`${k.padEnd(10)} ${v}\n`);
}

async function confirm(ctx: CliContext, question: string): Promise<boolean> {
  ctx.io.err(`${question} [y/N] `);
  const answer = (await ctx.readStdin()).split('\n')[0]?.trim().toLowerCase() ?? '';
  if (!ctx.stdinIsTty) ctx.io.err('\n');
  return answer === 'y' || answer === 'yes';
}

export function registerEndpointCommands(program: Command, ctx: CliContext): void {
  const endpoint = program.command('endpoint').description('vend, inspect and revoke MCP endpoints for your agents');

  endpoint
    .command('vend')
    .description('vend a new endpoint (an MCP URL and a credential shown once) for an agent')
    .argument('<name>', 'agent name; the slug is derived from it')
    .option('-q, --queue <queue>', 'a queue the endpoint may drain (repeat for several; default inbox)', collect)
    .option('--verb <verb>', 'a verb to grant (repeat for several; default: the drain verbs)', collect)
    .option('--json', 'print the API response as JSON')
    .action(async (name: string, opts: { queue?: string[]; verb?: string[]; json?: boolean }) => {
      const api = await apiClient(ctx, { flags: { name: 'NAME', queues: '--queue', verbs: '--verb' } });
      const body: Record<string, unknown> = { name };
      if (opts.queue) body.queues = opts.queue;
      if (opts.verb) body.verbs = opts.verb;
      const v = await api.post<VendResult>('/endpoints', body);
      if (opts.json) printJson(ctx.io, v);
      else printVend(ctx.io, v);
    });

  endpoint
    .command('list')
    .description('list your endpoints (never their credentials)')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const rows = await (await apiClient(ctx)).get<EndpointView[]>('/endpoints');
      if (opts.json) return printJson(ctx.io, rows);
      if (rows.length === 0) return ctx.io.out('No endpoints yet. Vend one with `switchboard endpoint vend NAME`.\n');
      printTable(
        ctx.io,
        ['SLUG', 'AGENT', 'STATE', 'PRESENCE', 'QUEUES', 'LAST SEEN'],
        rows.map((e) => {
          const presence = reportedPresence(e);
          return [e.slug, e.agent_name, e.state, presence ? describePresence(presence) : '-', e.queues.join(','), e.last_seen_at ?? 'never'];
        }),
      );
    });

  endpoint
    .command('show')
    .description('show one endpoint')
    .argument('<ref>', 'endpoint slug or id')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const e = await (await apiClient(ctx, { endpointRef: ref })).get<EndpointView>(`/endpoints/${encodeURIComponent(ref)}`);
      if (opts.json) printJson(ctx.io, e);
      else printEndpoint(ctx.io, e);
    });

  const presenceCommand = (name: string, description: string, presence: 'in' | 'out') =>
    endpoint
      .command(name)
      .description(description)
      .argument('<ref>', 'endpoint slug or id')
      .option('--until <time>', 'when it ends: an RFC 3339 time or a duration like 90m (default: no end; a shift boundary still ends it)')
      .option('--json', 'print JSON')
      .action(async (ref: string, opts: { until?: string; json?: boolean }) => {
        const until = untilArg(opts.until);
        const r = await (await apiClient(ctx, { endpointRef: ref, flags: { until: '--until' } })).request<PresenceView>('PUT', `/endpoints/${encodeURIComponent(ref)}/presence`, { presence, until });
        if (opts.json) printJson(ctx.io, r.body);
        else printPresence(ctx.io, ref, r.body);
      });
  presenceCommand('clock-in', 'clock an endpoint in: its doorbells ring again (it gets one digest of what waited)', 'in');
  presenceCommand('clock-out', 'clock an endpoint out: its doorbells are held; its agent can still pull work', 'out');

  endpoint
    .command('presence')
    .description("show an endpoint's presence: in or out, what decides it, until when, its shift and pending count; or its changes (--history)")
    .argument('<ref>', 'endpoint slug or id')
    .option('--clear', 'clear any clock-in or clock-out override, so the shift (or the default, in) decides')
    .option('--history', 'list its presence changes, newest first (kept 30 days)')
    .option('--since <time>', 'with --history: from an RFC 3339 time or a duration ago like 48h (default: 7 days ago)')
    .option('--limit <n>', 'with --history: at most this many changes (default 200, at most 1000)')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { clear?: boolean; history?: boolean; since?: string; limit?: string; json?: boolean }) => {
      if (opts.history && opts.clear) throw usageError('give --history or --clear (not both)');
      if (!opts.history && (opts.since !== undefined || opts.limit !== undefined)) throw usageError('--since and --limit go with --history');
      const api = await apiClient(ctx, { endpointRef: ref, flags: { since: '--since', limit: '--limit' } });
      if (opts.history) return showPresenceHistory(ctx.io, api, ref, opts);
      const path = `/endpoints/${encodeURIComponent(ref)}/presence`;
      const p = opts.clear ? (await api.request<PresenceView>('DELETE', path)).body : await api.get<PresenceView>(path);
      if (opts.json) printJson(ctx.io, p);
      else printPresence(ctx.io, ref, p);
    });

  endpoint
    .command('shift')
    .description('set or clear the weekly shift during which an endpoint takes doorbells')
    .argument('<ref>', 'endpoint slug or id')
    .argument('[expr]', 'e.g. "TZ=America/Los_Angeles Mon-Fri 09:00-13:00" (no TZ= means UTC)')
    .option('--clear', 'remove the shift')
    .option('--json', 'print JSON')
    .action(async (ref: string, expr: string | undefined, opts: { clear?: boolean; json?: boolean }) => {
      if ((expr === undefined) === !opts.clear) throw usageError('give a shift expression or --clear (not both)');
      const r = await (await apiClient(ctx, { endpointRef: ref, flags: { shift: 'EXPR' } })).request<PresenceView>('PUT', `/endpoints/${encodeURIComponent(ref)}/shift`, { shift: opts.clear ? null : expr });
      if (opts.json) printJson(ctx.io, r.body);
      else printPresence(ctx.io, ref, r.body);
    });

  endpoint
    .command('revoke')
    .description('revoke an endpoint: its credential stops working and its live todos are dead-lettered')
    .argument('<ref>', 'endpoint slug or id')
    .option('-y, --yes', 'do not ask for confirmation')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { yes?: boolean; json?: boolean }) => {
      const api = await apiClient(ctx, { endpointRef: ref });
      if (!opts.yes && !(await confirm(ctx, `Revoke endpoint ${ref}? Its credential stops working and its pending todos are dead-lettered.`))) {
        throw new CliError('not revoked');
      }
      const r = await api.post<RevokeResult>(`/endpoints/${encodeURIComponent(ref)}/revoke`);
      if (opts.json) return printJson(ctx.io, r);
      ctx.io.out(`Revoked ${r.slug}; ${r.todos_dead_lettered} live todo(s) dead-lettered.\n`);
    });

  registerGrantCommands(endpoint, ctx, (options) => apiClient(ctx, options));
}

import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { EventList, MintedWebhookView, WebhookDeleted, WebhookList, WebhookRules } from '../api/wire.ts';
import type { CliContext } from './context.ts';
import { apiClient } from './endpoint.ts';
import { CliError, EXIT_USAGE, printJson, printTable } from './output.ts';
import { printDryRun, printRules, traceWords } from './routing.ts';

function printMinted(ctx: CliContext, w: MintedWebhookView, verb: string): void {
  ctx.io.out(`${verb} ${w.source_type} webhook ${w.webhook_id} → queue ${w.target_queue} (${w.trust_mode}).\n\n`);
  ctx.io.out(`  Ingest URL      ${w.ingest_url}\n`);
  if (w.signing_secret) ctx.io.out(`  Signing secret  ${w.signing_secret}\n`);
  ctx.io.out(`\nShown once: the URL${w.signing_secret ? ' and the secret' : ''} cannot be read back. `);
  ctx.io.out(
    w.signing_secret
      ? 'In the forge, set the payload URL, content type application/json and this secret.\n'
      : 'The unguessable URL is the credential: anyone holding it can deliver.\n',
  );
}

/** A FILE that cannot be read or is not JSON: a usage mistake (2), named as the server names one. */
const fileProblem = (file: string, problem: string) => new CliError(`FILE ${file}: ${problem} (invalid_argument)`, EXIT_USAGE);

/** The rules write in FILE (`-`: stdin), parsed; the server checks its fields. */
async function readRulesFile(ctx: CliContext, file: string): Promise<unknown> {
  let text: string;
  try {
    text = file === '-' ? await ctx.readStdin() : await readFile(file, 'utf8');
  } catch (e) {
    throw fileProblem(file, `cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw fileProblem(file === '-' ? 'stdin' : file, `is not valid JSON (${(e as Error).message})`);
  }
}

const rulesPath = (ref: string, id: string) => `/endpoints/${encodeURIComponent(ref)}/webhooks/${encodeURIComponent(id)}/rules`;

const RULES_FILE_HELP = `
FILE is JSON (- reads stdin); every field is optional, an omitted one is kept and null clears it:
  {"rules": [{"name": "drop CI noise", "when": "event in [\"check_run\", \"status\"]", "action": {"drop": true}},
             {"name": "reviews for the bot", "when": "event == \"pull_request\" && requested_reviewers.exists(r, r == params.bot)",
              "action": {"queue": "reviews", "once": true}}],
   "params": {"bot": "hubot"},
   "default_action": {"queue": "inbox"}}
The first rule whose "when" (a CEL expression) is true decides; an action is {"queue": Q} (with
"once": true for one live todo per issue or pull request, "endpoints": [...] to fan out to your other
endpoints) or {"drop": true}. A rule that fails makes nothing and the producer is told to retry.
The answer replays the webhook's 50 latest events: what each would become beside what it became.
A problem names its field (rules.1.when) and exits 2; nothing is saved then.`;

export function registerWebhookCommands(program: Command, ctx: CliContext): void {
  const webhook = program.command('webhook').description('webhooks that turn deliveries (GitHub, Gitea, generic) into todos');

  webhook
    .command('create')
    .description('create a webhook on one of your endpoints; prints its ingest URL (and signing secret) once')
    .argument('<endpoint>', 'endpoint slug or id')
    .requiredOption('--source <type>', 'github, gitea (signed) or generic (the URL is the credential)')
    .option('-q, --queue <queue>', 'queue deliveries go to (optional when the endpoint has one queue)')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { source: string; queue?: string; json?: boolean }) => {
      const body: Record<string, unknown> = { source_type: opts.source };
      if (opts.queue !== undefined) body.target_queue = opts.queue;
      const w = await (await apiClient(ctx, { endpointRef: ref, flags: { source_type: '--source', target_queue: '--queue' } })).post<MintedWebhookView>(`/endpoints/${encodeURIComponent(ref)}/webhooks`, body);
      if (opts.json) printJson(ctx.io, w);
      else printMinted(ctx, w, 'Created');
    });

  webhook
    .command('list')
    .description("list an endpoint's webhooks (never their secrets)")
    .argument('<endpoint>', 'endpoint slug or id')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const r = await (await apiClient(ctx, { endpointRef: ref })).get<WebhookList>(`/endpoints/${encodeURIComponent(ref)}/webhooks`);
      if (opts.json) return printJson(ctx.io, r);
      if (r.webhooks.length === 0) return ctx.io.out('No webhooks.\n');
      printTable(
        ctx.io,
        ['ID', 'SOURCE', 'TRUST', 'QUEUE', 'URL', 'LAST DELIVERY'],
        r.webhooks.map((w) => [w.webhook_id, w.source_type, w.trust_mode, w.target_queue, w.ingest_url_hint, w.last_delivery_at ?? 'never']),
      );
    });

  webhook
    .command('rotate')
    .description('mint a new ingest URL and secret; the old ones stop working at once')
    .argument('<id>', 'webhook id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const w = await (await apiClient(ctx)).post<MintedWebhookView>(`/webhooks/${encodeURIComponent(id)}/rotate`);
      if (opts.json) printJson(ctx.io, w);
      else printMinted(ctx, w, 'Rotated');
    });

  webhook
    .command('delete')
    .description('delete a webhook; its URL stops working')
    .argument('<id>', 'webhook id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const r = await (await apiClient(ctx)).request<WebhookDeleted>('DELETE', `/webhooks/${encodeURIComponent(id)}`);
      if (opts.json) printJson(ctx.io, r.body);
      else ctx.io.out(`Deleted webhook ${r.body.webhook_id}.\n`);
    });

  const rules = webhook.command('rules').description("a webhook's routing rules: which deliveries become todos, in which queue, and which are dropped");

  rules
    .command('get')
    .description("print a webhook's routing rules in order, its params and its default action")
    .argument('<endpoint>', 'endpoint slug or id')
    .argument('<webhook_id>', 'webhook id (webhook list shows it)')
    .option('--json', 'print JSON')
    .action(async (ref: string, id: string, opts: { json?: boolean }) => {
      const r = await (await apiClient(ctx, { endpointRef: ref })).get<WebhookRules>(rulesPath(ref, id));
      if (opts.json) return printJson(ctx.io, r);
      printRules(ctx.io, r);
    });

  rules
    .command('set')
    .description("save a webhook's routing rules from FILE, then show what the latest events would have become")
    .argument('<endpoint>', 'endpoint slug or id')
    .argument('<webhook_id>', 'webhook id (webhook list shows it)')
    .argument('<file>', 'JSON file with the rules write, or - for stdin')
    .option('--json', 'print JSON')
    .addHelpText('after', RULES_FILE_HELP)
    .action(async (ref: string, id: string, file: string, opts: { json?: boolean }) => {
      const body = await readRulesFile(ctx, file);
      const r = (await (await apiClient(ctx, { endpointRef: ref })).request<WebhookRules>('PUT', rulesPath(ref, id), body)).body;
      if (opts.json) return printJson(ctx.io, r);
      ctx.io.out(`Saved the routing rules of webhook ${r.webhook_id}.\n`);
      printRules(ctx.io, r);
      printDryRun(ctx.io, r);
    });

  rules
    .command('test')
    .description('check the rules in FILE and replay them over the latest events, saving nothing')
    .argument('<endpoint>', 'endpoint slug or id')
    .argument('<webhook_id>', 'webhook id (webhook list shows it)')
    .argument('<file>', 'JSON file with the rules write, or - for stdin')
    .option('--json', 'print JSON')
    .addHelpText('after', RULES_FILE_HELP.replace('A problem names', 'Nothing is saved. A problem names').replace('; nothing is saved then.', '.'))
    .action(async (ref: string, id: string, file: string, opts: { json?: boolean }) => {
      const body = await readRulesFile(ctx, file);
      const r = (await (await apiClient(ctx, { endpointRef: ref })).request<WebhookRules>('POST', `${rulesPath(ref, id)}/test`, body)).body;
      if (opts.json) return printJson(ctx.io, r);
      ctx.io.out(`Tested the rules for webhook ${r.webhook_id} (nothing saved).\n`);
      printRules(ctx.io, r);
      printDryRun(ctx.io, r);
    });

  program
    .command('events')
    .description('delivery history')
    .command('list')
    .description("an endpoint's recent deliveries, newest first")
    .argument('<endpoint>', 'endpoint slug or id')
    .option('--limit <n>', 'at most this many (1-200, default 50)')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { limit?: string; json?: boolean }) => {
      const qs = new URLSearchParams({ endpoint: ref });
      if (opts.limit) qs.set('limit', opts.limit);
      const r = await (await apiClient(ctx, { endpointRef: ref, flags: { limit: '--limit', endpoint: 'REF' } })).get<EventList>(`/events?${qs}`);
      if (opts.json) return printJson(ctx.io, r);
      if (r.events.length === 0) return ctx.io.out('No deliveries.\n');
      printTable(
        ctx.io,
        ['ID', 'RECEIVED', 'SOURCE', 'EVENT', 'TRUST', 'VERIFIED', 'TODO', 'BECAME'],
        r.events.map((e) => [e.id, e.received_at, e.source, e.event_type, e.trust_mode, e.verified ? 'yes' : 'no', e.todo_id, e.routing ? `${e.disposition}: ${traceWords(e.routing)}` : e.disposition]),
      );
    });
}

import type { Command } from 'commander';
import type { EventList, MintedWebhookView, WebhookDeleted, WebhookList } from '../api/wire.ts';
import type { CliContext } from './context.ts';
import { apiClient } from './endpoint.ts';
import { printJson, printTable } from './output.ts';

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
        ['ID', 'RECEIVED', 'SOURCE', 'EVENT', 'TRUST', 'VERIFIED', 'TODO'],
        r.events.map((e) => [e.id, e.received_at, e.source, e.event_type, e.trust_mode, e.verified ? 'yes' : 'no', e.todo_id]),
      );
    });
}

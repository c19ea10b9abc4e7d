import type { Command } from 'commander';
import type { HookDeleted, HookList, MintedHookView } from '../api/wire.ts';
import type { CliContext } from './context.ts';
import { apiClient } from './endpoint.ts';
import { printJson, printTable } from './output.ts';

const collect = (value: string, previous: string[] = []) => [...previous, value];

function printMinted(ctx: CliContext, h: MintedHookView, verb: string): void {
  ctx.io.out(`${verb} notify hook ${h.hook_id} → ${h.url}\n`);
  ctx.io.out(`  Signing secret  ${h.signing_secret}\n`);
  ctx.io.out('Shown once. Verify each call with the Standard Webhooks scheme (webhook-id, webhook-timestamp, webhook-signature).\n');
}

export function registerHookCommands(program: Command, ctx: CliContext): void {
  const hook = program.command('hook').description('notify hooks: HTTPS calls that tell a consumer with no live session that work is waiting');

  hook
    .command('create')
    .description("register a notify hook on one of your endpoints; prints its signing secret once")
    .argument('<endpoint>', 'endpoint slug or id')
    .requiredOption('--url <url>', 'the https URL to call')
    .option('-q, --queue <queue>', 'only for this queue (repeat for several; default all of the endpoint\'s queues)', collect)
    .option('--ignore-presence', 'call it even while the endpoint is clocked out')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { url: string; queue?: string[]; ignorePresence?: boolean; json?: boolean }) => {
      const body: Record<string, unknown> = { url: opts.url };
      if (opts.queue) body.queues = opts.queue;
      if (opts.ignorePresence) body.ignore_presence = true;
      const h = await (await apiClient(ctx, { endpointRef: ref, flags: { url: '--url', queues: '--queue', ignore_presence: '--ignore-presence' } })).post<MintedHookView>(`/endpoints/${encodeURIComponent(ref)}/hooks`, body);
      if (opts.json) printJson(ctx.io, h);
      else printMinted(ctx, h, 'Created');
    });

  hook
    .command('list')
    .description("an endpoint's notify hooks and their health")
    .argument('<endpoint>', 'endpoint slug or id')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const r = await (await apiClient(ctx, { endpointRef: ref })).get<HookList>(`/endpoints/${encodeURIComponent(ref)}/hooks`);
      if (opts.json) return printJson(ctx.io, r);
      if (r.hooks.length === 0) return ctx.io.out(`No notify hooks (up to ${r.ceiling.max}).\n`);
      printTable(
        ctx.io,
        ['ID', 'URL', 'QUEUES', 'STATE', 'LAST', 'FAILURES'],
        r.hooks.map((h) => [
          h.hook_id,
          h.url,
          h.queues.length ? h.queues.join(',') : 'all',
          h.enabled ? 'enabled' : `disabled (${h.disabled_reason})`,
          h.last_attempt_at ? `${h.last_status ?? h.last_error} at ${h.last_attempt_at}` : 'never',
          h.consecutive_failures,
        ]),
      );
    });

  hook
    .command('rotate')
    .description('mint a new signing secret (the old one still signs for 24 hours) and re-enable the hook')
    .argument('<id>', 'hook id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const h = await (await apiClient(ctx)).post<MintedHookView>(`/hooks/${encodeURIComponent(id)}/rotate`);
      if (opts.json) printJson(ctx.io, h);
      else printMinted(ctx, h, 'Rotated');
    });

  hook
    .command('delete')
    .description('delete a notify hook')
    .argument('<id>', 'hook id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const r = await (await apiClient(ctx)).request<HookDeleted>('DELETE', `/hooks/${encodeURIComponent(id)}`);
      if (opts.json) printJson(ctx.io, r.body);
      else ctx.io.out(`Deleted notify hook ${r.body.hook_id}.\n`);
    });
}

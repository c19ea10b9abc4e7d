import type { Command } from 'commander';
import type { GrantRevoked, GrantView } from '../api/wire.ts';
import { ApiClient } from './client.ts';
import type { CliContext } from './context.ts';
import { loadCredentials } from './credentials.ts';
import { CliError, printJson, printTable, type Io } from './output.ts';

/** `auth grants` and `auth revoke-grant`: the human's API grants (browser logins of this CLI, on any machine). */
export function registerApiGrantCommands(auth: Command, ctx: CliContext): void {
  const api = async () => new ApiClient(await loadCredentials(ctx.env));
  auth
    .command('grants')
    .description('your API grants: each browser login (switchboard login --url URL) and any other client acting as you')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const { grants } = await (await api()).get<{ grants: GrantView[] }>('/me/grants');
      if (opts.json) return printJson(ctx.io, { grants });
      if (grants.length === 0) return ctx.io.out('No API grants (logins with a token do not make one).\n');
      printTable(ctx.io, ['GRANT', 'CLIENT', 'GRANTED', 'LAST USED'], grants.map((g) => [g.id, g.client_name, g.created_at, g.last_used_at ?? 'never']));
    });
  auth
    .command('revoke-grant')
    .description('revoke one of your API grants: a browser login on a lost laptop stops working at once')
    .argument('<grant>', 'grant id (from switchboard auth grants)')
    .option('--json', 'print JSON')
    .action(async (grant: string, opts: { json?: boolean }) => {
      if (!/^[0-9a-f-]{36}$/i.test(grant)) throw new CliError(`grant: ${JSON.stringify(grant)} is not a grant id; list them with: switchboard auth grants`);
      const r = (await (await api()).request<GrantRevoked>('DELETE', `/me/grants/${grant}`)).body;
      if (opts.json) return printJson(ctx.io, r);
      ctx.io.out(`Revoked API grant ${r.grant_id}.\n`);
    });
}

/** `endpoint grants` and `endpoint revoke-grant`: the OAuth clients connected to an endpoint by URL alone. */
export function registerGrantCommands(endpoint: Command, ctx: { io: Io }, apiClient: (opts: { endpointRef: string }) => Promise<ApiClient>): void {
  endpoint
    .command('grants')
    .description("list an endpoint's OAuth grants: clients that connected with its URL alone and were approved on the board")
    .argument('<ref>', 'endpoint slug or id')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const api = await apiClient({ endpointRef: ref });
      const { grants } = await api.get<{ grants: GrantView[] }>(`/endpoints/${encodeURIComponent(ref)}/grants`);
      if (opts.json) return printJson(ctx.io, { grants });
      if (grants.length === 0) return ctx.io.out(`No OAuth grants on ${ref}.\n`);
      printTable(
        ctx.io,
        ['GRANT', 'CLIENT', 'GRANTED', 'LAST USED'],
        grants.map((g) => [g.id, g.client_name, g.created_at, g.last_used_at ?? 'never']),
      );
    });

  endpoint
    .command('revoke-grant')
    .description('revoke one OAuth grant of an endpoint: its tokens stop working and its sessions end at once')
    .argument('<ref>', 'endpoint slug or id')
    .argument('<grant>', 'grant id (from switchboard endpoint grants REF)')
    .option('--json', 'print JSON')
    .action(async (ref: string, grant: string, opts: { json?: boolean }) => {
      if (!/^[0-9a-f-]{36}$/i.test(grant)) throw new CliError(`grant: ${JSON.stringify(grant)} is not a grant id; list them with: switchboard endpoint grants ${ref}`);
      const api = await apiClient({ endpointRef: ref });
      const r = (await api.request<GrantRevoked>('DELETE', `/endpoints/${encodeURIComponent(ref)}/grants/${grant}`)).body;
      if (opts.json) return printJson(ctx.io, r);
      ctx.io.out(`Revoked grant ${r.grant_id} of ${ref}.\n`);
    });
}

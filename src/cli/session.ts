import type { Command } from 'commander';
import { VERSION } from '../lib/version.ts';
import type { MeView } from '../api/wire.ts';
import { ApiClient } from './client.ts';
import type { CliContext } from './context.ts';
import { removeCredentials, saveCredentials } from './credentials.ts';
import { printJson, usageError } from './output.ts';

export function registerSessionCommands(program: Command, ctx: CliContext): void {
  program
    .command('login')
    .description('check a personal access token against a server and save both for later commands (file mode 0600)')
    .requiredOption('--url <url>', 'server URL, e.g. http://127.0.0.1:8080')
    .requiredOption('--token <token>', 'personal access token (sbp_...) from `switchboard admin token create`')
    .action(async (opts: { url: string; token: string }) => {
      let url: string;
      try {
        url = new URL(opts.url).toString().replace(/\/+$/, '');
      } catch {
        throw usageError(`--url: ${JSON.stringify(opts.url)} is not an absolute URL`);
      }
      if (!opts.token.startsWith('sbp_')) throw usageError('--token: expected a personal access token starting with sbp_');
      const me = await new ApiClient({ url, token: opts.token }).get<MeView>('/me');
      const path = await saveCredentials({ url, token: opts.token }, ctx.env);
      ctx.io.out(`Logged in to ${url} as ${me.handle}; credentials saved in ${path}.\n`);
    });

  program
    .command('logout')
    .description('forget the saved credentials (the token itself stays valid until revoked)')
    .action(async () => {
      const removed = await removeCredentials(ctx.env);
      ctx.io.out(removed ? 'Logged out.\n' : 'Not logged in.\n');
    });

  program
    .command('version')
    .description('print the CLI version')
    .option('--json', 'print JSON')
    .action((opts: { json?: boolean }) => {
      if (opts.json) printJson(ctx.io, { cli: { version: VERSION } });
      else ctx.io.out(`switchboard ${VERSION}\n`);
    });
}

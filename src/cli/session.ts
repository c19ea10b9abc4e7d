import type { Command } from 'commander';
import { VERSION } from '../lib/version.ts';
import type { MeView } from '../api/wire.ts';
import { ApiClient, ApiError } from './client.ts';
import type { CliContext } from './context.ts';
import { credentialsPath, loadCredentials, removeCredentials, saveCredentials } from './credentials.ts';
import { CliError, printJson, usageError } from './output.ts';
import { normalizeServerUrl } from './server-url.ts';

/** The token `login` was given: `--token`, or (`--with-token`) the first line of stdin. */
async function tokenArgument(ctx: CliContext, opts: { token?: string; withToken?: boolean }): Promise<string> {
  if (opts.token !== undefined && opts.withToken) throw usageError('give the token once: --token TOKEN or --with-token (stdin), not both');
  if (opts.token === undefined && !opts.withToken) throw usageError('a token is required: --with-token reads it from stdin (or --token TOKEN)');
  const from = opts.withToken ? 'stdin' : '--token';
  const token = opts.withToken ? ((await ctx.readStdin()).split('\n').find((l) => l.trim() !== '') ?? '').trim() : opts.token!.trim();
  if (token === '') throw usageError(`${from}: no token given`);
  if (token.startsWith('sbk_')) {
    throw usageError(`${from}: that is an endpoint credential (sbk_...), for an agent's MCP connection; log in with a personal access token (sbp_...) from \`switchboard admin token create HANDLE\``);
  }
  if (!token.startsWith('sbp_')) throw usageError(`${from}: expected a personal access token starting with sbp_`);
  return token;
}

export function registerSessionCommands(program: Command, ctx: CliContext): void {
  program
    .command('login')
    .description('check a personal access token against a server and save both for later commands (file mode 0600)')
    .requiredOption('--url <url>', 'server URL, e.g. http://127.0.0.1:8080 (a trailing /api/v1 is dropped)')
    .option('--with-token', 'read the token from stdin (keeps it out of shell history and ps)')
    .option('--token <token>', 'personal access token (sbp_...) from `switchboard admin token create`')
    .action(async (opts: { url: string; token?: string; withToken?: boolean }) => {
      const url = normalizeServerUrl(opts.url, '--url');
      const token = await tokenArgument(ctx, opts);
      const me = await new ApiClient({ url, token, tokenFrom: opts.withToken ? 'stdin' : '--token' }).get<MeView>('/me');
      const path = await saveCredentials({ url, token }, ctx.env);
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
    .command('auth')
    .description('the credentials this CLI uses')
    .command('status')
    .description('which server, which human, and where the URL and token come from; exits 1 when not logged in or the token is refused')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const creds = await loadCredentials(ctx.env).catch((e: unknown) => {
        if (opts.json) printJson(ctx.io, { logged_in: false, error: (e as Error).message, credentials_file: credentialsPath(ctx.env) });
        throw e;
      });
      const sources = { url: creds.url, url_from: creds.urlFrom, token_prefix: `${creds.token.slice(0, 12)}…`, token_from: creds.tokenFrom };
      let me: MeView;
      try {
        me = await new ApiClient(creds).get<MeView>('/me');
      } catch (e) {
        if (opts.json) printJson(ctx.io, { logged_in: false, ...sources, problem: e instanceof ApiError ? e.problem : 'failed', error: (e as Error).message });
        throw e instanceof CliError ? new CliError(e.message) : e;
      }
      if (opts.json) return printJson(ctx.io, { logged_in: true, ...sources, human: me });
      ctx.io.out(`Logged in to ${creds.url} as ${me.handle}${me.display_name ? ` (${me.display_name})` : ''}.\n`);
      ctx.io.out(`  URL    from ${creds.urlFrom}\n`);
      ctx.io.out(`  Token  ${sources.token_prefix} from ${creds.tokenFrom}\n`);
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

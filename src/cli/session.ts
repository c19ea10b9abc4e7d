import type { Command } from 'commander';
import { VERSION } from '../lib/version.ts';
import type { MeView } from '../api/wire.ts';
import { ApiClient, ApiError } from './client.ts';
import type { CliContext } from './context.ts';
import { credentialsPath, loadCredentials, removeCredentials, saveCredentials } from './credentials.ts';
import { browserLogin } from './login-browser.ts';
import { CliError, printJson, usageError } from './output.ts';
import { normalizeServerUrl } from './server-url.ts';
import { registerApiGrantCommands } from './endpoint-grants.ts';

/** The token `login` was given: `--token`, or (`--with-token`) the first line of stdin. */
async function tokenArgument(ctx: CliContext, opts: { token?: string; withToken?: boolean }): Promise<string> {
  if (opts.token !== undefined && opts.withToken) throw usageError('give the token once: --token TOKEN or --with-token (stdin), not both');
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
    .description('log in through the browser (authorization code + PKCE, a loopback redirect), or check a personal access token; saves the credentials for later commands (file mode 0600)')
    .requiredOption('--url <url>', 'server URL, e.g. http://127.0.0.1:8080 (a trailing /api/v1 is dropped)')
    .option('--no-browser', 'print the login URL without opening a browser (open it yourself, in a browser on this machine)')
    .option('--with-token', 'instead of the browser: read a personal access token from stdin (keeps it out of shell history and ps)')
    .option('--token <token>', 'instead of the browser: a personal access token (sbp_...) from `switchboard admin token create`')
    .addHelpText(
      'after',
      `
Without a token the CLI opens your browser on the server's consent page (sign in to the board if
it asks), waits up to 5 minutes for the answer on http://127.0.0.1:<port>/callback, and saves an
access token with a refresh token; later commands refresh it silently. The URL is always printed.
The browser must run on this machine (its answer goes to this machine's 127.0.0.1): over SSH, log
in with --with-token instead.`,
    )
    .action(async (opts: { url: string; token?: string; withToken?: boolean; browser: boolean }) => {
      const url = normalizeServerUrl(opts.url, '--url');
      if (opts.token === undefined && !opts.withToken) {
        const creds = await browserLogin(ctx, url, { browser: opts.browser });
        const me = await new ApiClient({ ...creds, tokenFrom: 'the browser login' }).get<MeView>('/me');
        const path = await saveCredentials(creds, ctx.env);
        ctx.io.out(`Logged in to ${url} as ${me.handle}; credentials saved in ${path}.\n`);
        return;
      }
      if (!opts.browser) throw usageError('--no-browser is for the browser login; with a token there is no browser to open');
      const token = await tokenArgument(ctx, opts);
      const me = await new ApiClient({ url, token, tokenFrom: opts.withToken ? 'stdin' : '--token' }).get<MeView>('/me');
      const path = await saveCredentials({ url, token }, ctx.env);
      ctx.io.out(`Logged in to ${url} as ${me.handle}; credentials saved in ${path}.\n`);
    });

  program
    .command('logout')
    .description('forget the saved credentials (the token, or the browser login\'s grant, stays valid on the server until it is revoked or expires)')
    .action(async () => {
      const removed = await removeCredentials(ctx.env);
      ctx.io.out(removed ? 'Logged out.\n' : 'Not logged in.\n');
    });

  const auth = program.command('auth').description('the credentials this CLI uses');
  registerApiGrantCommands(auth, ctx);
  auth
    .command('status')
    .description('which server, which human, and where the URL and token come from; exits 1 when not logged in or the token is refused')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const creds = await loadCredentials(ctx.env).catch((e: unknown) => {
        if (opts.json) printJson(ctx.io, { logged_in: false, error: (e as Error).message, credentials_file: credentialsPath(ctx.env) });
        throw e;
      });
      const api = new ApiClient(creds);
      const sources = () => ({
        url: creds.url,
        url_from: creds.urlFrom,
        token_prefix: `${api.token.slice(0, 12)}…`,
        token_from: creds.tokenFrom,
        login: creds.oauth ? 'browser' : 'token',
        ...(api.expiresAt ? { expires_at: api.expiresAt } : {}),
      });
      let me: MeView;
      try {
        me = await api.get<MeView>('/me');
      } catch (e) {
        if (opts.json) printJson(ctx.io, { logged_in: false, ...sources(), problem: e instanceof ApiError ? e.problem : 'failed', error: (e as Error).message });
        throw e instanceof CliError ? new CliError(e.message) : e;
      }
      if (opts.json) return printJson(ctx.io, { logged_in: true, ...sources(), human: me });
      const s = sources();
      ctx.io.out(`Logged in to ${creds.url} as ${me.handle}${me.display_name ? ` (${me.display_name})` : ''}.\n`);
      ctx.io.out(`  URL    from ${creds.urlFrom}\n`);
      ctx.io.out(`  Token  ${s.token_prefix} from ${creds.tokenFrom}${s.expires_at ? ` (browser login; refreshed automatically, this one until ${s.expires_at})` : ''}\n`);
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

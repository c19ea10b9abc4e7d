import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { ConfigError, loadConfig } from '../config.ts';
import { createLogger } from '../lib/log.ts';
import type { Humans } from '../services/humans.ts';
import { rfc3339 } from '../domain/time.ts';
import type { CliContext } from './context.ts';
import { CliError, printJson, printTable } from './output.ts';

/**
 * Opens the database the server uses (same configuration as `serve`), brings the schema up to
 * date and runs `fn`. Admin commands act on the database directly: they are how the first human
 * and the first token come to exist.
 */
/** Who runs an admin command: the operating-system user, as audit lines name them. */
function adminUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}

export async function withHumans<T>(ctx: CliContext, fn: (humans: Humans) => Promise<T>, opts: { init?: boolean } = {}): Promise<T> {
  let config;
  let admin;
  try {
    config = loadConfig(ctx.env);
    const log = createLogger(config.logLevel === 'debug' ? 'debug' : 'warn', process.stderr, config.logFormat);
    // Token minting and revocation leave an audit line, whatever the level: this terminal is where it goes.
    const auditLog = createLogger('info', process.stderr, config.logFormat);
    if (config.dataDirRelative !== undefined && !config.databaseUrl) ctx.io.err(`switchboard: SWITCHBOARD_DATA_DIR ${config.dataDirRelative} is ${config.dataDir}\n`);
    // Loaded here, not at the top: the composition root is most of the CLI's start-up time.
    const { openAdmin } = await import('../app.ts');
    admin = await openAdmin(config, log, { ...opts, auditLog, by: `admin:${adminUser()}` });
  } catch (e) {
    if (e instanceof ConfigError) throw new CliError(e.message);
    throw e;
  }
  // Which database an admin command changed is never a guess.
  ctx.io.err(`switchboard: database: ${admin.database}\n`);
  try {
    return await fn(admin.humans);
  } finally {
    await admin.close();
  }
}

export function registerAdminCommands(program: Command, ctx: CliContext): void {
  const admin = program
    .command('admin')
    .description('manage humans, their personal access tokens and board sign-in links (acts on the database directly, on the server host)')
    .option('--init', 'create the embedded database when the data dir has none (otherwise refused: it would not be the server\'s)');
  const run = <T>(fn: (humans: Humans) => Promise<T>) => withHumans(ctx, fn, { init: admin.opts().init === true });

  const human = admin.command('human').description('humans: the people who own endpoints');
  human
    .command('add')
    .description('add a human')
    .argument('<handle>', 'short unique name, e.g. ops')
    .option('--name <display name>', 'display name')
    .option('--email <email>', 'email address')
    .option('--json', 'print JSON')
    .action(async (handle: string, opts: { name?: string; email?: string; json?: boolean }) => {
      const h = await run((humans) => humans.add({ handle, displayName: opts.name, email: opts.email }));
      if (opts.json) return printJson(ctx.io, { id: h.id, handle: h.handle, display_name: h.display_name, email: h.email });
      ctx.io.out(`Added human ${h.handle} (${h.id}). Next: switchboard admin token create ${h.handle}\n`);
    });
  human
    .command('list')
    .description('list humans')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const rows = await run((humans) => humans.list());
      if (opts.json) return printJson(ctx.io, rows.map((h) => ({ id: h.id, handle: h.handle, display_name: h.display_name, email: h.email, created_at: rfc3339(h.created_at) })));
      if (rows.length === 0) return ctx.io.out('No humans yet. Add one with `switchboard admin human add HANDLE`.\n');
      printTable(ctx.io, ['HANDLE', 'NAME', 'EMAIL', 'ID'], rows.map((h) => [h.handle, h.display_name, h.email, h.id]));
    });

  admin
    .command('login-link')
    .description('mint a one-time board sign-in link for a human (single use, valid 15 minutes)')
    .argument('<handle>', 'the human')
    .option('--json', 'print JSON')
    .action(async (handle: string, opts: { json?: boolean }) => {
      let baseUrl: string;
      try {
        baseUrl = loadConfig(ctx.env).baseUrl;
      } catch (e) {
        if (e instanceof ConfigError) throw new CliError(e.message);
        throw e;
      }
      const link = await run((humans) => humans.createLoginLink(handle));
      const url = `${baseUrl}/login/${link.token}`;
      if (opts.json) return printJson(ctx.io, { url, handle: link.human.handle, expires_at: rfc3339(link.expiresAt) });
      ctx.io.out(`${url}\n`);
      ctx.io.err(`Sign-in link for ${link.human.handle}: works once, until ${rfc3339(link.expiresAt)} (15 minutes). Open it in the browser to sign in.\n`);
    });

  const token = admin.command('token').description('personal access tokens (sbp_...) for the API and the CLI');
  token
    .command('create')
    .description('mint a personal access token for a human; it is printed once')
    .argument('<handle>', 'the human')
    .option('--name <name>', 'a label, e.g. the machine it is for')
    .option('--json', 'print JSON')
    .action(async (handle: string, opts: { name?: string; json?: boolean }) => {
      const { token: plaintext, record } = await run((humans) => humans.createToken({ handle, name: opts.name }));
      if (opts.json) return printJson(ctx.io, { id: record.id, token: plaintext, prefix: record.token_prefix, name: record.name });
      ctx.io.out(`${plaintext}\n`);
      ctx.io.err(`Token ${record.token_prefix}… for ${handle} (id ${record.id}). It is shown once; store it now.\n`);
    });
  token
    .command('list')
    .description("list a human's tokens (prefixes only)")
    .argument('<handle>', 'the human')
    .option('--json', 'print JSON')
    .action(async (handle: string, opts: { json?: boolean }) => {
      const rows = await run((humans) => humans.listTokens(handle));
      const out = rows.map((t) => ({
        id: t.id,
        prefix: t.token_prefix,
        name: t.name,
        created_at: rfc3339(t.created_at),
        last_used_at: rfc3339(t.last_used_at) ?? null,
        revoked_at: rfc3339(t.revoked_at) ?? null,
      }));
      if (opts.json) return printJson(ctx.io, out);
      if (out.length === 0) return ctx.io.out(`No tokens for ${handle}.\n`);
      printTable(ctx.io, ['ID', 'PREFIX', 'NAME', 'CREATED', 'LAST USED', 'REVOKED'], out.map((t) => [t.id, t.prefix, t.name, t.created_at, t.last_used_at, t.revoked_at]));
    });
  token
    .command('revoke')
    .description('revoke a token by id or prefix')
    .argument('<token>', 'token id or its sbp_ prefix')
    .action(async (ref: string) => {
      const t = await run((humans) => humans.revokeToken(ref));
      ctx.io.out(`Revoked token ${t.token_prefix}… (${t.id}).\n`);
    });
}

import type { Command } from 'commander';
import { openAdmin, startApp } from '../app.ts';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { createLogger } from '../lib/log.ts';
import type { CliContext } from './context.ts';
import { CliError } from './output.ts';

function configFrom(ctx: CliContext): Config {
  try {
    return loadConfig(ctx.env);
  } catch (e) {
    if (e instanceof ConfigError) throw new CliError(e.message);
    throw e;
  }
}

export function registerServeCommands(program: Command, ctx: CliContext): void {
  program
    .command('serve')
    .description('run the server (on the embedded PostgreSQL unless SWITCHBOARD_DATABASE_URL is set)')
    .addHelpText(
      'after',
      [
        '',
        'Configured by SWITCHBOARD_* environment variables (the README lists them all), for example:',
        '  SWITCHBOARD_LISTEN=127.0.0.1:8080   SWITCHBOARD_BASE_URL=https://switchboard.example.com',
        '  SWITCHBOARD_DATABASE_URL=postgres://...   SWITCHBOARD_LISTEN_DATABASE_URL=postgres://... (behind PgBouncer)',
        '  SWITCHBOARD_TRUSTED_PROXIES=10.0.0.0/8 (behind a load balancer)',
        'Several instances on one database answer any agent: see docs/deploy.md.',
      ].join('\n'),
    )
    .action(async () => {
      const config = configFrom(ctx);
      const log = createLogger(config.logLevel, process.stdout, config.logFormat);
      if (config.dataDirRelative !== undefined && !config.databaseUrl) {
        log.info({ given: config.dataDirRelative, data_dir: config.dataDir }, 'SWITCHBOARD_DATA_DIR is relative: resolved against the working directory');
      }
      const app = await startApp({ config, log }).catch((e: unknown) => {
        throw e instanceof ConfigError ? new CliError(e.message) : e;
      });
      ctx.io.err(`switchboard listening on ${app.url} (public URL ${app.baseUrl}); Ctrl-C stops it\n`);
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          log.info({ signal }, 'shutting down');
          app.stop().then(resolve, (err: unknown) => {
            log.error({ err: (err as Error).message }, 'shutdown failed');
            resolve();
          });
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
    });

  program
    .command('migrate')
    .description('apply pending database migrations and exit (serve also applies them at startup)')
    .option('--init', 'create the embedded database when the data dir has none')
    .action(async (opts: { init?: boolean }) => {
      const config = configFrom(ctx);
      const log = createLogger(config.logLevel, process.stderr, config.logFormat);
      const { applied, database, close } = await openAdmin(config, log, { init: opts.init === true }).catch((e: unknown) => {
        throw e instanceof ConfigError ? new CliError(e.message) : e;
      });
      await close();
      ctx.io.err(`switchboard: database: ${database}\n`);
      ctx.io.out(applied.length ? `Applied ${applied.join(', ')}.\n` : 'Schema is up to date.\n');
    });
}

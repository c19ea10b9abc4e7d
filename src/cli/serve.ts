import type { Command } from 'commander';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { configReferenceText } from '../lib/config-reference.ts';
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
        'Environment (a bad value stops serve, naming the variable; the README says each at length):',
        configReferenceText(),
        '',
        'Several instances on one database answer any agent: see docs/deploy.md.',
      ].join('\n'),
    )
    .action(async () => {
      const config = configFrom(ctx);
      const log = createLogger(config.logLevel, process.stdout, config.logFormat);
      if (config.dataDirRelative !== undefined && !config.databaseUrl) {
        log.info({ given: config.dataDirRelative, data_dir: config.dataDir }, 'SWITCHBOARD_DATA_DIR is relative: resolved against the working directory');
      }
      // The composition root is loaded only by the commands that run it: a client command starts faster.
      const { startApp } = await import('../app.ts');
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
      const { openAdmin } = await import('../app.ts');
      const { applied, database, close } = await openAdmin(config, log, { init: opts.init === true }).catch((e: unknown) => {
        throw e instanceof ConfigError ? new CliError(e.message) : e;
      });
      await close();
      ctx.io.err(`switchboard: database: ${database}\n`);
      ctx.io.out(applied.length ? `Applied ${applied.join(', ')}.\n` : 'Schema is up to date.\n');
    });
}

import { Command, CommanderError } from 'commander';
import { isSwitchboardError } from '../domain/errors.ts';
import { VERSION } from '../lib/version.ts';
import { registerAdminCommands } from './admin.ts';
import type { CliContext } from './context.ts';
import { registerDoctorCommand } from './doctor.ts';
import { registerEndpointCommands } from './endpoint.ts';
import { CliError, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, processIo } from './output.ts';
import { registerServeCommands } from './serve.ts';
import { registerSessionCommands } from './session.ts';
import { registerTodoCommands } from './todo.ts';
import { registerWebhookCommands } from './webhook.ts';
import { registerHookCommands } from './hook.ts';
import { registerBridgeCommand } from './bridge.ts';
import { registerCompletionCommand } from './completion.ts';

async function readAllStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function buildProgram(ctx: CliContext): Command {
  const program = new Command('switchboard')
    .description('Switchboard: hand work to AI coding agents over MCP, and ring them when it is ready.')
    .version(VERSION, '-v, --version', 'print the version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => ctx.io.out(s), writeErr: (s) => ctx.io.err(s) })
    .exitOverride();
  program.addHelpText(
    'after',
    `
Server side (on the host, same environment as serve):
  switchboard serve                     run the server
  switchboard admin human add ops       add a human
  switchboard admin token create ops    mint a personal access token (printed once)

Client side (log in once through the browser, or set SWITCHBOARD_URL + SWITCHBOARD_TOKEN):
  switchboard login --url http://127.0.0.1:8080    approve in the browser (--no-browser prints the URL)
  switchboard login --url URL --with-token          or a personal access token (sbp_...) on stdin
  switchboard endpoint vend review-bot --queue reviews
  switchboard todo push review-bot-3fa91c0d "Review PR 12" --queue reviews --payload '{"pr":12}'
  switchboard doctor review-bot-3fa91c0d   prove the doorbell loop end to end

Exit codes:
  0  ok
  1  refused or failed: not logged in, server unreachable, token refused (401) or a browser login
     that can no longer be refreshed, forbidden (403), not found (404), conflict (409),
     rate limited (429), server error (5xx)
  2  usage error: a wrong command, flag or argument, whether the CLI or the server (400) found it

Shell completion: switchboard completion bash|zsh|fish (e.g. source <(switchboard completion bash)).`,
  );
  registerServeCommands(program, ctx);
  registerAdminCommands(program, ctx);
  registerSessionCommands(program, ctx);
  registerEndpointCommands(program, ctx);
  registerTodoCommands(program, ctx);
  registerWebhookCommands(program, ctx);
  registerHookCommands(program, ctx);
  registerDoctorCommand(program, ctx);
  registerBridgeCommand(program, ctx);
  registerCompletionCommand(program, ctx);
  for (const c of program.commands) applyExitOverride(c, ctx);
  return program;
}

function applyExitOverride(cmd: Command, ctx: CliContext): void {
  cmd.exitOverride().configureOutput({ writeOut: (s) => ctx.io.out(s), writeErr: (s) => ctx.io.err(s) });
  cmd.showHelpAfterError('(run with --help for usage)');
  for (const c of cmd.commands) applyExitOverride(c, ctx);
}

/** Runs the CLI and returns the exit code. Errors print one line on stderr. */
export async function main(argv: string[], partial: Partial<CliContext> = {}): Promise<number> {
  const ctx: CliContext = {
    io: partial.io ?? processIo,
    env: partial.env ?? process.env,
    readStdin: partial.readStdin ?? readAllStdin,
    stdinIsTty: partial.stdinIsTty ?? Boolean(process.stdin.isTTY),
  };
  const program = buildProgram(ctx);
  // -V was the version flag before -v; it still works on its own.
  const args = argv.length === 3 && argv[2] === '-V' ? [...argv.slice(0, 2), '--version'] : argv;
  try {
    await program.parseAsync(args);
    return EXIT_OK;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return EXIT_OK;
      // commander already printed the message; a bare `switchboard <group>` prints help and lands here too.
      return e.code === 'commander.executeSubCommandAsync' ? EXIT_FAILURE : EXIT_USAGE;
    }
    if (e instanceof CliError) {
      ctx.io.err(`switchboard: ${e.message}\n`);
      return e.exitCode;
    }
    if (isSwitchboardError(e)) {
      ctx.io.err(`switchboard: ${e.message} (${e.code})\n`);
      return e.code === 'invalid_argument' ? EXIT_USAGE : EXIT_FAILURE;
    }
    ctx.io.err(`switchboard: ${(e as Error).message}\n`);
    return EXIT_FAILURE;
  }
}

import type { Command } from 'commander';
import { fileURLToPath } from 'node:url';
import { ENDPOINT_CREDENTIAL_PREFIX, PERSONAL_TOKEN_PREFIX } from '../lib/secrets.ts';
import type { CliContext } from './context.ts';
import { usageError } from './output.ts';

export const AGENT_TOKEN_ENV = 'SWITCHBOARD_AGENT_TOKEN';

const looksLikeToken = (s: string): boolean => /sb[kp]_/i.test(s);

/** This checkout's entry point, as .mcp.json must name it (the package is not published to npm). */
const BIN = fileURLToPath(new URL('../../bin/switchboard.js', import.meta.url));

const HELP = `
The credential is read from the environment, never from the command line (where ps and shell
history would show it):
  ${AGENT_TOKEN_ENV}   the endpoint credential (sbk_...) that endpoint vend printed once

stdout carries the MCP stdio channel and nothing else; the bridge logs to stderr. It exits when
stdin closes.

Claude Code shows doorbells only from channel servers it was told to load at launch (Claude Code
2.1.80+, signed in with claude.ai). With the entry below in a project's .mcp.json, start it with:
  claude --dangerously-load-development-channels server:switchboard --allowedTools mcp__switchboard
(--allowedTools lets a woken session claim and complete without a permission prompt.)

.mcp.json (the key "switchboard" is the name in server:switchboard):
  {"mcpServers":{"switchboard":{"command":"node",
    "args":[${JSON.stringify(BIN)},"bridge","--url","<mcp_url>"],
    "env":{"${AGENT_TOKEN_ENV}":"\${${AGENT_TOKEN_ENV}}"}}}}
The package is not published to npm, so name this checkout's bin/switchboard.js (dependencies
installed with npm ci). With switchboard on PATH (npm link in the checkout, or npm install -g
<checkout>), "command":"switchboard","args":["bridge","--url","<mcp_url>"] works too; plain
"npx switchboard" works only inside the checkout. Claude Code expands \${${AGENT_TOKEN_ENV}}
from its own environment: export it before starting claude.

What it does: tools/list and tools/call go to the Switchboard endpoint, answers and errors come
back as they are; every notifications/claude/channel the server sends (doorbells, digests,
self-test rings) is passed on. If the server goes away it reconnects (0.5 s doubling to 15 s),
starting a new session when the old one is gone; a tool call meanwhile answers "switchboard
unreachable, retrying" at once. Prove the whole loop with the test_doorbell tool.

Example:
  export ${AGENT_TOKEN_ENV}=sbk_...
  switchboard bridge --url http://127.0.0.1:8080/mcp/review-bot-3fa91c0d
`;

/** The endpoint URL, checked: http(s), no credential in it. */
export function parseBridgeUrl(raw: string): URL {
  if (looksLikeToken(raw)) throw usageError(`--url must not carry a credential: set ${AGENT_TOKEN_ENV} instead`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usageError(`--url: ${JSON.stringify(raw)} is not a URL; give the MCP URL endpoint vend printed (http://host:port/mcp/<slug>)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw usageError('--url must be an http:// or https:// URL');
  if (url.username || url.password) throw usageError(`--url must not carry a user or password: the credential comes from ${AGENT_TOKEN_ENV}`);
  return url;
}

/** The credential from the environment, checked; a usage error names what is wrong. */
export function agentToken(env: NodeJS.ProcessEnv): string {
  const token = env[AGENT_TOKEN_ENV]?.trim();
  if (!token) throw usageError(`${AGENT_TOKEN_ENV} is not set: export the endpoint credential (sbk_...) that endpoint vend printed`);
  if (token.startsWith('${')) {
    throw usageError(`${AGENT_TOKEN_ENV} holds the unexpanded text ${token.slice(0, 40)}: export ${AGENT_TOKEN_ENV} in the shell that starts the client`);
  }
  if (token.startsWith(PERSONAL_TOKEN_PREFIX)) {
    throw usageError(`${AGENT_TOKEN_ENV} holds a personal token (sbp_...): the bridge needs the endpoint credential (sbk_...) that endpoint vend printed`);
  }
  if (!token.startsWith(ENDPOINT_CREDENTIAL_PREFIX)) throw usageError(`${AGENT_TOKEN_ENV} is not an endpoint credential: it must start with sbk_`);
  return token;
}

const isLoopback = (host: string): boolean => host === 'localhost' || host === '[::1]' || /^127\./.test(host);

export function registerBridgeCommand(program: Command, ctx: CliContext): void {
  program
    .command('bridge')
    .description('run a stdio MCP server for one endpoint that relays its tools and doorbells (a Claude Code channel server)')
    .requiredOption('--url <mcp_url>', "the endpoint's MCP URL, as endpoint vend printed it")
    .addHelpText('after', HELP)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (opts: { url: string }, cmd: Command) => {
      if (cmd.args.some(looksLikeToken)) {
        throw usageError(`credentials are never taken from the command line (ps and shell history would show them): set ${AGENT_TOKEN_ENV}`);
      }
      if (cmd.args.length > 0) throw usageError(`unexpected ${cmd.args.length === 1 ? 'argument' : 'arguments'}: ${cmd.args.join(' ')} (only --url is taken)`);
      const url = parseBridgeUrl(opts.url);
      const token = agentToken(ctx.env);
      const log = (level: string, message: string) => {
        if (level === 'debug' && !ctx.env.SWITCHBOARD_BRIDGE_DEBUG) return;
        ctx.io.err(`switchboard bridge: ${level === 'info' ? '' : `${level}: `}${message.split(token).join('[credential]')}\n`);
      };
      if (url.protocol === 'http:' && !isLoopback(url.hostname)) log('warn', `${url.host} is reached over plain http: the credential crosses the network unencrypted`);
      const { runBridge } = await import('./bridge/relay.ts');
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
      try {
        await runBridge({ url, token, log, signal: stop.signal });
      } finally {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
      // Whatever the HTTP client keeps alive, the process ends once stdin has closed.
      setTimeout(() => process.exit(process.exitCode ?? 0), 2000).unref();
    });
}

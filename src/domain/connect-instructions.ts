import { CONNECT_GUIDE_PATH } from './guides.ts';

// How an agent connects to a vended endpoint, in one place for every surface that vends (the CLI,
// POST /api/v1/endpoints and the board). Two ways for Claude Code:
//
//  - through `switchboard bridge`, a local stdio MCP server: Claude Code's channel docs describe a
//    channel server as a subprocess it spawns and talks to over stdio, and during the research
//    preview a custom one is heard only when named at launch with
//    `--dangerously-load-development-channels server:<name>`. This is the way doorbells arrive.
//  - directly over HTTP: every tool works; the docs say nothing of HTTP servers as channels.
//    A client that speaks the MCP authorization spec may take this way with the URL alone: it
//    gets its token from Switchboard's OAuth server after a human approves on the board.
//
// The credential is never inside a snippet: each one names ${SWITCHBOARD_AGENT_TOKEN}, which
// Claude Code expands in .mcp.json (command, args, env, url, headers), so the file holds no secret
// and can be committed. The value appears once, in `exportLine`.

/** The variable every snippet reads the endpoint credential from (and `switchboard bridge` reads). */
export const AGENT_TOKEN_ENV = 'SWITCHBOARD_AGENT_TOKEN';
/** The key under `mcpServers` when the caller does not choose one. */
export const DEFAULT_SERVER_NAME = 'switchboard';
/** The oldest Claude Code with channels (research preview). */
export const CHANNELS_MIN_VERSION = '2.1.80';

const TOKEN_REF = `\${${AGENT_TOKEN_ENV}}`;

export interface HttpServerEntry {
  type: 'http';
  url: string;
  headers: { Authorization: string };
}
export interface BridgeServerEntry {
  command: string;
  args: string[];
  env: Record<string, string>;
}
export interface McpJson<E> {
  mcpServers: Record<string, E>;
}

export interface ConnectInput {
  mcpUrl: string;
  slug: string;
  /** Key under `mcpServers`, and the name after `server:` at launch. Default `switchboard`. */
  serverName?: string;
  /** Where the connect guide is: a full URL where the surface knows its server, else the path. */
  guideUrl?: string;
}

export interface ConnectInstructions {
  serverName: string;
  /** Through `switchboard bridge` (stdio): tools and doorbells. */
  bridge: { mcpJson: McpJson<BridgeServerEntry>; claudeMcpAdd: string; launch: string; notes: string[] };
  /** Directly over Streamable HTTP: tools; doorbells not documented. The last note: the URL alone, over OAuth. */
  http: { mcpJson: McpJson<HttpServerEntry>; claudeMcpAdd: string; notes: string[] };
  /** Where the credential goes: the environment of the shell that starts the client. */
  credentialNote: string;
  /** For clients that cannot be rung (claude -p, MCP clients without channels). */
  withoutChannels: string[];
  /** How to prove the loop. */
  check: string;
  guideUrl: string;
}

/** A word the shell passes through unchanged, single-quoted when it is not one already. */
const shellWord = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export function connectInstructions(input: ConnectInput): ConnectInstructions {
  const name = input.serverName ?? DEFAULT_SERVER_NAME;
  const url = input.mcpUrl;
  const guideUrl = input.guideUrl ?? CONNECT_GUIDE_PATH;
  const bridgeArgs = ['bridge', '--url', url];
  // Claude Code names a server's tools mcp__<server>__<tool>, the name with every character outside
  // [A-Za-z0-9_-] as `_` (names it accepts have none), so mcp__<name> allows all of them: a woken
  // session claims and completes without stopping at a permission prompt.
  const launch = `claude --dangerously-load-development-channels server:${shellWord(name)} --allowedTools ${shellWord(`mcp__${name.replace(/[^A-Za-z0-9_-]/g, '_')}`)}`;
  return {
    serverName: name,
    bridge: {
      mcpJson: { mcpServers: { [name]: { command: 'switchboard', args: bridgeArgs, env: { [AGENT_TOKEN_ENV]: TOKEN_REF } } } },
      // The name comes first: `--env` (like `--header`) takes any number of values, so a name
      // after it is read as one more KEY=value and Claude Code refuses the line.
      claudeMcpAdd:
        `claude mcp add ${shellWord(name)} --transport stdio --scope user --env ${AGENT_TOKEN_ENV}="$${AGENT_TOKEN_ENV}"` +
        ` -- switchboard bridge --url ${shellWord(url)}`,
      launch,
      notes: [
        'The bridge is `switchboard bridge`, a local stdio MCP server: it relays the tools to this endpoint over HTTP and hands each doorbell to Claude Code as a channel message.',
        'The `switchboard` command must be on the PATH Claude Code starts it from: run `npm link` once in the Switchboard checkout (or `npm install -g <path to the checkout>`), or make the entry `"command": "node"` with the checkout\'s `bin/switchboard.js` first in `args`. The package is not on the npm registry, so `npx switchboard` works only inside the checkout.',
        `Doorbells need Claude Code ${CHANNELS_MIN_VERSION} or later, signed in with a claude.ai account (not an API key), and the channel named at every launch: \`${launch}\`. Without the flag the tools work and no doorbell is ever heard.`,
      ],
    },
    http: {
      mcpJson: { mcpServers: { [name]: { type: 'http', url, headers: { Authorization: `Bearer ${TOKEN_REF}` } } } },
      claudeMcpAdd: `claude mcp add ${shellWord(name)} --transport http --scope user ${shellWord(url)} --header "Authorization: Bearer $${AGENT_TOKEN_ENV}"`,
      notes: [
        'Every tool works this way. Claude Code documents channel servers only as local stdio subprocesses, so do not count on doorbells over a direct HTTP connection: use the bridge for them, or pull.',
        `An OAuth-capable client can connect with this URL alone, no header and no credential: \`claude mcp add ${shellWord(name)} --transport http --scope user ${shellWord(url)}\`, then \`/mcp\` in Claude Code to authenticate, and approve it on the board's consent page (the connect guide's "Connect by URL (OAuth)").`,
      ],
    },
    credentialNote:
      `Both read the credential from ${AGENT_TOKEN_ENV}: export it in the shell that starts Claude Code. ` +
      `Claude Code expands ${TOKEN_REF} in .mcp.json, so the file holds no secret and can be committed.`,
    withoutChannels: [
      'Clients that cannot be rung (`claude -p`, MCP clients without channels) pull instead: they call `claim_next` with `wait` (a long poll, up to 60 s) when ready for work.',
      `Or give the endpoint a notify hook that starts a run when work is ready: \`switchboard hook create ${input.slug} --url https://...\`.`,
    ],
    check: `Check the whole loop with \`switchboard doctor ${input.slug}\`, or ask the agent to call \`test_doorbell\`.`,
    guideUrl,
  };
}

/** The line that carries the credential: the one place a surface prints it. */
export const exportLine = (credential: string): string => `export ${AGENT_TOKEN_ENV}=${credential}`;

const indent = (text: string, by: string) =>
  text
    .split('\n')
    .map((l) => (l === '' ? l : by + l))
    .join('\n');

/** The instructions as plain text (CLI output, the API's `connect`). Holds no credential. */
export function connectText(c: ConnectInstructions): string {
  const json = (v: unknown) => indent(JSON.stringify(v, null, 2), '  ');
  const bullets = (lines: string[]) => lines.map((l) => `  - ${l}`).join('\n');
  return [
    `Connect Claude Code, server name "${c.serverName}". ${c.credentialNote}`,
    '',
    '1. Through the bridge (stdio): tools and doorbells. In the project\'s .mcp.json:',
    json(c.bridge.mcpJson),
    '  or for your user:',
    `  ${c.bridge.claudeMcpAdd}`,
    '  then start Claude Code with the channel named:',
    `  ${c.bridge.launch}`,
    bullets(c.bridge.notes),
    '',
    '2. Directly over HTTP: tools only. In the project\'s .mcp.json:',
    json(c.http.mcpJson),
    '  or for your user:',
    `  ${c.http.claudeMcpAdd}`,
    bullets(c.http.notes),
    '',
    c.withoutChannels.join('\n'),
    c.check,
    `Guide: ${c.guideUrl}`,
    '',
  ].join('\n');
}

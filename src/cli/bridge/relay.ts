import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError,
  ResultSchema,
  type CallToolResult,
  type Implementation,
  type JSONRPCMessage,
  type ListToolsResult,
  type Notification,
} from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { VERSION } from '../../lib/version.ts';
import { describeFailure, httpStatusOf, Upstream, type BridgeLog } from './upstream.ts';

export const CHANNEL_METHOD = 'notifications/claude/channel';
/** How long the stdio client's initialize waits for the first Switchboard session (for its instructions). */
export const FIRST_CONNECT_WAIT_MS = 5_000;
/** How long a tool call waits for a session before it answers that Switchboard is unreachable. */
export const CALL_WAIT_MS = 3_000;
export const CALL_TIMEOUT_MS = 30_000;
/** Doorbells held while the stdio client has not finished initializing; the oldest go first past this. */
const MAX_HELD = 200;

const FALLBACK_INSTRUCTIONS = `switchboard (through switchboard bridge ${VERSION})

The Switchboard server was not reachable when this session started; the bridge keeps retrying.
Work reaches you as todos on durable queues, and a doorbell (a <channel> event) says when work is
ready. Once connected, the tools list refreshes: use claim or claim_next, then complete.`;

export interface BridgeOptions {
  url: URL;
  token: string;
  log: BridgeLog;
  stdin?: typeof process.stdin;
  stdout?: typeof process.stdout;
  /** Resolves (or aborts) to end the bridge, besides stdin closing. */
  signal?: AbortSignal;
}

function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** A JSON-RPC error the server answered with (as opposed to one the SDK made up for a lost connection). */
function isServerRpcError(err: unknown): err is McpError {
  return err instanceof McpError && err.code !== ErrorCode.ConnectionClosed && err.code !== ErrorCode.RequestTimeout;
}

/** The server's error, passed on with its own code, message and data (the SDK prefixed the message). */
function relayedError(err: McpError): Error {
  const prefix = `MCP error ${err.code}: `;
  const message = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
  return Object.assign(new Error(message), { code: err.code, ...(err.data !== undefined ? { data: err.data } : {}) });
}

/**
 * The stdio transport, started before the Server exists: the client's first message (its
 * initialize, with its name) is read and held while the first Switchboard session is made, then
 * handed to the Server when it connects.
 */
class HeldStdio implements Transport {
  onmessage?: (m: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (e: Error) => void;
  readonly #held: JSONRPCMessage[] = [];
  #attached = false;
  readonly clientInfo: Promise<Implementation | null>;

  constructor(private readonly inner: StdioServerTransport, ended: Promise<void>) {
    this.clientInfo = new Promise((resolve) => {
      inner.onmessage = (m) => {
        if (this.#attached) return this.onmessage?.(m);
        this.#held.push(m);
        if (isInitializeRequest(m)) resolve(m.params.clientInfo);
      };
      void ended.then(() => resolve(null));
    });
    inner.onerror = (e) => this.onerror?.(e);
    inner.onclose = () => this.onclose?.();
  }

  async start(): Promise<void> {
    this.#attached = true;
    for (const m of this.#held.splice(0)) this.onmessage?.(m);
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.inner.send(message);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * Runs the bridge until stdin closes (or `signal` aborts): an MCP server on stdio declaring
 * claude/channel, relaying tools/list and tools/call to one Switchboard endpoint and every
 * notifications/claude/channel from it back. Resolves with the exit code.
 */
export async function runBridge(opts: BridgeOptions): Promise<number> {
  const { log } = opts;
  const stdin = opts.stdin ?? process.stdin;
  let endedBy = '';
  const ended = new Promise<void>((resolve) => {
    const end = (why: string) => () => {
      endedBy ||= why;
      resolve();
    };
    stdin.on('end', end('stdin closed'));
    stdin.on('close', end('stdin closed'));
    if (opts.signal?.aborted) end('stopped')();
    opts.signal?.addEventListener('abort', end('stopped by a signal'), { once: true });
  });
  const stdio = new StdioServerTransport(stdin, opts.stdout ?? process.stdout);
  const held = new HeldStdio(stdio, ended);
  await stdio.start();

  const clientInfo = await held.clientInfo;
  if (!clientInfo) {
    await stdio.close().catch(() => {});
    return 0;
  }

  let server: Server | null = null;
  let downstreamReady = false;
  const waiting: Notification[] = [];
  let toolsServed: string | null = null;
  let toolsFailed = false;

  const deliver = (n: Notification): void => {
    if (!server) return;
    server.notification(n).catch((err: unknown) => log('warn', `stdio write failed: ${describeFailure(err)}`));
  };
  const relay = (n: Notification): void => {
    if (n.method === CHANNEL_METHOD) {
      const meta = (n.params as { meta?: Record<string, unknown> } | undefined)?.meta ?? {};
      log('info', `doorbell ${String(meta.ring_id ?? '')}${meta.kind ? ` (${String(meta.kind)})` : ''}${downstreamReady ? '' : ', held until the client is ready'}`);
    } else if (n.method !== 'notifications/tools/list_changed') {
      return log('debug', `ignored ${n.method}`);
    }
    if (downstreamReady) return deliver(n);
    waiting.push(n);
    if (waiting.length > MAX_HELD) waiting.shift();
  };

  /** After a new session: if the tools differ from what the client was given (or it got none), say so. */
  const checkTools = (client: Client): void => {
    if (toolsServed === null && !toolsFailed) return;
    client
      .request({ method: 'tools/list', params: {} }, ResultSchema, { timeout: CALL_TIMEOUT_MS })
      .then((r) => {
        if (toolsFailed || JSON.stringify(r) !== toolsServed) relay({ method: 'notifications/tools/list_changed' });
      })
      .catch(() => {});
  };

  const upstream = new Upstream({ url: opts.url, token: opts.token, clientInfo, log, onNotification: relay, onSession: checkTools });
  upstream.start();
  await Promise.race([upstream.session(FIRST_CONNECT_WAIT_MS), ended]);
  if (!upstream.instructions) log('warn', `switchboard not reachable yet (${upstream.lastError}); answering the client and retrying in the background`);

  server = new Server(
    { name: 'switchboard', version: VERSION },
    {
      capabilities: { tools: { listChanged: true }, experimental: { 'claude/channel': {} } },
      instructions: upstream.instructions ?? FALLBACK_INSTRUCTIONS,
    },
  );
  server.oninitialized = () => {
    downstreamReady = true;
    for (const n of waiting.splice(0)) deliver(n);
  };

  server.setRequestHandler(ListToolsRequestSchema, async (req) => {
    const client = await upstream.session(CALL_WAIT_MS);
    try {
      if (!client) throw new Error(upstream.lastError);
      const r = (await client.request({ method: 'tools/list', params: req.params ?? {} }, ResultSchema, { timeout: CALL_TIMEOUT_MS })) as ListToolsResult;
      toolsServed = JSON.stringify(r);
      toolsFailed = false;
      return r;
    } catch (err) {
      if (isServerRpcError(err)) throw relayedError(err);
      if (httpStatusOf(err) === 404) upstream.sessionLost(client);
      // The last list still names the tools; calls answer for themselves while the server is away.
      if (toolsServed !== null) return JSON.parse(toolsServed) as ListToolsResult;
      toolsFailed = true;
      throw new McpError(ErrorCode.InternalError, `switchboard unreachable, retrying (${describeFailure(err)}); the tool list is sent again when it answers`);
    }
  });

  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    for (let attempt = 0; ; attempt++) {
      const client = await upstream.session(CALL_WAIT_MS);
      if (!client) return toolError(`switchboard unreachable, retrying (${upstream.lastError}); the call was not sent. Try again shortly.`);
      try {
        return (await client.request({ method: 'tools/call', params: req.params }, ResultSchema, { timeout: CALL_TIMEOUT_MS })) as CallToolResult;
      } catch (err) {
        if (isServerRpcError(err)) throw relayedError(err);
        const status = httpStatusOf(err);
        if (status === 404) {
          // The server did not know the session, so the call did not run: once more on a new one.
          upstream.sessionLost(client);
          if (attempt === 0) continue;
        }
        if (status === 401 || status === 403) {
          return toolError(`switchboard refused the credential (HTTP ${status}): check SWITCHBOARD_AGENT_TOKEN and that the endpoint is not revoked.`);
        }
        if (status === 429) return toolError('switchboard is rate limiting this endpoint (HTTP 429); the call was not run. Try again in a few seconds.');
        if (status >= 400 && status < 500 && status !== 404) {
          return toolError(`switchboard refused the request (${describeFailure(err)}).`);
        }
        return toolError(
          `switchboard unreachable, retrying: the connection failed during this call (${describeFailure(err)}). It may or may not have run: check (list_todos, get_todo) before repeating it.`,
        );
      }
    }
  });

  await server.connect(held);
  log('info', `bridge ready for ${clientInfo.name}`);

  await ended;
  log('info', `${endedBy}; ending the session`);
  await upstream.close();
  await server.close().catch(() => {});
  return 0;
}

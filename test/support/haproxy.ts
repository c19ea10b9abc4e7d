import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep, spawnServe, waitFor, type HeardAt, type RemoteAgent, type ServeProcess } from './processes.ts';

/**
 * A real load balancer in front of real `serve` processes: HAProxy (foreground, `-db`) on a free
 * loopback port, round robin, no session affinity, health checks on GET /readyz. Every instance
 * advertises the balancer's URL (SWITCHBOARD_BASE_URL), so a vended mcp_url points through it.
 * The test-only additions to the configuration: an admin socket (server states and counters) and
 * an `X-Served-By` response header naming the backend that answered.
 */

export const HAPROXY_BIN = '/usr/sbin/haproxy';
export const haproxyInstalled = (): boolean => existsSync(HAPROXY_BIN);

export interface Backend {
  name: string;
  port: number;
}

/** Health checks every 500 ms; two failures mark a server down, one success brings it back. */
const CHECK = 'inter 500ms fall 2 rise 1';

/**
 * The configuration the tests run (docs/deploy.md shows it without the test-only lines). SSE needs
 * no special mode in HAProxy: a stream is an ordinary response whose idle time is bounded by
 * `timeout client`/`timeout server` (the server's 15 s keepalive comment resets both);
 * `timeout tunnel` only applies after an upgrade (WebSocket). Responses are never buffered, and
 * request buffering (`option http-buffer-request`) stays off.
 */
export function haproxyConfig(port: number, backends: readonly Backend[], adminSocket: string): string {
  return [
    'global',
    '  maxconn 2000',
    '  log stderr format raw local0 info',
    `  stats socket ${adminSocket} mode 600 level admin`,
    '',
    'defaults',
    '  mode http',
    '  log global',
    '  option httplog',
    '  timeout connect 2s',
    '  timeout client 1h',
    '  timeout server 1h',
    '  timeout http-request 10s',
    '  timeout http-keep-alive 10s',
    '  timeout queue 5s',
    '  retries 3',
    '  option redispatch 1',
    '',
    'frontend switchboard',
    `  bind 127.0.0.1:${port}`,
    '  option forwardfor',
    '  default_backend switchboard_instances',
    '',
    'backend switchboard_instances',
    '  balance roundrobin',
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    `  default-server ${CHECK}`,
    '  http-response set-header X-Served-By %[srv_name]',
    ...backends.map((b) => `  server ${b.name} 127.0.0.1:${b.port} check`),
    '',
  ].join('\n');
}

export interface ServerStat {
  /** UP, DOWN, MAINT, or a transition such as "UP 1/2". */
  status: string;
  /** Requests (HTTP sessions) sent to this server so far. */
  total: number;
  /** Connection retries and redispatches to another server. */
  retries: number;
  redispatches: number;
}

export interface Haproxy {
  pid: number;
  port: number;
  /** http://127.0.0.1:<port> */
  url: string;
  config: string;
  /** What HAProxy wrote (its request log and warnings). */
  output(): string;
  /** Per server of the backend, from `show stat` on the admin socket. */
  stats(): Promise<Map<string, ServerStat>>;
  /** Waits until `server`'s status starts with `status` (UP or DOWN). */
  waitStatus(server: string, status: 'UP' | 'DOWN', ms?: number): Promise<void>;
  stop(): Promise<void>;
}

function adminCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    const conn = createConnection(socket, () => conn.end(`${command}\n`));
    conn.setEncoding('utf8');
    conn.on('data', (d) => (out += d));
    conn.on('end', () => resolve(out));
    conn.on('error', reject);
  });
}

/** Per server of the `switchboard_instances` backend, from `show stat` on an admin socket. */
export async function serverStats(socket: string): Promise<Map<string, ServerStat>> {
  return parseStats(await adminCommand(socket, 'show stat'));
}

function parseStats(csv: string): Map<string, ServerStat> {
  const [head, ...rows] = csv.trim().split('\n');
  const cols = head!.replace(/^# /, '').split(',');
  const at = (row: string[], name: string) => row[cols.indexOf(name)] ?? '';
  const out = new Map<string, ServerStat>();
  for (const line of rows) {
    const row = line.split(',');
    const sv = at(row, 'svname');
    if (at(row, 'pxname') !== 'switchboard_instances' || sv === 'BACKEND') continue;
    out.set(sv, { status: at(row, 'status'), total: Number(at(row, 'stot')), retries: Number(at(row, 'wretr')), redispatches: Number(at(row, 'wredis')) });
  }
  return out;
}

/** Starts HAProxy in the foreground on `port`; resolves once every backend is UP. */
export async function startHaproxy(port: number, backends: readonly Backend[]): Promise<Haproxy> {
  const dir = await mkdtemp(join(tmpdir(), 'sbhaproxy-'));
  const socket = join(dir, 'admin.sock');
  const config = haproxyConfig(port, backends, socket);
  const cfgPath = join(dir, 'haproxy.cfg');
  await writeFile(cfgPath, config);
  const child: ChildProcess = spawn(HAPROXY_BIN, ['-db', '-f', cfgPath], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const stats = () => serverStats(socket);
  const lb: Haproxy = {
    pid: child.pid!,
    port,
    url: `http://127.0.0.1:${port}`,
    config,
    output: () => out,
    stats,
    async waitStatus(server, status, ms = 10_000) {
      await waitFor(async () => (await stats()).get(server)?.status.startsWith(status), `haproxy to mark ${server} ${status}`, ms, 100);
    },
    async stop() {
      if (alive()) child.kill('SIGTERM');
      const timer = setTimeout(() => alive() && child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitFor(
      async () => {
        if (!alive()) throw new Error(`haproxy exited:\n${out}`);
        const s = await stats().catch(() => undefined);
        return s !== undefined && backends.every((b) => s.get(b.name)?.status === 'UP');
      },
      'haproxy to start with every backend UP',
      15_000,
      100,
    );
  } catch (err) {
    await lb.stop();
    throw err;
  }
  return lb;
}

export interface BalancedCluster {
  lb: Haproxy;
  /** serves[i] is HAProxy's server `s<i>`. */
  serves: ServeProcess[];
  /** The serve process behind a server name (`s0`, `s1`, ...). */
  serve(name: string): ServeProcess;
  stop(): Promise<void>;
}

/**
 * `n` serve processes on one database behind one HAProxy. The balancer's port is chosen first so
 * that every instance advertises it as its public base URL.
 */
export async function startBalancedCluster(databaseUrl: string, n = 3): Promise<BalancedCluster> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const serves = await Promise.all(Array.from({ length: n }, () => spawnServe({ databaseUrl, env: { SWITCHBOARD_BASE_URL: url } })));
  const lb = await startHaproxy(
    port,
    serves.map((s, i) => ({ name: `s${i}`, port: s.port })),
  );
  return {
    lb,
    serves,
    serve: (name) => serves[Number(name.replace(/^s/, ''))]!,
    async stop() {
      await lb.stop();
      await Promise.all(serves.map((s) => s.stop()));
    },
  };
}

/** The last lines HAProxy and each instance wrote, for a failing test's output. */
export function clusterLogs(c: BalancedCluster | undefined, lines = 30): string {
  if (!c) return '(no cluster)';
  const tail = (text: string) => text.trimEnd().split('\n').slice(-lines).join('\n');
  return [`--- haproxy ---\n${tail(c.lb.output())}`, ...c.serves.map((s, i) => `--- s${i} (pid ${s.pid}, ${s.url}) ---\n${tail(s.output())}`)].join('\n');
}

/** One HTTP exchange of an SDK client, with the backend that answered it. */
export interface Exchange {
  method: string;
  status: number;
  servedBy: string | null;
}

export interface BalancedAgent extends RemoteAgent {
  /** Every request the SDK transport made, in order. */
  exchanges: Exchange[];
  /** Errors the transport reported (a dropped stream, a failed reconnect). */
  transportErrors: string[];
  /** The backend that answered the latest GET (the notification stream) with 200. */
  streamServer(): string | null;
  /** Doorbells heard for `todoId`. */
  rings(todoId: string): HeardAt[];
}

/**
 * The official SDK Client connected through the balancer: the vended mcp_url used as it is. A
 * fetch wrapper records which backend answered each request (the X-Served-By header).
 */
export async function connectBalancedAgent(mcpUrl: string, token: string, name = 'claude-code'): Promise<BalancedAgent> {
  const heard: HeardAt[] = [];
  const exchanges: Exchange[] = [];
  const transportErrors: string[] = [];
  const client = new Client({ name, version: '2.1.0' });
  client.fallbackNotificationHandler = async (n) => void heard.push({ ...(n as unknown as HeardAt), at: Date.now() });
  const recordingFetch: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    exchanges.push({ method: init?.method ?? 'GET', status: res.status, servedBy: res.headers.get('x-served-by') });
    return res;
  };
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    fetch: recordingFetch,
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  transport.onerror = (err) => void transportErrors.push(err.message);
  // Client.connect chains this handler rather than replacing it.
  await client.connect(transport);
  return {
    client,
    sessionId: transport.sessionId!,
    heard,
    exchanges,
    transportErrors,
    streamServer: () => exchanges.filter((e) => e.method === 'GET' && e.status === 200).at(-1)?.servedBy ?? null,
    rings: (todoId) => heard.filter((n) => n.params.meta.todo_id === todoId),
    async call(tool, args = {}) {
      const r = (await client.callTool({ name: tool, arguments: args })) as { content: { text: string }[]; isError?: boolean };
      const text = r.content[0]!.text;
      return r.isError ? { error: text } : JSON.parse(text);
    },
    close: () => client.close().catch(() => {}),
  };
}

const MCP_HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };

/** initialize + notifications/initialized with plain fetch against `baseUrl`: the new session's id. */
export async function rawSession(baseUrl: string, slug: string, token: string): Promise<string> {
  const url = `${baseUrl}/mcp/${slug}`;
  const headers = { ...MCP_HEADERS, authorization: `Bearer ${token}` };
  const init = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  if (init.status !== 200) throw new Error(`initialize answered ${init.status}: ${await init.text()}`);
  await init.text();
  const sid = init.headers.get('mcp-session-id')!;
  const done = await fetch(url, { method: 'POST', headers: { ...headers, 'mcp-session-id': sid }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  if (done.status !== 202) throw new Error(`notifications/initialized answered ${done.status}`);
  return sid;
}

export interface RawStream {
  status: number;
  servedBy: string | null;
  /** Every JSON-RPC message the stream carried. */
  messages: { method?: string; params?: { meta?: Record<string, string> } }[];
  /** Resolves when the server ends the stream (or the connection breaks). */
  ended: Promise<'ended' | 'broken'>;
  isEnded(): boolean;
  close(): void;
}

/** A GET notification stream with plain fetch, parsed as it arrives. */
export async function openRawStream(baseUrl: string, slug: string, token: string, sessionId: string): Promise<RawStream> {
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}/mcp/${slug}`, {
    headers: { accept: 'text/event-stream', authorization: `Bearer ${token}`, 'mcp-session-id': sessionId },
    signal: abort.signal,
  });
  const messages: RawStream['messages'] = [];
  let over = false;
  const read = async (): Promise<'ended' | 'broken'> => {
    if (res.status !== 200 || !res.body) return 'ended';
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += decoder.decode(chunk as Uint8Array, { stream: true });
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const data = frame
            .split('\n')
            .filter((l) => l.startsWith('data: '))
            .map((l) => l.slice(6))
            .join('\n');
          if (data) messages.push(JSON.parse(data));
        }
      }
      return 'ended';
    } catch {
      return 'broken';
    }
  };
  const ended = read().finally(() => void (over = true));
  return {
    status: res.status,
    servedBy: res.headers.get('x-served-by'),
    messages,
    ended,
    isEnded: () => over,
    close: () => abort.abort(),
  };
}

/** Resolves `p`, or 'pending' if it has not settled within `ms`. */
export async function within<T>(p: Promise<T>, ms: number): Promise<T | 'pending'> {
  return Promise.race([p, sleep(ms).then(() => 'pending' as const)]);
}

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { RunningCluster } from './throwaway-cluster.ts';

/**
 * Real `switchboard serve` processes and PostgreSQL control for the fault tests: spawn, wait for
 * health, kill (any signal), and run pg_ctl against a throwaway cluster the way the cluster code
 * does (as the `postgres` OS user when root). Every process spawned here is remembered so
 * `stopAllServes()` (afterAll) can end the ones a failing test left behind.
 */

export const SWITCHBOARD_BIN = join(import.meta.dirname, '..', '..', 'bin', 'switchboard.js');

const execFileAsync = promisify(execFile);

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const p = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return p;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `cond` every `intervalMs` until it holds; throws naming `what` after `ms`. */
export async function waitFor<T>(cond: () => T | undefined | false | Promise<T | undefined | false>, what: string, ms = 10_000, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

export interface ServeProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  /** http://127.0.0.1:<port> */
  url: string;
  /** Everything the process wrote to stdout and stderr so far (JSON log lines). */
  output(): string;
  /** Resolves when the process has exited, with its exit code or the signal that ended it. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM and wait for the exit (a no-op when it already exited). */
  stop(): Promise<void>;
}

const spawned = new Set<ServeProcess>();
const scratchDirs = new Set<string>();

const running = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;

/** The port a serve process bound, from the "switchboard listening on URL" line it writes to stderr at any log level. */
export function listeningPort(output: string): number | undefined {
  const m = /switchboard listening on http:\/\/127\.0\.0\.1:(\d+) /.exec(output);
  return m ? Number(m[1]) : undefined;
}

/**
 * Spawns `node bin/switchboard.js serve` on a loopback port the kernel picks (port 0, so no other
 * process can take it between choosing and binding) against `databaseUrl`, with a scratch HOME and
 * data dir; resolves once the process logged the port it bound and GET /healthz there answers 200.
 */
export async function spawnServe(opts: {
  databaseUrl: string;
  /** Added to the environment; an undefined value removes that variable. */
  env?: Record<string, string | undefined>;
  logLevel?: string;
  healthTimeoutMs?: number;
  /** The command in place of `node bin/switchboard.js serve` (the compiled build, the image's entry point). */
  command?: [string, ...string[]];
}): Promise<ServeProcess> {
  const home = await mkdtemp(join(tmpdir(), 'sbfault-'));
  scratchDirs.add(home);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    SWITCHBOARD_DATA_DIR: home,
    SWITCHBOARD_DATABASE_URL: opts.databaseUrl,
    SWITCHBOARD_LISTEN: '127.0.0.1:0',
    SWITCHBOARD_LOG_LEVEL: opts.logLevel ?? 'info',
    ...opts.env,
  };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const [file, ...args] = opts.command ?? [process.execPath, SWITCHBOARD_BIN, 'serve'];
  const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  const proc: ServeProcess = {
    child,
    pid: child.pid!,
    port: 0,
    url: '',
    output: () => out,
    exited,
    async stop() {
      if (running(child)) child.kill('SIGTERM');
      const timer = setTimeout(() => running(child) && child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  spawned.add(proc);
  const deadline = Date.now() + (opts.healthTimeoutMs ?? 45_000);
  for (;;) {
    if (!running(child)) throw new Error(`serve exited before becoming healthy:\n${out}`);
    const port = listeningPort(out);
    try {
      if (port !== undefined && (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200) {
        proc.port = port;
        proc.url = `http://127.0.0.1:${port}`;
        return proc;
      }
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      await proc.stop();
      throw new Error(`serve did not become healthy within ${opts.healthTimeoutMs ?? 45_000} ms:\n${out}`);
    }
    await sleep(100);
  }
}

/** Ends every serve process spawned by this file that is still running, and removes their scratch dirs. */
export async function stopAllServes(): Promise<void> {
  await Promise.all([...spawned].map((p) => p.stop().catch(() => {})));
  spawned.clear();
  await Promise.all([...scratchDirs].map((d) => rm(d, { recursive: true, force: true })));
  scratchDirs.clear();
}

/** Resident set size of a process in bytes, from /proc (Linux). */
export async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
  if (!kb) throw new Error(`no VmRSS for PID ${pid}`);
  return Number(kb) * 1024;
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

/**
 * Runs pg_ctl against a throwaway cluster as the cluster code runs it: as the `postgres` OS user
 * when root, from `/`, in the C locale.
 */
export async function pgCtl(cluster: RunningCluster, args: string[], timeoutMs = 120_000): Promise<{ stdout: string; stderr: string }> {
  const pgCtlPath = join(cluster.binDir, 'pg_ctl');
  const [cmd, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', pgCtlPath, ...args]] : [pgCtlPath, args];
  return execFileAsync(cmd, argv, { cwd: '/', timeout: timeoutMs, env: { ...process.env, LC_ALL: 'C' } });
}

/**
 * `pg_ctl -m fast -w restart`: terminates every backend (clients see FATAL 57P01), shuts down, and
 * starts again with the same options (postmaster.opts keeps the port and socket dir). `-l` matters:
 * without it the new server inherits our pipes and pg_ctl never returns.
 */
export async function restartCluster(cluster: RunningCluster): Promise<void> {
  await pgCtl(cluster, ['-D', cluster.pgData, '-m', 'fast', '-w', '-t', '60', 'restart', '-l', cluster.logFile]);
}

/** A doorbell (or any notification) as an SDK client hears it, stamped with its arrival time. */
export type HeardAt = { method: string; params: { content: string; meta: Record<string, string> }; at: number };

export interface RemoteAgent {
  client: Client;
  sessionId: string;
  heard: HeardAt[];
  /** Calls a tool: the parsed JSON result, or `{error: "<code>: <message>"}` for a tool error. */
  call(name: string, args?: Record<string, unknown>): Promise<any>;
  close(): Promise<void>;
}

/**
 * The MCP SDK's own Client for an endpoint on any instance (a spawned process, or an app whose
 * internals the test does not look at): `baseUrl` re-points the vended MCP URL at that instance.
 */
export async function connectRemoteAgent(mcpUrl: string, token: string, baseUrl?: string, name = 'claude-code'): Promise<RemoteAgent> {
  const url = new URL(mcpUrl);
  if (baseUrl) url.host = new URL(baseUrl).host;
  const heard: HeardAt[] = [];
  const client = new Client({ name, version: '2.1.0' });
  client.fallbackNotificationHandler = async (n) => void heard.push({ ...(n as unknown as HeardAt), at: Date.now() });
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  return {
    client,
    sessionId: transport.sessionId!,
    heard,
    async call(tool, args = {}) {
      const r = (await client.callTool({ name: tool, arguments: args })) as { content: { text: string }[]; isError?: boolean };
      const text = r.content[0]!.text;
      return r.isError ? { error: text } : JSON.parse(text);
    },
    close: () => client.close().catch(() => {}),
  };
}

/**
 * Stops a throwaway cluster's server (`-m fast`) and returns a function that starts it again with
 * the options it ran with (postmaster.opts: same port and socket dir), for outages of any length.
 */
export async function stopClusterForAWhile(cluster: RunningCluster): Promise<() => Promise<void>> {
  const opts = (await readFile(join(cluster.pgData, 'postmaster.opts'), 'utf8')).trim();
  const m = /^\S+ "-D" "[^"]*" (.*)$/.exec(opts);
  if (!m) throw new Error(`cannot read the server options from postmaster.opts: ${opts}`);
  await pgCtl(cluster, ['-D', cluster.pgData, '-m', 'fast', '-w', '-t', '60', 'stop']);
  return async () => void (await pgCtl(cluster, ['-D', cluster.pgData, '-w', '-t', '60', 'start', '-l', cluster.logFile, '-o', m[1]!]));
}

/**
 * Stops a throwaway cluster that a test restarted: its stop() only stops the server it started
 * itself (the PID it recorded), so the server a restart put in its place is stopped here first.
 */
export async function stopCluster(cluster: RunningCluster | undefined): Promise<void> {
  if (!cluster) return;
  await pgCtl(cluster, ['-D', cluster.pgData, '-m', 'immediate', '-w', '-t', '60', 'stop']).catch(() => {});
  await cluster.stop();
}

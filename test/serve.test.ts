import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listeningPort } from './support/processes.ts';

/**
 * `switchboard serve` as a user runs it: a real process on the embedded PostgreSQL, killed with
 * SIGKILL mid-flight and started again on the same data dir.
 */
const BIN = join(import.meta.dirname, '..', 'bin', 'switchboard.js');
let dataDir: string;
let port: number;
let env: NodeJS.ProcessEnv;
const children: ChildProcess[] = [];

function startServe(): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [BIN, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

/**
 * Waits for this process's own "switchboard listening on" line, then for /healthz on the port it
 * names. The kernel picks the port (SWITCHBOARD_LISTEN=...:0), so no other test's server can be
 * the one that answers.
 */
async function waitHealthy(output: () => string, timeoutMs = 45_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const bound = listeningPort(output());
    try {
      if (bound !== undefined && (await fetch(`http://127.0.0.1:${bound}/healthz`)).status === 200) {
        port = bound;
        return;
      }
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`serve did not become healthy:\n${output()}`);
}

const cli = (...args: string[]) => promisify(execFile)(process.execPath, [BIN, ...args], { env });

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sbserve-'));
  env = {
    PATH: process.env.PATH,
    HOME: dataDir,
    SWITCHBOARD_DATA_DIR: dataDir,
    SWITCHBOARD_LISTEN: '127.0.0.1:0',
    SWITCHBOARD_LOG_LEVEL: 'info',
  };
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null)));
  await rm(dataDir, { recursive: true, force: true });
});

describe('switchboard serve on the embedded PostgreSQL', { timeout: 90_000 }, () => {
  let token = '';
  let slug = '';
  let todoId = '';
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`http://127.0.0.1:${port}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  it('starts, says where the data lives, and admin commands attach to its database', async () => {
    const first = startServe();
    await waitHealthy(first.output);
    expect(first.output()).toContain(dataDir);
    expect(first.output()).toContain('switchboard listening');

    // The admin command names both processes, each by its own PID: the serve, and the PostgreSQL
    // server it started (pgdata/postmaster.pid), never the one as the other.
    const added = await cli('admin', 'human', 'add', 'ops');
    const postmaster = Number((await readFile(join(dataDir, 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    expect(postmaster).not.toBe(first.child.pid);
    expect(added.stderr).toContain(`(shared with the running serve, PID ${first.child.pid}; PostgreSQL server PID ${postmaster})`);
    token = (await cli('admin', 'token', 'create', 'ops')).stdout.trim();
    expect(token).toMatch(/^sbp_/);
    const vend = await api('POST', '/endpoints', { name: 'review-bot', queues: ['reviews'] });
    expect(vend.status).toBe(201);
    slug = ((await vend.json()) as { slug: string }).slug;
    const push = await api('POST', `/endpoints/${slug}/todos`, { title: 'Review PR 12', payload: { pr: 12 } });
    expect(push.status).toBe(201);
    todoId = ((await push.json()) as { id: string }).id;

    // A crash: no shutdown handler runs, the PostgreSQL server is left behind.
    first.child.kill('SIGKILL');
    await first.exited;
    // PostgreSQL outlives it; an admin command in between says so rather than name a dead serve.
    const orphaned = await cli('admin', 'human', 'list');
    expect(orphaned.stderr).toContain(`(PostgreSQL server PID ${postmaster}, whose switchboard process is no longer running)`);
  });

  it('restarts on the same data dir after kill -9 with every committed todo intact', async () => {
    const second = startServe();
    await waitHealthy(second.output);
    const list = await api('GET', `/endpoints/${slug}/todos`);
    expect(((await list.json()) as { todos: { id: string; state: string }[] }).todos).toEqual([
      expect.objectContaining({ id: todoId, state: 'pending' }),
    ]);

    // A second serve on the same data dir refuses, naming the process that holds it.
    const intruder = startServe();
    expect(await intruder.exited).toBe(1);
    expect(intruder.output()).toMatch(/in use by .*PID \d+/i);
    expect(intruder.output()).toContain('SWITCHBOARD_DATABASE_URL');

    // A clean stop takes the PostgreSQL server down with it.
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    expect(existsSync(join(dataDir, 'pgdata', 'postmaster.pid'))).toBe(false);
  });
});

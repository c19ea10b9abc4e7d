import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { SWITCHBOARD_BIN } from './processes.ts';

/**
 * The real Claude Code CLI, pinned, for tests that run the lines Switchboard prints for it.
 * It is installed from npm once into a cache directory outside git (node_modules/ is ignored, and
 * `npm ci` starts it afresh) and reused while it answers with the pinned version. Every run gets a
 * throwaway HOME, so nothing of the machine's own Claude Code configuration is read or written.
 */
export const CLAUDE_CODE_VERSION = '2.1.332';
export const CLAUDE_CODE_DIR = join(import.meta.dirname, '..', '..', 'node_modules', '.cache', 'switchboard-test-tools', `claude-code-${CLAUDE_CODE_VERSION}`);
export const CLAUDE_BIN = join(CLAUDE_CODE_DIR, 'node_modules', '.bin', 'claude');

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end; never throws for an exit code (a spawn error is code null, said on stderr). */
export function runCommand(file: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((resolve) => {
    const child = execFile(file, args, { env: opts.env, cwd: opts.cwd, timeout: opts.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      resolve({ code, stdout, stderr: err && code === null ? `${stderr}\n${err.message}` : stderr });
    });
    child.stdin?.end();
  });
}

async function installedVersion(): Promise<string | null> {
  const home = await mkdtemp(join(tmpdir(), 'sb-claude-home-'));
  try {
    const r = await runCommand(CLAUDE_BIN, ['--version'], { env: { PATH: process.env.PATH, HOME: home }, timeoutMs: 30_000 });
    return r.code === 0 ? r.stdout.trim() : null;
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

/** npm's own words for "could not reach the registry" (its error code, or its `network` error class). */
const REGISTRY_UNREACHABLE = /npm error code (ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|ENETUNREACH|EHOSTUNREACH|ERR_SOCKET_TIMEOUT)\b|npm error network /;

/**
 * Claude Code at exactly CLAUDE_CODE_VERSION: the cached install, or a new one from npm. Answers
 * `{ unreachable }` (npm's output) only when npm could not reach its registry; any other failure
 * (npm refused the install, the CLI answers another version) throws.
 */
export async function ensureClaudeCode(): Promise<{ bin: string } | { unreachable: string }> {
  const want = `${CLAUDE_CODE_VERSION} (Claude Code)`;
  if ((await installedVersion()) === want) return { bin: CLAUDE_BIN };
  // Installed beside the cache directory and renamed into place, so a run cut short never leaves
  // a half-installed CLI there for the next run to trust.
  const staging = `${CLAUDE_CODE_DIR}.staging-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  await mkdir(dirname(CLAUDE_CODE_DIR), { recursive: true });
  const args = ['install', '--prefix', staging, '--no-audit', '--no-fund', `@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}`];
  const npm = await runCommand('npm', args, { env: process.env, timeoutMs: 300_000 });
  if (npm.code !== 0) {
    await rm(staging, { recursive: true, force: true });
    const output = `npm ${args.join(' ')} exited ${npm.code}:\n${npm.stdout}${npm.stderr}`;
    if (REGISTRY_UNREACHABLE.test(npm.stderr)) return { unreachable: output };
    throw new Error(output);
  }
  await rm(CLAUDE_CODE_DIR, { recursive: true, force: true });
  await rename(staging, CLAUDE_CODE_DIR).catch(async (e: NodeJS.ErrnoException) => {
    // Another run put its copy there first: use that one.
    if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
    await rm(staging, { recursive: true, force: true });
  });
  const got = await installedVersion();
  if (got !== want) throw new Error(`${CLAUDE_BIN} --version answered ${JSON.stringify(got)} after the install, not ${JSON.stringify(want)}`);
  return { bin: CLAUDE_BIN };
}

/**
 * A directory holding `switchboard`: a shim that runs this checkout's bin/switchboard.js, so a
 * line that starts `switchboard bridge` (as the printed ones do, for a linked or installed CLI)
 * starts this checkout's bridge.
 */
export async function switchboardShimDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sb-shim-'));
  const shim = join(dir, 'switchboard');
  await writeFile(shim, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(SWITCHBOARD_BIN)} "$@"\n`);
  await chmod(shim, 0o755);
  return dir;
}

/** One line of `claude mcp list` per server: `<name>: <command or URL> - <status>`. */
export function mcpListStatuses(stdout: string): Map<string, string> {
  const statuses = new Map<string, string>();
  for (const m of stdout.matchAll(/^([A-Za-z0-9_-]+): .* - (.+)$/gm)) statuses.set(m[1]!, m[2]!.trim());
  return statuses;
}

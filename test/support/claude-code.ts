import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SWITCHBOARD_BIN } from './processes.ts';
import { installTool, TEST_TOOLS_DIR } from './test-tools.ts';

/**
 * The real Claude Code CLI, pinned, for tests that run the lines Switchboard prints for it.
 * It is installed from npm once into the test tools' cache (test-tools.ts) and reused while it
 * answers with the pinned version. Every run gets a
 * throwaway HOME, so nothing of the machine's own Claude Code configuration is read or written.
 */
export const CLAUDE_CODE_VERSION = '2.1.332';
export const CLAUDE_CODE_DIR = join(TEST_TOOLS_DIR, `claude-code-${CLAUDE_CODE_VERSION}`);
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

async function answeredVersion(): Promise<string | null> {
  const home = await mkdtemp(join(tmpdir(), 'sb-claude-home-'));
  try {
    const r = await runCommand(CLAUDE_BIN, ['--version'], { env: { PATH: process.env.PATH, HOME: home }, timeoutMs: 30_000 });
    return r.code === 0 ? r.stdout.trim() : null;
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

/**
 * Claude Code at exactly CLAUDE_CODE_VERSION, installed like every pinned client (test-tools.ts),
 * and answering that version: its package ships the native binary, which must run here. Answers
 * `{ unreachable }` only when npm could not reach its registry; any other failure throws.
 */
export async function ensureClaudeCode(): Promise<{ bin: string } | { unreachable: string }> {
  const tool = await installTool('@anthropic-ai/claude-code', CLAUDE_CODE_VERSION, `claude-code-${CLAUDE_CODE_VERSION}`);
  if (!tool.installed) return { unreachable: tool.unreachable };
  const want = `${CLAUDE_CODE_VERSION} (Claude Code)`;
  const got = await answeredVersion();
  if (got !== want) throw new Error(`${CLAUDE_BIN} --version answered ${JSON.stringify(got)}, not ${JSON.stringify(want)}`);
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

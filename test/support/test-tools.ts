// Third-party MCP clients the tests run as real processes (mcp-remote, the MCP Inspector CLI),
// installed from npm at exact versions into node_modules/.cache/switchboard-test-tools/<name>-<version>
// and reused from there. An install is made in a scratch directory beside it and renamed into
// place, so two runs never share a half-written tree. When the registry cannot be reached the
// caller skips, saying so; any other failure to install fails the test file.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';

export const TEST_TOOLS_DIR = join(import.meta.dirname, '..', '..', 'node_modules', '.cache', 'switchboard-test-tools');

/** npm's error codes for a registry it could not reach (as `npm error code X` / `npm error errno X`). */
const NETWORK_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENETUNREACH', 'EHOSTUNREACH', 'ENETDOWN', 'ESOCKETTIMEDOUT']);

export type InstalledTool =
  | { installed: true; /** <dir>/node_modules/<pkg> */ packageDir: string }
  | { installed: false; /** Why the registry is taken to be unreachable (npm's own words). */ unreachable: string };

async function installedVersion(packageDir: string): Promise<string | null> {
  try {
    return (JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8')) as { version?: string }).version ?? null;
  } catch {
    return null;
  }
}

function npmInstall(prefix: string, spec: string): Promise<{ ok: boolean; output: string }> {
  const args = ['install', '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline', '--fetch-retries=1', '--fetch-retry-maxtimeout=10000', spec];
  return new Promise((resolve) => {
    execFile('npm', args, { timeout: 240_000, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, npm_config_update_notifier: 'false' } }, (err, stdout, stderr) =>
      resolve({ ok: err === null, output: `${stdout}${stderr}${err && !stderr ? `\n${err.message}` : ''}` }),
    );
  });
}

/** The network error npm reported, or null when its failure was something else. */
export function registryUnreachable(npmOutput: string): string | null {
  for (const m of npmOutput.matchAll(/^npm (?:error|ERR!) (?:code|errno) (\S+)/gm)) if (NETWORK_CODES.has(m[1]!)) return `npm error code ${m[1]}`;
  const network = /^npm (?:error|ERR!) network (.+)$/m.exec(npmOutput);
  return network ? `npm error network ${network[1]!.trim()}` : null;
}

/**
 * `pkg@version` installed under node_modules/.cache/switchboard-test-tools/<dirName>: the cached
 * copy when it holds exactly that version, else a fresh `npm install`. Throws on any failure but
 * an unreachable registry, which it answers as `{installed: false}` for the caller to skip on.
 */
export async function installTool(pkg: string, version: string, dirName = `${pkg.replace(/^@[^/]+\//, '')}-${version}`): Promise<InstalledTool> {
  const dir = join(TEST_TOOLS_DIR, dirName);
  const packageDir = join(dir, 'node_modules', ...pkg.split('/'));
  if ((await installedVersion(packageDir)) === version) return { installed: true, packageDir };

  await mkdir(TEST_TOOLS_DIR, { recursive: true });
  const scratch = `${dir}.installing-${process.pid}-${Date.now()}`;
  try {
    const { ok, output } = await npmInstall(scratch, `${pkg}@${version}`);
    if (!ok) {
      const unreachable = registryUnreachable(output);
      if (unreachable) return { installed: false, unreachable };
      throw new Error(`npm install ${pkg}@${version} failed:\n${output.slice(-4000)}`);
    }
    const got = await installedVersion(join(scratch, 'node_modules', ...pkg.split('/')));
    if (got !== version) throw new Error(`npm install ${pkg}@${version} installed ${got ?? 'nothing'}`);
    // Replace a stale copy (another version, or a broken tree); a run that got there first wins.
    if (existsSync(dir) && (await installedVersion(packageDir)) !== version) await rm(dir, { recursive: true, force: true });
    await rename(scratch, dir).catch(async (err: NodeJS.ErrnoException) => {
      if ((await installedVersion(packageDir)) !== version) throw err;
    });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return { installed: true, packageDir };
}

/**
 * Installs the tool at the top level of a test file (before its tests are collected): the package
 * dir, or null after printing why the file's tests are skipped (the registry is unreachable).
 */
export async function toolOrSkip(file: string, pkg: string, version: string): Promise<string | null> {
  const tool = await installTool(pkg, version);
  if (tool.installed) return tool.packageDir;
  console.warn(
    `[${file}] SKIPPED: ${pkg}@${version} is not in ${TEST_TOOLS_DIR} and the npm registry is unreachable (${tool.unreachable}); these tests need it installed`,
  );
  return null;
}

import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError } from './output.ts';
import { normalizeServerUrl } from './server-url.ts';

export interface Credentials {
  url: string;
  token: string;
}

/** Credentials and where each half came from: an environment variable's name or the file's path. */
export interface LoadedCredentials extends Credentials {
  urlFrom: string;
  tokenFrom: string;
}

/** `$SWITCHBOARD_CREDENTIALS`, else `<user config dir>/switchboard/credentials.json`. */
export function credentialsPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SWITCHBOARD_CREDENTIALS) return env.SWITCHBOARD_CREDENTIALS;
  const base =
    process.platform === 'darwin'
      ? join(homedir(), 'Library', 'Application Support')
      : process.platform === 'win32'
        ? (env.APPDATA ?? join(homedir(), 'AppData', 'Roaming'))
        : env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/')
          ? env.XDG_CONFIG_HOME
          : join(homedir(), '.config');
  return join(base, 'switchboard', 'credentials.json');
}

/** Written through a temp file and a rename so a crash never leaves half a file; mode 0600. */
export async function saveCredentials(creds: Credentials, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const path = credentialsPath(env);
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify({ url: creds.url, token: creds.token }, null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
  return path;
}

export async function removeCredentials(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const path = credentialsPath(env);
  try {
    await rm(path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

/** SWITCHBOARD_URL + SWITCHBOARD_TOKEN win over the saved file, each on its own. */
export async function loadCredentials(env: NodeJS.ProcessEnv = process.env): Promise<LoadedCredentials> {
  const envUrl = env.SWITCHBOARD_URL?.trim();
  const envToken = env.SWITCHBOARD_TOKEN?.trim();
  const path = credentialsPath(env);
  let saved: Partial<Credentials> = {};
  if (!envUrl || !envToken) {
    try {
      saved = JSON.parse(await readFile(path, 'utf8')) as Partial<Credentials>;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new CliError(`cannot read ${path}: ${(e as Error).message}`);
    }
  }
  const url = envUrl ? { value: envUrl, from: 'SWITCHBOARD_URL' } : saved.url ? { value: saved.url, from: path } : null;
  const token = envToken ? { value: envToken, from: 'SWITCHBOARD_TOKEN' } : saved.token ? { value: saved.token, from: path } : null;
  if (!url || !token) {
    const half = url ? `${url.from} gives a URL but there is no token; ` : token ? `${token.from} gives a token but there is no URL; ` : '';
    throw new CliError(`not logged in: ${half}set SWITCHBOARD_URL and SWITCHBOARD_TOKEN, or run \`switchboard login --url URL --with-token\` (token on stdin)`);
  }
  return { url: normalizeServerUrl(url.value, url.from), token: token.value, urlFrom: url.from, tokenFrom: token.from };
}

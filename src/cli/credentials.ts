import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError } from './output.ts';

export interface Credentials {
  url: string;
  token: string;
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

/** SWITCHBOARD_URL + SWITCHBOARD_TOKEN win over the saved file. */
export async function loadCredentials(env: NodeJS.ProcessEnv = process.env): Promise<Credentials> {
  const envUrl = env.SWITCHBOARD_URL?.trim();
  const envToken = env.SWITCHBOARD_TOKEN?.trim();
  let saved: Partial<Credentials> = {};
  try {
    saved = JSON.parse(await readFile(credentialsPath(env), 'utf8')) as Partial<Credentials>;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new CliError(`cannot read ${credentialsPath(env)}: ${(e as Error).message}`);
    }
  }
  const url = envUrl || saved.url;
  const token = envToken || saved.token;
  if (!url || !token) {
    throw new CliError(
      'not logged in: set SWITCHBOARD_URL and SWITCHBOARD_TOKEN, or run `switchboard login --url URL --token sbp_...`',
    );
  }
  return { url: url.replace(/\/+$/, ''), token };
}

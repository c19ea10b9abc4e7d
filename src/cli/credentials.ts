import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError } from './output.ts';
import { normalizeServerUrl } from './server-url.ts';

/** What a browser login adds beside the access token: how to get the next one without the browser. */
export interface OAuthLogin {
  clientId: string;
  refreshToken: string;
  /** When the access token (`token`) expires, ISO 8601, by this machine's clock. */
  expiresAt: string;
  tokenEndpoint: string;
}

export interface Credentials {
  url: string;
  /** A personal access token (sbp_...), or a browser login's access token. */
  token: string;
  oauth?: OAuthLogin;
}

/** Credentials and where each half came from: an environment variable's name or the file's path. */
export interface LoadedCredentials extends Credentials {
  urlFrom: string;
  tokenFrom: string;
  /** The credentials file, when the token came from it with a browser login's refresh token: a refresh writes the new pair there. */
  file?: string;
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

/** The file's JSON: `{url, token}`, and for a browser login `client_id`, `refresh_token`, `expires_at`, `token_endpoint`. */
function toFile(creds: Credentials): Record<string, string> {
  const o = creds.oauth;
  return o
    ? { url: creds.url, token: creds.token, client_id: o.clientId, refresh_token: o.refreshToken, expires_at: o.expiresAt, token_endpoint: o.tokenEndpoint }
    : { url: creds.url, token: creds.token };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** The saved credentials at `path`, or null when there is no file. */
export async function readCredentialsFile(path: string): Promise<Partial<Credentials> | null> {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new CliError(`cannot read ${path}: ${(e as Error).message}`);
  }
  if (!raw || typeof raw !== 'object') throw new CliError(`cannot read ${path}: not a JSON object`);
  const [clientId, refreshToken, expiresAt, tokenEndpoint] = [raw.client_id, raw.refresh_token, raw.expires_at, raw.token_endpoint].map(str);
  const oauth = clientId && refreshToken && expiresAt && tokenEndpoint ? { clientId, refreshToken, expiresAt, tokenEndpoint } : undefined;
  return { url: str(raw.url), token: str(raw.token), ...(oauth ? { oauth } : {}) };
}

/** Written through a temp file and a rename so a crash never leaves half a file; mode 0600, directory 0700. */
export async function writeCredentialsFile(path: string, creds: Credentials): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify(toFile(creds), null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    await chmod(tmp, 0o600);
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw new CliError(`cannot write ${path}: ${(e as Error).message}`);
  }
}

export async function saveCredentials(creds: Credentials, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const path = credentialsPath(env);
  await writeCredentialsFile(path, creds);
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
  const saved: Partial<Credentials> = (!envUrl || !envToken ? await readCredentialsFile(path) : null) ?? {};
  const url = envUrl ? { value: envUrl, from: 'SWITCHBOARD_URL' } : saved.url ? { value: saved.url, from: path } : null;
  const token = envToken ? { value: envToken, from: 'SWITCHBOARD_TOKEN' } : saved.token ? { value: saved.token, from: path } : null;
  if (!url || !token) {
    const half = url ? `${url.from} gives a URL but there is no token; ` : token ? `${token.from} gives a token but there is no URL; ` : '';
    throw new CliError(`not logged in: ${half}set SWITCHBOARD_URL and SWITCHBOARD_TOKEN, or run \`switchboard login --url URL\` (browser) or \`switchboard login --url URL --with-token\` (token on stdin)`);
  }
  const loaded: LoadedCredentials = { url: normalizeServerUrl(url.value, url.from), token: token.value, urlFrom: url.from, tokenFrom: token.from };
  // Only the file's own token is refreshed from the file's refresh token; SWITCHBOARD_TOKEN is used as given.
  return !envToken && saved.oauth ? { ...loaded, oauth: saved.oauth, file: path } : loaded;
}

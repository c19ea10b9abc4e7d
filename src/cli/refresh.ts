import { open, rm, stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { readCredentialsFile, writeCredentialsFile, type Credentials, type OAuthLogin } from './credentials.ts';
import { OAuthRefused, refreshGrant, type TokenSet } from './oauth.ts';
import { CliError } from './output.ts';

// Silent refresh of a browser login. Refresh tokens rotate and a spent one presented again revokes
// the whole grant (replay detection), so two CLI commands refreshing at once must not both spend
// the same one: the refresh runs under a lock file beside the credentials, and re-reads the file
// inside it, taking the other command's fresh token when it already refreshed.

/** Refresh this long before the access token expires. */
export const REFRESH_EARLY_MS = 30_000;
const LOCK_WAIT_MS = 15_000;
/** A lock older than this was left by a command that died (a refresh takes at most the 30 s HTTP timeout). */
const LOCK_STALE_MS = 60_000;

export const isDue = (o: OAuthLogin, now = Date.now()): boolean => {
  const at = Date.parse(o.expiresAt);
  return !Number.isFinite(at) || at - now < REFRESH_EARLY_MS;
};

/** The access token's expiry, from `expires_in` seconds (an hour when the server did not say). */
export const expiresAtFrom = (t: TokenSet, now = Date.now()): string => new Date(now + (t.expires_in ?? 3600) * 1000).toISOString();

/** The words to log in again, with the URL. */
export const logInAgain = (url: string): string => `log in again: switchboard login --url ${url}`;

/** Runs `fn` holding `<file>.lock` (created exclusively); a lock left by a dead command is taken over after a minute. */
export async function withFileLock<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${file}.lock`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const h = await open(lock, 'wx', 0o600);
      await h.writeFile(`${process.pid}\n`);
      await h.close();
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw new CliError(`cannot create ${lock}: ${(e as Error).message}`);
      const st = await stat(lock).catch(() => null);
      if (st && Date.now() - st.mtimeMs > LOCK_STALE_MS) {
        await rm(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new CliError(`${lock} is held by another switchboard command refreshing the login; if none is running, delete that file`);
      await sleep(50 + Math.floor(Math.random() * 100));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { force: true });
  }
}

/**
 * A new access token for the browser login saved in `file`. `stale` is the access token the caller
 * holds: when the file already has another one that is not due (a concurrent command refreshed),
 * that one is taken; otherwise the file's refresh token is spent and the new pair saved atomically.
 * A refused refresh (spent, revoked, expired) is an OAuthRefused saying to log in again.
 */
export async function refreshSavedLogin(file: string, held: Credentials & { oauth: OAuthLogin }): Promise<Credentials & { oauth: OAuthLogin }> {
  return withFileLock(file, async () => {
    const onDisk = await readCredentialsFile(file);
    if (!onDisk?.oauth || !onDisk.token || !onDisk.url || onDisk.oauth.clientId !== held.oauth.clientId) {
      throw new CliError(`${file} changed while this command ran (a logout or another login); run the command again`);
    }
    const current = { url: onDisk.url, token: onDisk.token, oauth: onDisk.oauth };
    if (current.token !== held.token && !isDue(current.oauth)) return current;
    let t: TokenSet;
    try {
      t = await refreshGrant(current.oauth.tokenEndpoint, { refreshToken: current.oauth.refreshToken, clientId: current.oauth.clientId });
    } catch (e) {
      if (e instanceof OAuthRefused) {
        throw new OAuthRefused(`the browser login saved in ${file} can no longer be refreshed, the server says: ${e.reason} (${e.error}); ${logInAgain(current.url)}`, e.error, e.reason);
      }
      throw e;
    }
    const next = {
      url: current.url,
      token: t.access_token,
      oauth: { ...current.oauth, refreshToken: t.refresh_token ?? current.oauth.refreshToken, expiresAt: expiresAtFrom(t) },
    };
    await writeCredentialsFile(file, next);
    return next;
  });
}

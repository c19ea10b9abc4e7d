import { spawn } from 'node:child_process';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { CliError } from './output.ts';

// The browser login's two local pieces: the loopback listener the authorization server redirects
// to (RFC 8252 §7.3, bound before registration so the registered redirect URI is exact), and
// opening the user's browser on the authorization URL.

export interface CallbackExpectation {
  state: string;
  /** The issuer the callback's `iss` must name when it carries one (RFC 9207). */
  issuer: string;
  /** Whether `iss` is required: the server's metadata said it sends it. */
  issRequired?: boolean;
  timeoutMs: number;
  /** Called every `tickMs` while waiting, with the milliseconds left. */
  onTick?: (leftMs: number) => void;
  tickMs?: number;
}

export interface Loopback {
  redirectUri: string;
  /** Resolves with the code of the first callback carrying our state; rejects on its error, a wrong issuer or the timeout. */
  waitForCode(expect: CallbackExpectation): Promise<string>;
  close(): Promise<void>;
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res: ServerResponse, status: number, title: string, text: string): void {
  const body = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body style="font-family:sans-serif;margin:3em"><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>\n`;
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}

/** What an `error` callback means, for the terminal. */
function callbackError(error: string, description: string | null): string {
  const why = description ? `: ${description.slice(0, 300)}` : '';
  if (error === 'access_denied') return `the login was denied in the browser${why} (access_denied)`;
  return `the authorization server refused the login${why} (${error.slice(0, 100)})`;
}

/** Listens on 127.0.0.1 on a port the system picks; path /callback. */
export async function startLoopback(): Promise<Loopback> {
  let onCallback: ((params: URLSearchParams, res: ServerResponse) => void) | null = null;
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method !== 'GET' || url.pathname !== '/callback') return void page(res, 404, 'Not found', 'This is the Switchboard CLI waiting for a login; nothing else is here.');
    if (!onCallback) return void page(res, 409, 'Not waiting', 'The Switchboard CLI is not waiting for a login right now.');
    onCallback(url.searchParams, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new CliError(`cannot listen on 127.0.0.1 for the browser's answer: ${e.message}`)));
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    redirectUri: `http://127.0.0.1:${port}/callback`,
    waitForCode(ex) {
      return new Promise<string>((resolve, reject) => {
        const started = Date.now();
        const tick = ex.onTick ? setInterval(() => ex.onTick!(Math.max(0, ex.timeoutMs - (Date.now() - started))), ex.tickMs ?? 30_000) : null;
        const finish = (fn: () => void) => {
          clearTimeout(timer);
          if (tick) clearInterval(tick);
          onCallback = null;
          fn();
        };
        const timer = setTimeout(() => {
          const minutes = Math.round(ex.timeoutMs / 60_000);
          finish(() => reject(new CliError(`no answer from the browser within ${minutes >= 1 ? `${minutes} minute${minutes === 1 ? '' : 's'}` : `${Math.ceil(ex.timeoutMs / 1000)} s`}; run switchboard login again (with --no-browser, open the printed URL yourself)`)));
        }, ex.timeoutMs);
        onCallback = (q, res) => {
          // Anything without our state is not the answer to our request: say so and keep waiting.
          if (q.get('state') !== ex.state) return page(res, 400, 'Not this login', 'This answer does not belong to the login the Switchboard CLI is waiting for; it was ignored.');
          const iss = q.get('iss');
          if ((iss !== null && iss !== ex.issuer) || (iss === null && ex.issRequired)) {
            page(res, 400, 'Login failed', 'The answer came from another authorization server than the one the CLI asked. Check the terminal.');
            return finish(() => reject(new CliError(`the browser's answer names the issuer ${JSON.stringify(iss)}, not ${ex.issuer}; refusing it (a mix-up or a forged answer)`)));
          }
          const error = q.get('error');
          if (error !== null) {
            page(res, 200, 'Login not completed', `${callbackError(error, q.get('error_description'))}. You can close this tab.`);
            return finish(() => reject(new CliError(callbackError(error, q.get('error_description')))));
          }
          const code = q.get('code');
          if (!code) {
            page(res, 400, 'Login failed', 'The answer carries no code. Check the terminal.');
            return finish(() => reject(new CliError("the browser's answer carries neither a code nor an error")));
          }
          page(res, 200, 'Switchboard CLI logged in', 'You can close this tab and return to the terminal.');
          finish(() => resolve(code));
        };
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The command that opens `url` in the user's browser: `$BROWSER` (a command, `%s` standing for the
 * URL, or the URL appended; the first of a `:`-separated list), else the platform's opener.
 */
export function browserCommand(url: string, env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): [string, string[]] {
  const fromEnv = env.BROWSER?.split(':').map((s) => s.trim()).find((s) => s !== '');
  if (fromEnv) {
    const words = fromEnv.split(/\s+/);
    const withUrl = words.some((w) => w.includes('%s')) ? words.map((w) => w.replaceAll('%s', url)) : [...words, url];
    return [withUrl[0]!, withUrl.slice(1)];
  }
  if (platform === 'darwin') return ['open', [url]];
  if (platform === 'win32') return ['rundll32', ['url.dll,FileProtocolHandler', url]];
  return ['xdg-open', [url]];
}

/** Starts the browser without waiting for it; resolves false when it could not be started. Never uses a shell. */
export function openBrowser(url: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  const [cmd, args] = browserCommand(url, env);
  return new Promise((resolve) => {
    try {
      const child = spawn(cmd, args, { stdio: 'ignore', detached: true, env });
      child.once('error', () => resolve(false));
      child.once('spawn', () => {
        child.unref();
        resolve(true);
      });
    } catch {
      resolve(false);
    }
  });
}

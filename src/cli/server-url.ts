import { usageError } from './output.ts';

const API_SUFFIX = /\/api\/v1\/*$/;

/**
 * A server URL as the CLI keeps it: `http(s)://host[:port][/prefix]`, no trailing slash. A URL
 * given with the API's own path (`.../api/v1`, copied from a curl line) is taken without it,
 * since every request appends `/api/v1`; one without a scheme is refused with the likely fix,
 * because `127.0.0.1:8080` would otherwise fail deep inside fetch (or parse as scheme `127.0.0.1:`).
 * `from` names where the value came from (`--url`, `SWITCHBOARD_URL`, a file) in the message.
 */
export function normalizeServerUrl(raw: string, from: string): string {
  const given = raw.trim();
  const refuse = (why: string) => usageError(`${from}: ${JSON.stringify(raw)} ${why}`);
  if (given === '') throw refuse('is empty; expected a URL such as http://127.0.0.1:8080');
  if (!/^https?:\/\//i.test(given)) {
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(given)?.[1];
    if (scheme) throw refuse(`uses ${scheme}://; the server speaks http:// or https://`);
    throw refuse(`has no http:// or https://; did you mean http://${given.replace(/^\/+/, '')}?`);
  }
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw refuse('is not a valid URL (expected e.g. http://127.0.0.1:8080)');
  }
  if (url.username || url.password) throw refuse('must not carry a user name or password (the token goes in SWITCHBOARD_TOKEN)');
  if (url.search || url.hash) throw refuse('must not carry a query or a fragment');
  const path = url.pathname.replace(API_SUFFIX, '').replace(/\/+$/, '');
  return `${url.protocol}//${url.host}${path}`;
}

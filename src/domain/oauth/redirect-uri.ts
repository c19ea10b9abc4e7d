import { OAuthError } from './errors.ts';

export const MAX_REDIRECT_URIS = 10;
export const MAX_REDIRECT_URI_LENGTH = 2000;

/** Hosts an `http` redirect may name: the client's own machine only (OAuth 2.1 §8.4.2, RFC 8252 §7.3). */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * One redirect URI a client registers: absolute, no fragment, no wildcard, at most 2000 characters;
 * `https` anywhere, `http` only to a loopback host, or a private-use scheme (`com.example.app:/cb`,
 * RFC 8252 §7.1). Returns the URI exactly as given: it is matched byte for byte later.
 */
export function checkRedirectUri(raw: unknown, index: number): string {
  const field = `redirect_uris[${index}]`;
  const refuse = (why: string) => new OAuthError('invalid_redirect_uri', `${field}: ${why}`);
  if (typeof raw !== 'string' || raw.length === 0) throw refuse('must be a non-empty string');
  if (raw.length > MAX_REDIRECT_URI_LENGTH) throw refuse(`is ${raw.length} characters; at most ${MAX_REDIRECT_URI_LENGTH}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse('is not an absolute URI');
  }
  if (raw.includes('#')) throw refuse('must not contain a fragment');
  if (url.hostname.includes('*')) throw refuse('must not name a wildcard host');
  const scheme = url.protocol.slice(0, -1).toLowerCase();
  if (scheme === 'https') return raw;
  if (scheme === 'http') {
    if (!isLoopbackHost(url.hostname)) throw refuse('http is allowed only to a loopback host (localhost, 127.0.0.0/8, ::1); use https');
    return raw;
  }
  if (['javascript', 'data', 'file', 'ftp', 'ws', 'wss', 'about', 'blob', 'vbscript'].includes(scheme)) throw refuse(`the ${scheme} scheme is not a redirect`);
  // A private-use scheme is a reverse domain name (RFC 8252 §7.1): it has a dot.
  if (!scheme.includes('.')) throw refuse('a private-use scheme must be a reverse domain name with a dot, such as com.example.app');
  return raw;
}

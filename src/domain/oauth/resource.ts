import { OAuthError } from './errors.ts';

/** What a grant's tokens open (RFC 8707): one endpoint's MCP URL, or the operator API acting as the human. */
export type OAuthResource = { kind: 'endpoint'; slug: string; uri: string } | { kind: 'api'; uri: string };

const SLUG = /^[a-z0-9-]{1,64}$/;

export const apiResource = (base: string): string => `${base}/api`;
export const mcpResource = (base: string, slug: string): string => `${base}/mcp/${slug}`;
export const protectedResourceMetadataUrl = (base: string, path: string): string => `${base}/.well-known/oauth-protected-resource${path}`;

/** Whether `slug` may name an endpoint in a metadata path (the alphabet vend mints). */
export const isSlug = (slug: string): boolean => SLUG.test(slug);

/**
 * The resource an authorization or token request names, against this server's base URL. A
 * trailing slash is forgiven; anything else that is not `<base>/api` or `<base>/mcp/<slug>` is
 * `invalid_target`.
 */
export function parseResource(raw: string | undefined, base: string): OAuthResource {
  if (!raw) throw new OAuthError('invalid_target', `resource is required: ${apiResource(base)} for the API, or an endpoint's MCP URL ${mcpResource(base, '<slug>')}`);
  const uri = raw.replace(/\/+$/, '');
  if (uri === apiResource(base)) return { kind: 'api', uri };
  const prefix = `${base}/mcp/`;
  if (uri.startsWith(prefix) && isSlug(uri.slice(prefix.length))) return { kind: 'endpoint', slug: uri.slice(prefix.length), uri };
  throw new OAuthError('invalid_target', `resource ${JSON.stringify(raw.slice(0, 200))} is not served by this server: use ${apiResource(base)} or ${mcpResource(base, '<slug>')}`);
}

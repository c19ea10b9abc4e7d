import { OAuthError } from './errors.ts';
import { MAX_REDIRECT_URIS, checkRedirectUri } from './redirect-uri.ts';

export const MAX_CLIENT_NAME = 200;

export interface ClientRegistration {
  client_name: string;
  redirect_uris: string[];
}

/**
 * A dynamic client registration (RFC 7591) for a public client: authorization code and refresh
 * token only, response type `code`, no client secret (`token_endpoint_auth_method` absent or
 * `none`), 1 to 10 redirect URIs. `client_name` is cut to 200 characters.
 */
export function checkRegistration(body: unknown): ClientRegistration {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new OAuthError('invalid_client_metadata', 'the body must be a JSON object');
  const m = body as Record<string, unknown>;
  const auth = m.token_endpoint_auth_method;
  if (auth !== undefined && auth !== 'none') {
    throw new OAuthError('invalid_client_metadata', `token_endpoint_auth_method: only public clients (none) are registered, not ${JSON.stringify(auth)}`);
  }
  const grants = m.grant_types ?? ['authorization_code'];
  if (!Array.isArray(grants) || grants.some((g) => g !== 'authorization_code' && g !== 'refresh_token')) {
    throw new OAuthError('invalid_client_metadata', 'grant_types: only authorization_code and refresh_token are supported');
  }
  const responses = m.response_types ?? ['code'];
  if (!Array.isArray(responses) || responses.some((r) => r !== 'code')) throw new OAuthError('invalid_client_metadata', 'response_types: only code is supported');
  const uris = m.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0) throw new OAuthError('invalid_redirect_uri', 'redirect_uris: at least one redirect URI is required');
  if (uris.length > MAX_REDIRECT_URIS) throw new OAuthError('invalid_redirect_uri', `redirect_uris: at most ${MAX_REDIRECT_URIS}, not ${uris.length}`);
  const redirect_uris = uris.map((u, i) => checkRedirectUri(u, i));
  const name = m.client_name;
  if (name !== undefined && typeof name !== 'string') throw new OAuthError('invalid_client_metadata', 'client_name must be a string');
  const client_name = (name ?? '').replace(/[\u0000-\u001f\u007f]/g, ' ').trim().slice(0, MAX_CLIENT_NAME) || 'unnamed client';
  return { client_name, redirect_uris };
}

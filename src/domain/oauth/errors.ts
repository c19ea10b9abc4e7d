/**
 * The OAuth error family (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 8707 §2): the token and
 * registration endpoints answer `{error, error_description}` with this status; the authorization
 * endpoint carries the same code back to the client's redirect URI.
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'invalid_target'
  | 'access_denied'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata'
  | 'temporarily_unavailable';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status = error === 'invalid_client' ? 401 : 400,
  ) {
    super(description);
    this.name = 'OAuthError';
  }

  toJSON(): { error: OAuthErrorCode; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

export const isOAuthError = (e: unknown): e is OAuthError => e instanceof OAuthError;

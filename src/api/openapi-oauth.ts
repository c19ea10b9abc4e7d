/**
 * The OAuth authorization server's routes (issue 38; docs/oauth.md) in the API's OpenAPI document.
 * They live outside /api/v1 and take no credential: the document lists them so a client author
 * finds the whole surface in one place. Written by hand: they speak OAuth's wire forms, not the
 * API's envelope.
 */
const oauthError = {
  description: 'An OAuth error (RFC 6749 §5.2, RFC 7591 §3.2.2)',
  content: {
    'application/json': {
      schema: {
        type: 'object',
        required: ['error', 'error_description'],
        properties: { error: { type: 'string', examples: ['invalid_grant', 'invalid_redirect_uri', 'invalid_target'] }, error_description: { type: 'string' } },
      },
    },
  },
};
const json = (description: string, properties: Record<string, unknown> = {}) => ({
  description,
  content: { 'application/json': { schema: { type: 'object', properties } } },
});
const str = { type: 'string' };

export function oauthPaths(): Record<string, Record<string, unknown>> {
  const unauthenticated = { security: [] as unknown[], tags: ['oauth'] };
  return {
    '/.well-known/oauth-authorization-server': {
      get: { ...unauthenticated, operationId: 'oauthAuthorizationServerMetadata', summary: 'Authorization server metadata (RFC 8414)', responses: { 200: json('The metadata', { issuer: str, authorization_endpoint: str, token_endpoint: str, registration_endpoint: str }) } },
    },
    '/.well-known/oauth-protected-resource/api': {
      get: { ...unauthenticated, operationId: 'oauthApiResourceMetadata', summary: 'Protected resource metadata of /api/v1 (RFC 9728); the resource is <base>/api', responses: { 200: json('The metadata', { resource: str, authorization_servers: { type: 'array', items: str } }) } },
    },
    '/.well-known/oauth-protected-resource/mcp/{slug}': {
      get: {
        ...unauthenticated,
        operationId: 'oauthMcpResourceMetadata',
        summary: "Protected resource metadata of an endpoint's MCP URL (RFC 9728); static, no lookup",
        parameters: [{ name: 'slug', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9-]{1,64}$' } }],
        responses: { 200: json('The metadata', { resource: str, authorization_servers: { type: 'array', items: str } }), 404: oauthError },
      },
    },
    '/oauth/register': {
      post: {
        ...unauthenticated,
        operationId: 'oauthRegister',
        summary: 'Dynamic client registration (RFC 7591): public clients, https, loopback http or private-use redirect URIs',
        requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', required: ['redirect_uris'], properties: { client_name: str, redirect_uris: { type: 'array', items: str, minItems: 1, maxItems: 10 } } } } } },
        responses: { 201: json('The registered client', { client_id: str, client_name: str, redirect_uris: { type: 'array', items: str } }), 400: oauthError, 413: oauthError, 429: oauthError },
      },
    },
    '/oauth/authorize': {
      get: {
        ...unauthenticated,
        operationId: 'oauthAuthorize',
        summary: 'Authorization endpoint: the consent page on the board, behind its sign-in (PKCE S256 and resource required)',
        parameters: ['response_type', 'client_id', 'redirect_uri', 'state', 'code_challenge', 'code_challenge_method', 'resource'].map((name) => ({ name, in: 'query', required: name !== 'state' && name !== 'redirect_uri', schema: str })),
        responses: { 200: { description: 'The consent page (HTML)' }, 303: { description: 'To sign in, or back to the client with an error' }, 400: { description: 'Unknown client or redirect URI (HTML; nothing is sent to the client)' } },
      },
    },
    '/oauth/token': {
      post: {
        ...unauthenticated,
        operationId: 'oauthToken',
        summary: 'Token endpoint: authorization_code (with code_verifier) or refresh_token (rotating)',
        requestBody: {
          required: true,
          content: {
            'application/x-www-form-urlencoded': {
              schema: { type: 'object', required: ['grant_type', 'client_id'], properties: { grant_type: { enum: ['authorization_code', 'refresh_token'] }, client_id: str, code: str, code_verifier: str, redirect_uri: str, refresh_token: str, resource: str } },
            },
          },
        },
        responses: { 200: json('Tokens (Cache-Control: no-store)', { access_token: str, token_type: str, expires_in: { type: 'integer' }, refresh_token: str }), 400: oauthError, 413: oauthError, 429: oauthError },
      },
    },
  };
}

/** The OAuth flow a client of /api/v1 may use instead of a personal token. */
export const oauthSecurityScheme = {
  type: 'oauth2',
  description: 'An API grant: authorization code with PKCE and resource=<base>/api (switchboard login --url URL does it for the CLI)',
  flows: { authorizationCode: { authorizationUrl: '/oauth/authorize', tokenUrl: '/oauth/token', refreshUrl: '/oauth/token', scopes: { operator: 'act as the signed-in human' } } },
};

export { findClient, registerClient, type OAuthClient } from './clients.ts';
export { apiGrantsOf, createGrantWithCode, endpointGrants, endpointGrantsOfEach, revokeEndpointGrants, revokeGrant, revokedGrantIdsUnscoped, type NewGrant, type OAuthGrant } from './grants.ts';
export {
  ACCESS_TOKEN_PREFIX,
  AUTHORIZATION_CODE_PREFIX,
  REFRESH_TOKEN_PREFIX,
  deleteExpiredOAuthRowsUnscoped,
  exchangeCode,
  resolveAccessTokenUnscoped,
  rotateRefreshToken,
  type CodeExchange,
  type IssuedTokens,
  type RefreshOutcome,
  type ResolvedAccess,
  type TokenLifetimes,
} from './tokens.ts';

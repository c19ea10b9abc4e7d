import { createHash } from 'node:crypto';
import { OAuthError } from './errors.ts';

/** RFC 7636 §4.1: 43 to 128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** A base64url SHA-256 digest, without padding. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** The challenge an authorization request carries: S256 only (OAuth 2.1 drops `plain`). */
export function checkCodeChallenge(challenge: string | undefined, method: string | undefined): string {
  if (!challenge) throw new OAuthError('invalid_request', 'code_challenge is required (PKCE with S256)');
  if (method !== 'S256') throw new OAuthError('invalid_request', `code_challenge_method must be S256${method ? `, not ${JSON.stringify(method)}` : ''}`);
  if (!S256_CHALLENGE.test(challenge)) throw new OAuthError('invalid_request', 'code_challenge must be 43 base64url characters (a SHA-256 digest)');
  return challenge;
}

export const s256 = (verifier: string): string => createHash('sha256').update(verifier).digest('base64url');

/** Whether the verifier presented at the token endpoint proves the challenge of the code. */
export function verifierMatches(verifier: string | undefined, challenge: string): boolean {
  return typeof verifier === 'string' && VERIFIER.test(verifier) && s256(verifier) === challenge;
}

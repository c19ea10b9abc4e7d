import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Bearer secrets: a kind prefix plus 32 random bytes (base64url, no padding). 256 bits of entropy,
 * so a fast SHA-256 at rest is enough; only the hash and a short display prefix are stored.
 */
export const ENDPOINT_CREDENTIAL_PREFIX = 'sbk_';
export const PERSONAL_TOKEN_PREFIX = 'sbp_';
/** OAuth (issue 38): access and refresh tokens, and authorization codes. Prefixed so a secret scanner and the guards can tell them apart. */
export const OAUTH_ACCESS_TOKEN_PREFIX = 'sba_';
export const OAUTH_REFRESH_TOKEN_PREFIX = 'sbr_';
export const OAUTH_CODE_PREFIX = 'sbc_';
export const DISPLAY_PREFIX_LENGTH = 12;

export interface MintedSecret {
  plaintext: string;
  hash: string;
  displayPrefix: string;
}

export function mintSecret(kindPrefix: string): MintedSecret {
  const plaintext = kindPrefix + randomBytes(32).toString('base64url');
  return { plaintext, hash: hashSecret(plaintext), displayPrefix: plaintext.slice(0, DISPLAY_PREFIX_LENGTH) };
}

export function hashSecret(plaintext: string): string {
  return createHash('sha256').update(plaintext, 'utf8').digest('hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

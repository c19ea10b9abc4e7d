import { createHmac } from 'node:crypto';
import { constantTimeEqual } from '../lib/secrets.ts';

/**
 * The per-session synchronizer token: HMAC-SHA256 keyed by the session token over a fixed label,
 * hex. Bound to the session, needs no storage, and reveals nothing about the cookie.
 */
const LABEL = 'switchboard board csrf v1';

export function csrfToken(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update(LABEL).digest('hex');
}

/** Constant-time check of a presented token (form field or header) against the session's. */
export function csrfValid(sessionToken: string, presented: unknown): boolean {
  if (typeof presented !== 'string' || presented.length !== 64) return false;
  return constantTimeEqual(presented, csrfToken(sessionToken));
}

/** Numbers of the todo lifecycle (SPEC-0003). SQL receives them as parameters. */
export const DEFAULT_LEASE_SECONDS = 300;
export const MAX_LEASE_SECONDS = 86_400;
export const DEFAULT_MAX_ATTEMPTS = 5;
/** Retry after a fail waits 30 s, doubling per attempt, capped at 15 minutes. */
export const RETRY_BASE_SECONDS = 30;
export const RETRY_CAP_SECONDS = 900;
export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 200;
export const TITLE_MAX_BYTES = 200;
export const IDEMPOTENCY_KEY_MAX_BYTES = 256;
/** A todo's priority: higher is claimed first. */
export const PRIORITY_MIN = -1000;
export const PRIORITY_MAX = 1000;
/** What a push may ask for as max_attempts. */
export const MAX_ATTEMPTS_LIMIT = 100;
/** The longest delay a push may ask for: 30 days. */
export const DELAY_MAX_MS = 30 * 86_400_000;

/** A requested lease: absent or non-positive means the default; anything over 24 h is clamped. */
export function leaseSeconds(requested: number | undefined): number {
  if (requested === undefined || !Number.isFinite(requested) || requested <= 0) return DEFAULT_LEASE_SECONDS;
  return Math.min(Math.floor(requested), MAX_LEASE_SECONDS);
}

/** The wait before a failed todo becomes claimable again, given the attempt that failed. */
export function retryBackoffSeconds(attempt: number): number {
  return Math.min(RETRY_BASE_SECONDS * 2 ** (Math.max(attempt, 1) - 1), RETRY_CAP_SECONDS);
}

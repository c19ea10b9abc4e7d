import { createHash } from 'node:crypto';
import { invalidArgument } from './errors.ts';
import { parseDuration } from './duration.ts';
import {
  DEFAULT_MAX_ATTEMPTS,
  DELAY_MAX_MS,
  IDEMPOTENCY_KEY_MAX_BYTES,
  MAX_ATTEMPTS_LIMIT,
  PRIORITY_MAX,
  PRIORITY_MIN,
  TITLE_MAX_BYTES,
} from './lifecycle.ts';
import { requireJsonDepth } from './json-depth.ts';
import { hasControlCharacters } from './neutralize.ts';
import { scopedQueue, validateQueueName } from './scope.ts';

/**
 * The rules for a todo someone pushes (an operator over /api/v1, or a webhook delivery): title,
 * kind, idempotency key, payload, target queue, priority, attempts and delay. Pure: each throws invalid_argument naming its field.
 */

export const TODO_KIND_MAX_CHARS = 64;
const KIND = /^[A-Za-z0-9._:-]+$/;
/** The kind of a todo pushed without one. */
export const OPERATOR_KIND = 'operator';

const byteLength = (s: string) => Buffer.byteLength(s, 'utf8');

/** Trimmed; not empty, at most TITLE_MAX_BYTES bytes of UTF-8, one line without control characters. */
export function todoTitle(raw: string): string {
  const title = raw.trim();
  if (title === '') throw invalidArgument('title', 'must not be empty');
  if (byteLength(title) > TITLE_MAX_BYTES) throw invalidArgument('title', `must be at most ${TITLE_MAX_BYTES} bytes; put detail in payload`);
  if (hasControlCharacters(title)) throw invalidArgument('title', 'must be one line without control characters');
  return title;
}

/** What is wrong with a kind, or null: 1-64 letters, digits, ".", "_", ":" or "-". */
export function kindProblem(kind: string): string | null {
  if (kind === '') return 'must not be empty';
  if (kind.length > TODO_KIND_MAX_CHARS) return `must be at most ${TODO_KIND_MAX_CHARS} characters`;
  if (!KIND.test(kind)) return 'must be letters, digits, ".", "_", ":" or "-"';
  return null;
}

export function todoKind(raw: string | undefined): string {
  if (raw === undefined) return OPERATOR_KIND;
  const problem = kindProblem(raw);
  if (problem) throw invalidArgument('kind', problem);
  return raw;
}

/** A caller's idempotency key: absent, or 1..IDEMPOTENCY_KEY_MAX_BYTES bytes. */
export function idempotencyKey(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  if (raw === '' || byteLength(raw) > IDEMPOTENCY_KEY_MAX_BYTES) throw invalidArgument('key', `must be 1-${IDEMPOTENCY_KEY_MAX_BYTES} bytes`);
  return raw;
}

/**
 * A webhook delivery's key, `<webhook id>:<delivery id>`. Ingest never refuses a valid delivery, so
 * a delivery id too long for the key cap is replaced by its SHA-256: still one key per delivery.
 */
export function ingestIdempotencyKey(webhookId: string, deliveryId: string): string {
  const key = `${webhookId}:${deliveryId}`;
  if (byteLength(key) <= IDEMPOTENCY_KEY_MAX_BYTES) return key;
  return `${webhookId}:sha256:${createHash('sha256').update(deliveryId, 'utf8').digest('hex')}`;
}

/** A todo's payload: any JSON value nesting at most JSON_MAX_DEPTH levels, `{}` when none is given. */
export const todoPayload = (raw: unknown): unknown => requireJsonDepth('payload', raw ?? {});

/** The queue a push lands in: the one given (one of the endpoint's), or the endpoint's only queue. */
export function resolvePushQueue(endpoint: { slug: string; scope_queues: readonly string[] }, requested: string | undefined): string {
  if (requested !== undefined) validateQueueName('queue', requested);
  return scopedQueue({ slug: endpoint.slug, queues: endpoint.scope_queues }, 'queue', requested, 'operator');
}

/** A whole number in `min..max`, or invalid_argument naming `field`. */
function wholeIn(field: string, raw: number, min: number, max: number): number {
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < min || raw > max) throw invalidArgument(field, `must be a whole number from ${min} to ${max}`);
  return raw;
}

/** Higher is claimed first: a whole number from PRIORITY_MIN to PRIORITY_MAX, 0 when absent. */
export const todoPriority = (raw: number | undefined): number => (raw === undefined ? 0 : wholeIn('priority', raw, PRIORITY_MIN, PRIORITY_MAX));

/** How many claims a todo gets before it is a dead letter: 1..MAX_ATTEMPTS_LIMIT, the default when absent. */
export const todoMaxAttempts = (raw: number | undefined): number =>
  raw === undefined ? DEFAULT_MAX_ATTEMPTS : wholeIn('max_attempts', raw, 1, MAX_ATTEMPTS_LIMIT);

/**
 * A push's `delay` (`10m`, `1h30m`, `90s`: the one duration grammar), in milliseconds: 0 when
 * absent, at most DELAY_MAX_MS.
 */
export function todoDelayMs(raw: string | undefined): number {
  if (raw === undefined) return 0;
  const ms = typeof raw === 'string' ? parseDuration(raw) : null;
  if (ms === null) throw invalidArgument('delay', 'must be a duration like 90s, 10m or 1h30m');
  if (ms > DELAY_MAX_MS) throw invalidArgument('delay', `must be at most ${DELAY_MAX_MS / 3_600_000}h (30 days)`);
  return ms;
}

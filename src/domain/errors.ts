/**
 * The typed error families every layer speaks. A store or domain function throws one of these;
 * the HTTP layer (and later MCP) maps the code to its own wire form in exactly one place.
 */
export type ErrorCode =
  | 'invalid_argument'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'failed_precondition'
  | 'rate_limited'
  | 'resource_exhausted'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'unavailable'
  | 'internal';

export class SwitchboardError extends Error {
  readonly code: ErrorCode;
  /** Extra, non-secret fields carried into the error envelope (e.g. `field`, `slug`, `state`). */
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = 'SwitchboardError';
    this.code = code;
    this.details = details;
  }
}

export const invalidArgument = (field: string, message: string): SwitchboardError =>
  new SwitchboardError('invalid_argument', `${field}: ${message}`, { field });

export const notFound = (message: string): SwitchboardError => new SwitchboardError('not_found', message);

export const conflict = (message: string, details: Record<string, unknown> = {}): SwitchboardError =>
  new SwitchboardError('conflict', message, details);

/** The request is valid but the state it needs does not hold (e.g. an operator's override an agent may not undo). */
export const failedPrecondition = (message: string, details: Record<string, unknown> = {}): SwitchboardError =>
  new SwitchboardError('failed_precondition', message, details);

export const forbidden = (message: string): SwitchboardError => new SwitchboardError('forbidden', message);

export const isSwitchboardError = (e: unknown): e is SwitchboardError => e instanceof SwitchboardError;

/** Seconds a refused caller should wait before retrying (a rate limit, an unreachable database), if the error says. */
export function retryAfterSeconds(e: SwitchboardError): number | undefined {
  const s = e.details.retry_after;
  return (e.code === 'rate_limited' || e.code === 'unavailable') && typeof s === 'number' ? s : undefined;
}

/**
 * PostgreSQL refuses some text any client can send: a NUL (U+0000) in text (22021) or in JSON
 * (22P05), and an unpaired UTF-16 surrogate escape in JSON (22P02). That is the input's fault, so
 * an invalid_argument, never an internal error; null for any other error.
 */
export function unstorableInput(err: unknown): SwitchboardError | null {
  const { code, routine } = (err ?? {}) as { code?: unknown; routine?: unknown };
  // 22P02 is any invalid text representation; only the JSON parser's (json_ereport_error/json_errsave_error) is this.
  const unstorable = code === '22021' || code === '22P05' || (code === '22P02' && /json/.test(String(routine)));
  if (!unstorable) return null;
  return new SwitchboardError('invalid_argument', 'a value contains a character that cannot be stored: NUL (U+0000) or an unpaired UTF-16 surrogate');
}

/** Seconds a caller is told to wait when the database cannot be reached. */
export const DATABASE_RETRY_AFTER_S = 5;

// Node socket errors and the postgres driver's own connection states.
const CONNECTION_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/**
 * The database could not be reached or went away mid-request (a restart, a failover, a full
 * connection table): `unavailable`, which callers may retry, rather than an internal error.
 * SQLSTATE class 08 is a connection exception; 57P01-57P03 are shutdowns and a server still
 * starting; 53300 is too many connections. Null for any other error.
 */
export function databaseUnavailable(err: unknown): SwitchboardError | null {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  if (typeof code !== 'string') return null;
  const down = CONNECTION_ERRORS.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300';
  if (!down) return null;
  return new SwitchboardError('unavailable', 'the database is unreachable; retry shortly', { retry_after: DATABASE_RETRY_AFTER_S });
}

/** A surface's own recogniser for errors only it knows (fastify's codes); null when not one of them. */
export type Recognise = (err: unknown) => SwitchboardError | null;

/**
 * The one classification of anything thrown: a SwitchboardError as it is, then what the surface
 * recognises, then text PostgreSQL refuses to store, then an unreachable database, else internal.
 */
export function classify(err: unknown, recognise?: Recognise): SwitchboardError {
  if (isSwitchboardError(err)) return err;
  return recognise?.(err) ?? unstorableInput(err) ?? databaseUnavailable(err) ?? new SwitchboardError('internal', 'internal error');
}

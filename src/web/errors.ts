import type { FastifyReply } from 'fastify';
import { SwitchboardError, classify, isSwitchboardError, retryAfterSeconds, type ErrorCode, type Recognise } from '../domain/errors.ts';
import type { Logger } from '../lib/log.ts';

/** The one mapping from error code to HTTP status. */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  failed_precondition: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  resource_exhausted: 409,
  internal: 500,
  unavailable: 503,
};

export interface ErrorEnvelope {
  error: string;
  code: ErrorCode;
  [extra: string]: unknown;
}

export function envelope(err: SwitchboardError): ErrorEnvelope {
  return { error: err.message, code: err.code, ...err.details };
}

export function sendError(reply: FastifyReply, err: SwitchboardError): FastifyReply {
  const wait = retryAfterSeconds(err);
  if (wait !== undefined) reply.header('Retry-After', String(wait));
  return reply.code(HTTP_STATUS[err.code]).type('application/json; charset=utf-8').send(envelope(err));
}

/** fastify's own errors (URL decoding, body parsing, limits, content type) as ours; null for any other error. */
export function fromFastifyError(err: unknown): SwitchboardError | null {
  if (typeof err !== 'object' || err === null) return null;
  const e = err as { code?: unknown; statusCode?: unknown };
  switch (e.code) {
    case 'FST_ERR_BAD_URL':
      return new SwitchboardError('invalid_argument', 'path: is not a valid URL (bad percent-encoding)', { field: 'path' });
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new SwitchboardError('invalid_argument', 'path: a path segment is too long', { field: 'path' });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new SwitchboardError('payload_too_large', 'request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new SwitchboardError('unsupported_media_type', 'body must be application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new SwitchboardError('invalid_argument', 'body: a JSON object is required', { field: 'body' });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new SwitchboardError('invalid_argument', 'body: is not valid JSON', { field: 'body' });
  }
  if (err instanceof SyntaxError || e.statusCode === 400) {
    return new SwitchboardError('invalid_argument', 'body: is not valid JSON', { field: 'body' });
  }
  if (e.statusCode === 413) return new SwitchboardError('payload_too_large', 'request body is too large');
  // Any other refusal of fastify's (an empty or unparseable Content-Type is a 415): the code of its status.
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    const code = (Object.keys(HTTP_STATUS) as ErrorCode[]).find((c) => HTTP_STATUS[c] === e.statusCode) ?? 'invalid_argument';
    return new SwitchboardError(code, String((err as { message?: unknown }).message ?? 'bad request'));
  }
  return null;
}

/**
 * classify() with fastify's errors recognised, and the one logging rule: an internal error is
 * logged with its cause at error level, an unreachable database at warn, a refusal not at all.
 */
export function classifyAndLog(err: unknown, log: Logger, context: Record<string, unknown>, what: string, recognise: Recognise = fromFastifyError): SwitchboardError {
  const e = classify(err, recognise);
  if (e.code === 'internal' && !isSwitchboardError(err)) log.error({ err, ...context }, `${what}: unhandled error`);
  else if (e.code === 'unavailable' && !isSwitchboardError(err)) log.warn({ err: (err as Error).message, ...context }, `${what}: database unreachable`);
  return e;
}

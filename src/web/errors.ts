import type { FastifyReply } from 'fastify';
import { SwitchboardError, type ErrorCode } from '../domain/errors.ts';

/** The one mapping from error code to HTTP status. */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
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
  if ((err.code === 'rate_limited' || err.code === 'unavailable') && typeof err.details.retry_after === 'number') {
    reply.header('Retry-After', String(err.details.retry_after));
  }
  return reply.code(HTTP_STATUS[err.code]).type('application/json; charset=utf-8').send(envelope(err));
}

/** Turns fastify's own errors (body parsing, limits, content type) into our envelope. */
export function fromFastifyError(e: { code?: string; statusCode?: number; message: string }): SwitchboardError | null {
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new SwitchboardError('payload_too_large', 'request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new SwitchboardError('unsupported_media_type', 'body must be application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new SwitchboardError('invalid_argument', 'body: a JSON object is required', { field: 'body' });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new SwitchboardError('invalid_argument', 'body: is not valid JSON', { field: 'body' });
  }
  if (e instanceof SyntaxError || e.statusCode === 400) {
    return new SwitchboardError('invalid_argument', 'body: is not valid JSON', { field: 'body' });
  }
  if (e.statusCode === 413) return new SwitchboardError('payload_too_large', 'request body is too large');
  return null;
}

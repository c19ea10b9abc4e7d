/** JSON-RPC 2.0 as MCP uses it: the message shapes and the error codes we answer with. */
import { retryAfterSeconds, type SwitchboardError } from '../domain/errors.ts';
import { HTTP_STATUS } from '../web/errors.ts';

export type JsonRpcId = string | number;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: JsonRpcId | null;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** Transport-level refusals (the SDK's convention for session and header problems). */
export const TRANSPORT_ERROR = -32000;
export const SESSION_NOT_FOUND = -32001;

export type Incoming =
  | { kind: 'request'; message: JsonRpcRequest }
  | { kind: 'notification'; message: JsonRpcNotification }
  | { kind: 'response' }
  | { kind: 'invalid'; id: JsonRpcId | null; reason: string };

const isId = (v: unknown): v is JsonRpcId => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

/** Classifies one decoded JSON value as a request, notification, client response, or invalid. */
export function classifyMessage(value: unknown): Incoming {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { kind: 'invalid', id: null, reason: 'a JSON-RPC message must be an object' };
  }
  const m = value as Record<string, unknown>;
  const id = isId(m.id) ? m.id : null;
  if (m.jsonrpc !== '2.0') return { kind: 'invalid', id, reason: 'jsonrpc must be "2.0"' };
  if (typeof m.method === 'string') {
    if (m.params !== undefined && (typeof m.params !== 'object' || m.params === null || Array.isArray(m.params))) {
      return { kind: 'invalid', id, reason: 'params must be an object' };
    }
    if ('id' in m) {
      if (!isId(m.id)) return { kind: 'invalid', id: null, reason: 'id must be a string or a number' };
      return { kind: 'request', message: m as unknown as JsonRpcRequest };
    }
    return { kind: 'notification', message: m as unknown as JsonRpcNotification };
  }
  if ('result' in m || 'error' in m) return { kind: 'response' };
  return { kind: 'invalid', id, reason: 'not a request, notification or response' };
}

export const rpcResult = (id: JsonRpcId, result: unknown): JsonRpcResponse => ({ jsonrpc: '2.0', id, result });

export const rpcError = (id: JsonRpcId | null, code: number, message: string, data?: unknown): JsonRpcResponse => ({
  jsonrpc: '2.0',
  id,
  error: data === undefined ? { code, message } : { code, message, data },
});

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  503: 'Service Unavailable',
};

/** The JSON-RPC renderer of a classified error: its HTTP status, the error body and any Retry-After. */
export function rpcFailure(e: SwitchboardError): { status: number; body: JsonRpcResponse; headers: Record<string, string> } {
  const status = HTTP_STATUS[e.code];
  const wait = retryAfterSeconds(e);
  const headers: Record<string, string> = wait === undefined ? {} : { 'retry-after': String(wait) };
  if (e.code === 'internal') return { status, body: rpcError(null, INTERNAL_ERROR, 'Internal error'), headers };
  const message = `${STATUS_TEXT[status] ?? 'Error'}: ${e.message}`;
  return { status, body: rpcError(null, e.code === 'unavailable' ? INTERNAL_ERROR : TRANSPORT_ERROR, message), headers };
}

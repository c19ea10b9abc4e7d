import { describe, expect, it } from 'vitest';
import { SwitchboardError } from '../domain/errors.ts';
import { INTERNAL_ERROR, TRANSPORT_ERROR, rpcFailure } from './jsonrpc.ts';

describe('rpcFailure', () => {
  it("a caller's fault: its HTTP status, a transport error naming the status", () => {
    const f = rpcFailure(new SwitchboardError('payload_too_large', 'the body limit is 1048576 bytes'));
    expect(f.status).toBe(413);
    expect(f.body.error).toEqual({ code: TRANSPORT_ERROR, message: 'Payload Too Large: the body limit is 1048576 bytes' });
  });
  it('an unreachable database: 503, an internal error code and Retry-After', () => {
    const f = rpcFailure(new SwitchboardError('unavailable', 'the database is unreachable; retry shortly', { retry_after: 5 }));
    expect(f.status).toBe(503);
    expect(f.body.error?.code).toBe(INTERNAL_ERROR);
    expect(f.headers).toEqual({ 'retry-after': '5' });
  });
  it('an internal error says nothing more', () => {
    expect(rpcFailure(new SwitchboardError('internal', 'internal error'))).toEqual({
      status: 500,
      body: { jsonrpc: '2.0', id: null, error: { code: INTERNAL_ERROR, message: 'Internal error' } },
      headers: {},
    });
  });
});

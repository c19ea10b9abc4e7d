import { describe, expect, it } from 'vitest';
import { databaseUnavailable, unstorableInput } from './errors.ts';

describe('databaseUnavailable', () => {
  it('is unavailable for a refused or dropped connection and for PostgreSQL shutting down or full', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'CONNECTION_CLOSED', 'CONNECT_TIMEOUT', '08006', '08001', '57P01', '57P03', '53300']) {
      const e = databaseUnavailable(Object.assign(new Error('x'), { code }));
      expect(e?.code, code).toBe('unavailable');
      expect(e?.details.retry_after, code).toBe(5);
    }
  });
  it('is null for any other error, so real bugs stay internal', () => {
    for (const err of [new Error('boom'), Object.assign(new Error('x'), { code: '23505' }), Object.assign(new Error('x'), { code: '42P01' }), null, undefined, 'text']) {
      expect(databaseUnavailable(err)).toBeNull();
    }
  });
});

describe('unstorableInput', () => {
  it('maps NUL and bad JSON text to invalid_argument and nothing else', () => {
    expect(unstorableInput({ code: '22021' })?.code).toBe('invalid_argument');
    expect(unstorableInput({ code: '22P02', routine: 'json_ereport_error' })?.code).toBe('invalid_argument');
    expect(unstorableInput({ code: '22P02', routine: 'int4in' })).toBeNull();
  });
});

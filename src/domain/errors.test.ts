import { describe, expect, it } from 'vitest';
import { SwitchboardError, classify, databaseUnavailable, retryAfterSeconds, unstorableInput } from './errors.ts';

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

describe('classify', () => {
  it('returns a SwitchboardError as it is, without asking the recogniser', () => {
    const e = new SwitchboardError('conflict', 'taken', { state: 'claimed' });
    expect(classify(e, () => new SwitchboardError('internal', 'no'))).toBe(e);
  });
  it("takes the surface's recognition first", () => {
    const mapped = new SwitchboardError('payload_too_large', 'too big');
    expect(classify({ code: '22021' }, () => mapped)).toBe(mapped);
  });
  it('falls through a recogniser that does not know the error', () => {
    expect(classify({ code: '22021' }, () => null).code).toBe('invalid_argument');
  });
  it('is invalid_argument for text PostgreSQL cannot store', () => {
    expect(classify(Object.assign(new Error('x'), { code: '22P05' })).code).toBe('invalid_argument');
  });
  it('is unavailable, with a retry hint, for an unreachable database', () => {
    const e = classify(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }));
    expect(e.code).toBe('unavailable');
    expect(e.details.retry_after).toBe(5);
  });
  it('is internal, without the cause in its message, for anything else', () => {
    for (const err of [new Error('secret detail'), null, undefined, 'text', { code: '23505' }]) {
      const e = classify(err);
      expect(e.code).toBe('internal');
      expect(e.message).toBe('internal error');
    }
  });
});

describe('retryAfterSeconds', () => {
  it('is the wait of a rate limit or an unreachable database, undefined otherwise', () => {
    expect(retryAfterSeconds(new SwitchboardError('rate_limited', 'slow down', { retry_after: 3 }))).toBe(3);
    expect(retryAfterSeconds(classify({ code: '57P01' }))).toBe(5);
    expect(retryAfterSeconds(new SwitchboardError('rate_limited', 'slow down'))).toBeUndefined();
    expect(retryAfterSeconds(new SwitchboardError('conflict', 'no', { retry_after: 3 }))).toBeUndefined();
  });
});

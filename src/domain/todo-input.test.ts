import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IDEMPOTENCY_KEY_MAX_BYTES, TITLE_MAX_BYTES } from './lifecycle.ts';
import { OPERATOR_KIND, idempotencyKey, ingestIdempotencyKey, kindProblem, resolvePushQueue, todoKind, todoPayload, todoTitle } from './todo-input.ts';

const refused = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return err as { code: string; details: { field: string }; message: string };
  }
  throw new Error('expected a refusal');
};

describe('todoTitle', () => {
  it('trims, and counts the cap in UTF-8 bytes, not characters', () => {
    expect(todoTitle('  Review PR 42 \t')).toBe('Review PR 42');
    expect(todoTitle('x'.repeat(TITLE_MAX_BYTES))).toHaveLength(TITLE_MAX_BYTES);
    // 67 three-byte characters: 67 characters, 201 bytes.
    const e = refused(() => todoTitle('€'.repeat(67)));
    expect(e).toMatchObject({ code: 'invalid_argument', details: { field: 'title' } });
    expect(e.message).toBe(`title: must be at most ${TITLE_MAX_BYTES} bytes; put detail in payload`);
  });

  it('refuses an empty title and any control character', () => {
    expect(refused(() => todoTitle('   ')).message).toBe('title: must not be empty');
    // U+0085 (NEL) and U+2028/U+2029 break lines; U+202A-E and U+2066-9 reorder what is displayed.
    for (const c of ['\n', '\r', '\t', '\u0000', '\u007f', '\u0085', '\u009b', '\u2028', '\u2029', '\u202a', '\u202e', '\u2066', '\u2069']) {
      expect(refused(() => todoTitle(`one${c}two`)).message).toBe('title: must be one line without control characters');
    }
  });
});

describe('todoKind', () => {
  it('defaults to operator and keeps a valid kind', () => {
    expect(todoKind(undefined)).toBe(OPERATOR_KIND);
    expect(todoKind('review.request:v2_a-b')).toBe('review.request:v2_a-b');
    expect(todoKind('k'.repeat(64))).toHaveLength(64);
  });

  it('names the problem: empty, too long, bad characters', () => {
    expect(kindProblem('')).toBe('must not be empty');
    expect(kindProblem('k'.repeat(65))).toBe('must be at most 64 characters');
    expect(kindProblem('has space')).toBe('must be letters, digits, ".", "_", ":" or "-"');
    expect(refused(() => todoKind('a/b'))).toMatchObject({ code: 'invalid_argument', details: { field: 'kind' } });
  });
});

describe('idempotency keys', () => {
  it('a caller key is 1 to IDEMPOTENCY_KEY_MAX_BYTES bytes', () => {
    expect(idempotencyKey(undefined)).toBeNull();
    expect(idempotencyKey('k'.repeat(IDEMPOTENCY_KEY_MAX_BYTES))).toHaveLength(IDEMPOTENCY_KEY_MAX_BYTES);
    expect(refused(() => idempotencyKey('')).message).toBe(`key: must be 1-${IDEMPOTENCY_KEY_MAX_BYTES} bytes`);
    expect(refused(() => idempotencyKey('é'.repeat(129))).details.field).toBe('key');
  });

  it('an ingest key is <webhook>:<delivery>, or the delivery hash when that is over the cap', () => {
    const webhook = '0b9c7f7e-2f36-4b0a-9d3e-6a1f8f0e5c11';
    expect(ingestIdempotencyKey(webhook, 'abc')).toBe(`${webhook}:abc`);
    const long = 'd'.repeat(IDEMPOTENCY_KEY_MAX_BYTES);
    const key = ingestIdempotencyKey(webhook, long);
    expect(key).toBe(`${webhook}:sha256:${createHash('sha256').update(long).digest('hex')}`);
    expect(Buffer.byteLength(key)).toBeLessThanOrEqual(IDEMPOTENCY_KEY_MAX_BYTES);
    expect(ingestIdempotencyKey(webhook, long)).toBe(key);
    expect(ingestIdempotencyKey(webhook, `${long}x`)).not.toBe(key);
  });
});

describe('todoPayload', () => {
  it('is {} when absent and any JSON value otherwise', () => {
    expect(todoPayload(undefined)).toEqual({});
    expect(todoPayload([1, 'two', null])).toEqual([1, 'two', null]);
    expect(todoPayload(0)).toBe(0);
  });
});

describe('resolvePushQueue', () => {
  const one = { slug: 'bot-1', scope_queues: ['inbox'] };
  const two = { slug: 'bot-2', scope_queues: ['inbox', 'reviews'] };

  it("takes the endpoint's only queue, or the one given when it is in scope", () => {
    expect(resolvePushQueue(one, undefined)).toBe('inbox');
    expect(resolvePushQueue(two, 'reviews')).toBe('reviews');
  });

  it('refuses a missing queue on a multi-queue endpoint and a queue out of scope', () => {
    expect(refused(() => resolvePushQueue(two, undefined)).message).toBe('queue: required, because endpoint bot-2 has several queues (inbox, reviews)');
    expect(refused(() => resolvePushQueue(one, 'reviews')).message).toBe(`queue: "reviews" is not one of endpoint bot-1's queues (inbox)`);
  });
});

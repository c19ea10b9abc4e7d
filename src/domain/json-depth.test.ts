import { describe, expect, it } from 'vitest';
import { SwitchboardError } from './errors.ts';
import { JSON_MAX_DEPTH, jsonDepthWithin, jsonTextDepthWithin, requireFieldsJsonDepth } from './json-depth.ts';
import { parseInput } from './validate.ts';
import { z } from 'zod';
import { todoPayload } from './todo-input.ts';

/** `[[...[1]...]]`, n arrays deep, built without recursion. */
function nested(n: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

const refusal = (f: () => unknown): SwitchboardError => {
  try {
    f();
  } catch (err) {
    return err as SwitchboardError;
  }
  throw new Error('expected a refusal');
};

describe('jsonDepthWithin', () => {
  it(`allows ${JSON_MAX_DEPTH} levels and refuses ${JSON_MAX_DEPTH + 1}; scalars are depth 0`, () => {
    expect(JSON_MAX_DEPTH).toBe(64);
    expect(jsonDepthWithin(nested(JSON_MAX_DEPTH))).toBe(true);
    expect(jsonDepthWithin(nested(JSON_MAX_DEPTH + 1))).toBe(false);
    for (const v of [null, 1, 'x', true, undefined]) expect(jsonDepthWithin(v, 0)).toBe(true);
    expect(jsonDepthWithin([], 0)).toBe(false);
    expect(jsonDepthWithin([[]], 2)).toBe(true);
  });

  it('does not recurse: 1,000,000 levels are measured without a stack overflow', () => {
    expect(jsonDepthWithin(nested(1_000_000))).toBe(false);
    expect(jsonDepthWithin(JSON.parse(`${'['.repeat(200_000)}${']'.repeat(200_000)}`))).toBe(false);
  });

  it('counts depth, not size: wide siblings are fine', () => {
    expect(jsonDepthWithin(Array.from({ length: 10_000 }, () => nested(JSON_MAX_DEPTH - 1)))).toBe(true);
  });

  it('the text measure agrees with the value measure', () => {
    for (const n of [0, 1, JSON_MAX_DEPTH, JSON_MAX_DEPTH + 1]) {
      expect(jsonTextDepthWithin(JSON.stringify(nested(n))), String(n)).toBe(jsonDepthWithin(nested(n)));
    }
  });
});

describe('the depth rule on inputs', () => {
  it('names the too-deep field of a body or of tool arguments, with the limit', () => {
    const e = refusal(() => requireFieldsJsonDepth({ title: 'x', payload: nested(5_000) }, 'body'));
    expect(e).toMatchObject({ code: 'invalid_argument', details: { field: 'payload' } });
    expect(e.message).toBe('payload: must nest at most 64 levels of arrays and objects');
    expect(refusal(() => requireFieldsJsonDepth([nested(100)], 'arguments')).details).toEqual({ field: 'arguments' });
    expect(() => requireFieldsJsonDepth({ payload: nested(JSON_MAX_DEPTH) }, 'body')).not.toThrow();
  });

  it('parseInput refuses before the schema walks the value (zod would overflow its stack)', () => {
    const schema = z.object({ id: z.string(), result: z.json().optional() }).strict();
    const e = refusal(() => parseInput(schema, { id: 'x', result: nested(20_000) }, 'arguments'));
    expect(e).toMatchObject({ code: 'invalid_argument', details: { field: 'result' } });
    expect(parseInput(schema, { id: 'x', result: nested(JSON_MAX_DEPTH) }, 'arguments').id).toBe('x');
  });

  it('todoPayload refuses a payload deeper than the limit, naming payload', () => {
    expect(todoPayload(undefined)).toEqual({});
    expect(refusal(() => todoPayload(nested(JSON_MAX_DEPTH + 1))).details).toEqual({ field: 'payload' });
  });
});

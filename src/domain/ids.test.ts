import { describe, expect, it } from 'vitest';
import { isTodoId, isUuid } from './ids.ts';

describe('ids', () => {
  it('a UUID in either case, nothing near it', () => {
    expect(isUuid('0f8fad5b-d9cb-469f-a165-70867728950e')).toBe(true);
    expect(isUuid('0F8FAD5B-D9CB-469F-A165-70867728950E')).toBe(true);
    for (const s of ['', '0f8fad5b-d9cb-469f-a165-70867728950', '0f8fad5b-d9cb-469f-a165-70867728950e\n', '\u00000f8fad5b-d9cb-469f-a165-70867728950e', 'x'.repeat(5000)]) {
      expect(isUuid(s), JSON.stringify(s.slice(0, 40))).toBe(false);
    }
  });
  it('a todo id is td_ and a lower-case UUID', () => {
    expect(isTodoId('td_0f8fad5b-d9cb-469f-a165-70867728950e')).toBe(true);
    expect(isTodoId('0f8fad5b-d9cb-469f-a165-70867728950e')).toBe(false);
    expect(isTodoId('td_%00')).toBe(false);
  });
});

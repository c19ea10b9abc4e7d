import { describe, expect, it } from 'vitest';
import { flattenToOneLine, hasControlCharacters, neutralizeText } from './neutralize.ts';

describe('the control-character policy', () => {
  it('covers C0, DEL, C1, the line and paragraph separators and the bidi embeddings, overrides and isolates', () => {
    const refused = ['\u0000', '\u001b', '\u007f', '\u0085', '\u009f', '\u2028', '\u2029', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069'];
    for (const c of refused) expect(hasControlCharacters(`a${c}b`), c.codePointAt(0)!.toString(16)).toBe(true);
    for (const c of ['é', '€', '\u200d', '\u00a0', '\u{1f600}', 'עברית']) expect(hasControlCharacters(`a${c}b`), c).toBe(false);
  });

  it('text from outside has them replaced by a space, one line', () => {
    expect(flattenToOneLine('invoice \u202egnp.exe\u2028next\u0085line')).toBe('invoice gnp.exe next line');
    expect(neutralizeText('a\u2066b\u2069c')).toBe('a b c');
  });
});

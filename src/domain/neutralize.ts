/**
 * The one control-character policy: C0 and C1 controls, DEL, the Unicode line and paragraph
 * separators, and the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
 * U+2066-U+2069: they make text display in an order other than it reads), everything that breaks
 * a line, drives a terminal or disguises text. One-line fields (titles, agent names) refuse them;
 * text from outside has them replaced by a space.
 */
// eslint-disable-next-line no-control-regex
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const CONTROL_RUNS = new RegExp(`${CONTROL_CHARACTERS.source}+`, 'g');

export const hasControlCharacters = (s: string): boolean => CONTROL_CHARACTERS.test(s);

/** Every run of control characters becomes one space, then whitespace runs collapse; trimmed. */
export const flattenToOneLine = (s: string): string => s.replace(CONTROL_RUNS, ' ').replace(/\s+/g, ' ').trim();

/**
 * Text from outside (client names, todo titles) travels into logs and into agents' context.
 * Strip control characters, collapse whitespace runs and cap the length.
 */
export function neutralizeText(raw: unknown, max = 128): string {
  if (typeof raw !== 'string') return '';
  return [...flattenToOneLine(raw)].slice(0, max).join('');
}

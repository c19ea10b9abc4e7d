/**
 * Text from outside (client names, todo titles) travels into logs and into agents' context.
 * Strip control characters, collapse whitespace runs and cap the length.
 */
export function neutralizeText(raw: unknown, max = 128): string {
  if (typeof raw !== 'string') return '';
  // eslint-disable-next-line no-control-regex
  const cleaned = raw.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').replace(/\s+/g, ' ').trim();
  return [...cleaned].slice(0, max).join('');
}
